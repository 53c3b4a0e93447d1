"""The prompt a role would be sent, built without a model's reply: what ``prompt`` shows and
``replay`` rebuilds. A repair shows the errors an empty reply (``{}``) would get."""

from __future__ import annotations

from teams_runtime.codecs.config import Cast
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.model import validate_reply
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.policy.prompts import (
    PromptBundle,
    PromptKind,
    build_prompt,
    next_roles_of,
    reply_kind_of,
)

__all__ = ["EMPTY_REPLY", "preview_prompt"]

EMPTY_REPLY = "{}"  # the reply a previewed repair is a repair of


def preview_prompt(
    kind: PromptKind,
    *,
    role: str,
    projection: Projection,
    envelope: MessageEnvelope,
    cast: Cast,
) -> PromptBundle:
    """The ``kind`` prompt ``role`` of ``cast`` would be sent on ``projection``; a repair is
    of the role's own kind (a role outside the team: a task), for an empty reply."""
    repairing: PromptKind = cast.prompt_kind_of(role) if role in cast.roles else "task"
    errors: list[str] = []
    if kind == "repair":
        errors = validate_reply(
            EMPTY_REPLY,
            kind=reply_kind_of(kind, repairing),
            request_id=envelope.request_id,
            role=role,
            next_roles=next_roles_of(role, cast),
        ).issues
    return build_prompt(
        kind,
        role=role,
        projection=projection,
        envelope=envelope,
        repairing=repairing,
        errors=errors,
        previous=EMPTY_REPLY,
        cast=cast,
    )
