"""The names prompts are known by: their kinds, each kind's purpose (the name the logs and
``metrics`` use), and what a metrics report can group prompt records by.

Plain constants that import nothing heavy: the CLI's parser offers them as choices before any
command runs.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["GROUP_KEYS", "KIND_NAMES", "PROMPT_KINDS", "PURPOSES", "PromptKind"]

PromptKind = Literal["task", "repair", "research_decision", "version_control"]
PROMPT_KINDS: tuple[PromptKind, ...] = ("task", "repair", "research_decision", "version_control")
PURPOSES: dict[PromptKind, str] = {
    "task": "role_task",
    "repair": "contract_repair",
    "research_decision": "research_decision",
    "version_control": "version_control",
}
# What users type for a kind (`prompt --kind`): its purpose, the name the logs and `metrics`
# use, so there is one vocabulary. The older spellings `task` and `repair` stay accepted.
KIND_NAMES: dict[str, PromptKind] = {
    **{purpose: kind for kind, purpose in PURPOSES.items()},
    "task": "task",
    "repair": "repair",
}

# What `teams-runtime metrics --by` can group by (day and hour: the record's own local ones).
GROUP_KEYS = ("role", "purpose", "enabled", "model", "day", "hour")
