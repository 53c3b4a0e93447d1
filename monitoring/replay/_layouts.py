"""The prompt layouts a replay renders under, each a policy's ``prompt_context`` laid out so.

A prompt's projection and text follow its config's layout, as in a run (``policy.projection``,
``policy.prompts``): ``upstream`` is today's prompt, byte for byte; ``shared_prefix`` puts what
every role of a request shares first and re-anchors its tail every ``step`` events.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from teams_runtime.codecs.config import LAYOUTS, PromptContextConfig
from teams_runtime.codecs.config import Layout as LayoutName

__all__ = ["LAYOUTS", "Layout", "LayoutName", "asked_layouts"]


class Layout(msgspec.Struct, frozen=True):
    """A layout by name, with the step its projection re-anchors by (``None``: the config's
    ``prompt_context.step``; only ``shared_prefix`` has one)."""

    name: LayoutName
    step: int | None = None

    def context(self, policy: PromptContextConfig, default_step: int) -> PromptContextConfig:
        """A policy's ``prompt_context`` laid out so: the same counts and switch, this layout
        and (for ``shared_prefix``) its step, else ``default_step``."""
        if self.name == "shared_prefix":
            step = self.step or default_step
            return msgspec.structs.replace(policy, layout=self.name, step=step)
        return msgspec.structs.replace(policy, layout=self.name)


def asked_layouts(names: Sequence[LayoutName], step: int | None) -> list[Layout]:
    """The layouts asked for, each once in the order asked, ``step`` given to
    ``shared_prefix``; ``ValueError`` for a step without it (it would do nothing)."""
    if step is not None and "shared_prefix" not in names:
        raise ValueError(
            "--step applies only with the shared_prefix layout: add --layout shared_prefix "
            "(or leave --layout out for both)."
        )
    return [
        Layout(name, step if name == "shared_prefix" else None) for name in dict.fromkeys(names)
    ]
