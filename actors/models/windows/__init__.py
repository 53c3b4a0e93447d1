"""Model servers' windows and tokenizers: how many tokens a server's model holds (``probe_window``
-> ``ServerWindow``), the server's own count of a text's tokens (``find_tokenizer`` ->
``ServerTokenizer``), both kept for a run (``ServerFacts``), and the answer's reserve an ``auto``
prompt budget leaves (``auto_budget``)."""

from __future__ import annotations

from teams_runtime.actors.models.windows._facts import ServerFacts
from teams_runtime.actors.models.windows._reserve import (
    MOST_DEFAULT_RESERVE,
    AutoBudget,
    auto_budget,
    default_reserve,
)
from teams_runtime.actors.models.windows._tokenizer import (
    ServerTokenizer,
    TokenizerGone,
    find_tokenizer,
)
from teams_runtime.actors.models.windows._window import probe_window
from teams_runtime.actors.models.windows._window_readings import ServerWindow

__all__ = [
    "MOST_DEFAULT_RESERVE",
    "AutoBudget",
    "ServerFacts",
    "ServerTokenizer",
    "ServerWindow",
    "TokenizerGone",
    "auto_budget",
    "default_reserve",
    "find_tokenizer",
    "probe_window",
]
