"""Role actors: claimed envelopes turned into model calls and persisted outcomes, and a person's
role (waits and answers)."""

from __future__ import annotations

from teams_runtime.actors.roles._actor import Outcome, RoleActor, Working
from teams_runtime.actors.roles._outcome_writes import MAX_RACES
from teams_runtime.actors.roles._person_answers import (
    Answered,
    answer,
    read_inbox,
    waiting_prompt,
)
from teams_runtime.actors.roles._person_waits import InboxLook, is_person, tidy_inbox

__all__ = [
    "MAX_RACES",
    "Answered",
    "InboxLook",
    "Outcome",
    "RoleActor",
    "Working",
    "answer",
    "is_person",
    "read_inbox",
    "tidy_inbox",
    "waiting_prompt",
]
