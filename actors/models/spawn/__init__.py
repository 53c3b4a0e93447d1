"""Starting model commands: the starter process, the model's process group and its pipes."""

from __future__ import annotations

from teams_runtime.actors.models.spawn._processes import GRACE_SECONDS, end_group, start_model
from teams_runtime.actors.models.spawn._starter import ModelStarter

__all__ = [
    "GRACE_SECONDS",
    "ModelStarter",
    "end_group",
    "start_model",
]
