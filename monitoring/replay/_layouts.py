"""The prompt layouts a replay renders under: each one's projection of a request at a hop and
its prompt's text. ``upstream`` is today's prompt, byte for byte (``policy.prompts``)."""

from __future__ import annotations

from typing import Literal

import msgspec

from teams_runtime.codecs.config import PromptContextConfig
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.monitoring.replay._request_views import RequestView
from teams_runtime.policy.prompts import PromptBundle

__all__ = ["LAYOUTS", "Layout", "LayoutName"]

LayoutName = Literal["upstream"]
LAYOUTS: tuple[LayoutName, ...] = ("upstream",)


class Layout(msgspec.Struct, frozen=True):
    """A layout by name, with the step its projection re-anchors by (where it has one)."""

    name: LayoutName
    step: int | None = None

    def project(self, view: RequestView, total: int, config: PromptContextConfig) -> Projection:
        """The projection the prompt at a hop of ``total`` events embeds."""
        return view.projection(total, config)

    def render(self, bundle: PromptBundle) -> str:
        """The prompt's text as it would be sent."""
        return bundle.text()
