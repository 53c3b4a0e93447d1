"""The request's deliverable: the last non-empty ``output`` a role gave, kept in the record's
``result`` until a later role gives another (``codecs.model._deliverable`` says what one is).

A writer's draft then outlives the reviewer's "Approved.": the request's ``result`` holds the
finisher's summary and the draft, the next role reads the work so far in ``result.output``, and
the report events keep each answer as it was given.
"""

from __future__ import annotations

from typing import Any

import msgspec

from teams_runtime.codecs.model import OUTPUT_KEY, RoleResult, has_output
from teams_runtime.codecs.projection_reply import Projection

__all__ = ["carried_output", "keep_output"]


def carried_output(projection: Projection) -> Any:
    """The deliverable the record's ``result`` holds now (``None``: none, or none worth keeping)."""
    result = projection.value("result")
    output = result.get(OUTPUT_KEY) if isinstance(result, dict) else None
    return output if has_output(output) else None


def keep_output(result: RoleResult, carried: Any) -> RoleResult:
    """``result`` as the record's ``result`` keeps it: with its own ``output`` when it gave one,
    else with ``carried`` (the one before it), after its other keys."""
    if has_output(result.output) or not has_output(carried):
        return result
    return msgspec.structs.replace(result, extra={**result.extra, OUTPUT_KEY: carried})
