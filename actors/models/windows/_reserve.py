"""The answer's reserve: how much of a server's window an ``auto`` prompt budget leaves for the
answer, and the ``max_tokens`` sent so that the server never answers past the window."""

from __future__ import annotations

from typing import NamedTuple

from teams_runtime.exceptions import ConfigError

__all__ = ["MOST_DEFAULT_RESERVE", "AutoBudget", "auto_budget", "default_reserve"]

# Without `max_tokens`, an answer may take a quarter of the window, and never more than this.
# A role's result is one JSON object (a status, a summary, artifacts, a hand-off): a few
# hundred tokens as a rule, 2,048 leaves a long one room; a quarter keeps three quarters of a
# small window (3,072 of 4,096) for the prompt.
MOST_DEFAULT_RESERVE = 2048


class AutoBudget(NamedTuple):
    """An ``auto`` budget: the most tokens a prompt may take, and the ``max_tokens`` to send
    with it (the prompt's budget and the answer's add up to the window)."""

    prompt_tokens: int
    max_tokens: int


def default_reserve(window: int) -> int:
    """The answer's tokens when ``max_tokens`` is not set: a quarter of ``window``, at most
    ``MOST_DEFAULT_RESERVE``, at least 1."""
    return max(min(window // 4, MOST_DEFAULT_RESERVE), 1)


def auto_budget(window: int, max_tokens: int | None) -> AutoBudget:
    """The ``auto`` budget of a server whose window is ``window`` tokens: the window less the
    answer's reserve, ``max_tokens`` when the config sets it (and sent as it is), else
    ``default_reserve(window)`` (then sent as ``max_tokens``, or the server could answer past
    the window). Raises ``ConfigError`` when the reserve leaves no room for a prompt."""
    reserve = max_tokens if max_tokens is not None else default_reserve(window)
    if reserve >= window:
        named = (
            f"model.openai.max_tokens ({reserve})"
            if max_tokens is not None
            else (f"the answer's least reserve ({reserve} token)")
        )
        raise ConfigError(
            f"{named} leaves no room for a prompt in the model server's window of {window} "
            "tokens: lower max_tokens, or start the server with a larger context."
        )
    return AutoBudget(prompt_tokens=window - reserve, max_tokens=reserve)
