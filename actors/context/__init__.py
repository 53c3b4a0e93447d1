"""The ContextActor, the one owner of a workspace's request store, and the handle roles ask it
through."""

from __future__ import annotations

from teams_runtime.actors.context._actor import DEFAULT_ASK_TIMEOUT, open_context
from teams_runtime.actors.context._handle import ContextHandle

__all__ = [
    "DEFAULT_ASK_TIMEOUT",
    "ContextHandle",
    "open_context",
]
