"""The statuses of a role's result, of a commit, and the request statuses that end a
request's work: a module of constants only, so the command line can offer them as choices
(``answer --status``) and ``status`` can sort requests without loading the contract or the
outcome policy, which start-up does not need."""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "COMMIT_STATUSES",
    "ENDED",
    "RESULT_STATUSES",
    "CommitStatus",
    "ResultStatus",
]

ResultStatus = Literal["completed", "blocked", "failed"]
CommitStatus = Literal["committed", "no_changes", "failed", "no_repo"]
RESULT_STATUSES: tuple[str, ...] = get_args(ResultStatus)
COMMIT_STATUSES: tuple[str, ...] = get_args(CommitStatus)

ENDED = ("cancelled", "failed")  # statuses after which a request's envelopes are not handled
