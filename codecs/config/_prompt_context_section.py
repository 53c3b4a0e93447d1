"""The ``prompt_context`` section: how much of a request's history goes into prompts."""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from teams_runtime.codecs.config._setting_checks import event_count_problem
from teams_runtime.exceptions import ConfigError

__all__ = ["PromptContextConfig", "prompt_context_from_block"]

_PREFIX = "team_runtime.yaml prompt_context"


class PromptContextConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How a request's events are projected into prompts (spec section 3).

    Constructing one directly is checked like the YAML block, in the same order and with the
    same messages, so a config with ``recent_events > max_events`` can never be used.
    """

    enabled: bool = True
    recent_events: int = 8
    max_events: int = 16

    def __post_init__(self) -> None:
        if type(self.enabled) is not bool:
            raise ConfigError(f"{_PREFIX}.enabled must be a boolean.")
        for name, value in (("recent_events", self.recent_events), ("max_events", self.max_events)):
            problem = event_count_problem(value)
            if problem is not None:
                raise ConfigError(f"{_PREFIX}.{name} {problem}.")
        if self.max_events < self.recent_events:
            raise ConfigError(
                f"{_PREFIX}.max_events must be greater than or equal to recent_events."
            )


def prompt_context_from_block(block: object) -> PromptContextConfig:
    """Check a ``prompt_context`` block (its keys already checked); missing, ``null`` or ``{}``
    gives the defaults.

    Unknown keys are errors naming the nearest valid key (issue 14 overrides spec section 3,
    which ignored them: a typo such as ``max_event`` silently kept the default): that is
    ``check_keys`` (``unknown_keys``), run on the whole file first.
    """
    if block is None:
        return PromptContextConfig()
    if not isinstance(block, Mapping):
        raise ConfigError(f"{_PREFIX} must be a mapping.")
    # A count left empty takes its default; `enabled` left empty stays an error (the rollback
    # switch is said out loud).
    given = {key: value for key, value in block.items() if value is not None or key == "enabled"}
    return PromptContextConfig(**given)
