"""The ``prompt_context`` section: how much of a request's history goes into prompts, how the
prompt is laid out (``layout``, ``step``), and the token budget of a role's prompt (global, and
``roles.<role>.prompt_context``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

from teams_runtime.codecs.config._setting_checks import (
    CONFIG_FILE_NAME,
    event_count_problem,
    whole_number_hint,
)
from teams_runtime.exceptions import ConfigError

__all__ = [
    "DEFAULT_STEP",
    "LAYOUTS",
    "MOST_PROMPT_TOKENS",
    "BudgetSource",
    "Layout",
    "PromptBudget",
    "PromptContextConfig",
    "RolePromptContext",
    "budget_problem",
    "prompt_context_from_block",
    "role_prompt_context_from_block",
]

_PREFIX = f"{CONFIG_FILE_NAME} prompt_context"

# The largest budget a prompt may be given: far beyond any model's window, small enough that a
# typo of a few digits too many is an error naming the setting.
MOST_PROMPT_TOKENS = 100_000_000

# A budget: a number of tokens, ``auto`` (the server's own window less the answer's reserve),
# or ``None``: no budget (today's selection alone). A role's ``none`` says so out loud: no
# budget for that role whatever ``prompt_context`` gives every role.
MaxPromptTokens = int | Literal["auto"] | None
RoleMaxPromptTokens = int | Literal["auto", "none"] | None

# How a prompt is laid out (docs/compaction.md, "The layout"): ``upstream`` is the spec's prompt
# (the role's header first); ``shared_prefix`` puts what every role of a request shares first,
# so a model server's prompt cache can serve it, and moves the projection's tail in steps.
Layout = Literal["upstream", "shared_prefix"]
LAYOUTS: tuple[Layout, ...] = ("upstream", "shared_prefix")

# Events the shared_prefix layout's tail grows by before it moves on (re-anchors): a hop or two
# of a team writes a few events, so a prompt keeps its prefix for several hops.
DEFAULT_STEP = 8


def budget_problem(value: object, *, none: bool = False) -> str | None:
    """Why ``value`` cannot be a ``max_prompt_tokens`` (``must be ...``), ``None`` if it can;
    ``none``: a role's, which may also be ``none``."""
    if value is None or (value == "auto" and isinstance(value, str)):
        return None
    if none and value == "none" and isinstance(value, str):
        return None
    if type(value) is not int or value < 1:  # bool is an int subclass: `true` is no budget
        hint = whole_number_hint(value, MOST_PROMPT_TOKENS)
        if not none and value == "none":
            hint = " (none is a role's word: leave the key out for no budget)"
        return (
            f"must be a positive integer, auto or none{hint}"
            if none
            else (f"must be a positive integer or auto{hint}")
        )
    if value > MOST_PROMPT_TOKENS:
        return f"must be at most {MOST_PROMPT_TOKENS}"
    return None


class PromptContextConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How a request's events are projected into prompts (spec section 3), and the token
    budget of every role's prompt unless the role sets its own (``max_prompt_tokens``).

    Constructing one directly is checked like the YAML block, in the same order and with the
    same messages, so a config with ``recent_events > max_events`` can never be used.
    """

    enabled: bool = True
    recent_events: int = 8
    max_events: int = 16
    max_prompt_tokens: MaxPromptTokens = None
    layout: Layout = "upstream"
    step: int = DEFAULT_STEP  # only shared_prefix moves its tail in steps

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
        problem = budget_problem(self.max_prompt_tokens)
        if problem is not None:
            raise ConfigError(f"{_PREFIX}.max_prompt_tokens {problem}.")
        if self.layout not in LAYOUTS:
            raise ConfigError(
                f"{_PREFIX}.layout must be upstream (the default) or shared_prefix, not "
                f"{self.layout!r}."
            )
        problem = event_count_problem(self.step)
        if problem is not None:
            raise ConfigError(f"{_PREFIX}.step {problem} (events the tail grows by).")


class RolePromptContext(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """``roles.<role>.prompt_context``: the one ``prompt_context`` setting a role may have of
    its own (every role gets the same projection; only its budget may differ)."""

    max_prompt_tokens: RoleMaxPromptTokens = None


BudgetSource = Literal["global", "role", "none"]


class PromptBudget(msgspec.Struct, frozen=True, kw_only=True):
    """A role's budget in force: ``max_prompt_tokens`` (a number, ``auto`` or ``None``) and
    where it is written (``role``: ``roles.<role>.prompt_context``, ``global``:
    ``prompt_context``, ``none``: nowhere, so no budget)."""

    max_prompt_tokens: MaxPromptTokens = None
    source: BudgetSource = "none"


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
    # A count or the budget left empty takes its default; `enabled` left empty stays an error
    # (the rollback switch is said out loud).
    given = {key: value for key, value in block.items() if value is not None or key == "enabled"}
    config = PromptContextConfig(**given)
    if "step" in given and config.layout != "shared_prefix":
        # Written, it was meant to do something: only the shared_prefix layout moves in steps.
        raise ConfigError(
            f"{_PREFIX}.step applies only with layout: shared_prefix; set "
            "prompt_context.layout: shared_prefix, or remove step."
        )
    return config


def role_prompt_context_from_block(role: str, block: object) -> RolePromptContext:
    """Check ``roles.<role>.prompt_context``: only ``max_prompt_tokens`` may be there (any other
    ``prompt_context`` key is the same for every role, so it is refused naming why); missing or
    ``null`` gives none of the role's own."""
    path = f"{CONFIG_FILE_NAME} roles.{role}.prompt_context"
    if block is None:
        return RolePromptContext()
    if not isinstance(block, Mapping):
        raise ConfigError(f"{path} must be a mapping.")
    value = block.get("max_prompt_tokens")
    problem = budget_problem(value, none=True)
    if problem is not None:
        raise ConfigError(f"{path}.max_prompt_tokens {problem}.")
    return RolePromptContext(max_prompt_tokens=value)
