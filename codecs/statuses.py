"""The statuses of a role's result, of a commit, and of a request, with the named sets of
request statuses the runtime decides by: constants (and a look-up) only, so the command line
can offer them as choices (``answer --status``) and ``status`` can sort requests without
loading the contract or the outcome policy, which start-up does not need."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "COMMIT_STATUSES",
    "ENDED",
    "FINISHED",
    "REQUEST_STATUSES",
    "RESULT_STATUSES",
    "CommitStatus",
    "EndedStatus",
    "RequestStatus",
    "ResultStatus",
    "ended_status",
]

ResultStatus = Literal["completed", "blocked", "failed"]
CommitStatus = Literal["committed", "no_changes", "failed", "no_repo"]
RESULT_STATUSES: tuple[ResultStatus, ...] = get_args(ResultStatus)
COMMIT_STATUSES: tuple[CommitStatus, ...] = get_args(CommitStatus)

# What the runtime writes as a request's `status`: new work waits (`queued`), a role has it
# (`in_progress`), or it ended as its last role's result did (`completed`, `blocked`,
# `failed`); `failed` too at the hop limit and when a model or a person gave no reply;
# `cancelled` by `teams-runtime cancel`. A record may hold anything else: it is read as text.
RequestStatus = Literal["queued", "in_progress", "completed", "blocked", "failed", "cancelled"]
REQUEST_STATUSES: tuple[RequestStatus, ...] = get_args(RequestStatus)

# A request whose work has ended: its envelopes are dropped unhandled, no model is called for
# it, an outcome recorded for it now is only its report. (`retry` takes a failed one up again.)
EndedStatus = Literal["cancelled", "failed"]
ENDED: frozenset[RequestStatus] = frozenset(get_args(EndedStatus))
# A request that has finished: more work for it reopens it, and only when asked
# (`submit --reopen`). A `blocked` one is not: more work is what it waits for.
FINISHED: frozenset[RequestStatus] = ENDED | {"completed"}
_ENDED_NAMES: dict[object, EndedStatus] = {name: name for name in get_args(EndedStatus)}


def ended_status(value: object) -> EndedStatus | None:
    """The status in ``ENDED`` a record's ``status`` (any JSON value, as read) names, if any."""
    return _ENDED_NAMES.get(value) if isinstance(value, str) else None
