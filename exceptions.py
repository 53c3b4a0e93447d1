"""Errors raised by teams-runtime.

Every error is a ``TeamsRuntimeError``; its message says what happened, to which file, field or
request, and what to do. Third-party errors are re-raised as ours ``from`` the original.

    TeamsRuntimeError
    ├── ConfigError (also ValueError)     team_runtime.yaml or a config value is invalid
    ├── RecordError                       a request record file cannot be used
    │   ├── UnsafeRequestIdError (also ValueError)   the id is not a safe file name
    │   └── UnknownRequestError           no record exists for the id
    ├── RequestStateError                 the request's status does not allow what was asked
    ├── EnvelopeError                     a queued envelope file cannot be used
    ├── ModelFailure                      one model call failed (a content-free reason)
    │   └── PromptTooLarge                the prompt does not fit the model's context
    ├── StorageError                      the NATS server cannot be reached or refused a call
    ├── AnswerRefused                     a person's answer was not recorded (and why)
    ├── ActorStopped                      the actor was stopped before it answered
    └── AskTimeout (also TimeoutError)    the actor did not answer before the deadline
        └── ActorBusy                     the actor took no more work: at its limit
"""

from __future__ import annotations

from typing import Any

from teams_runtime._deprecated import renamed

__all__ = [
    "ActorBusy",
    "ActorStopped",
    "AnswerRefused",
    "AskTimeout",
    "ConfigError",
    "EnvelopeError",
    "ModelFailure",
    "PromptTooLarge",
    "RecordError",
    "RequestStateError",
    "StorageError",
    "TeamsRuntimeError",
    "UnknownRequestError",
    "UnsafeRequestIdError",
]


class TeamsRuntimeError(Exception):
    """Base class of every error teams-runtime raises on purpose."""


class ConfigError(TeamsRuntimeError, ValueError):
    """Configuration is invalid; the message names the file or field."""


class RecordError(TeamsRuntimeError):
    """A request record cannot be read, decoded or written; the message names the file."""


class UnsafeRequestIdError(RecordError, ValueError):
    """A request id is not a safe file name and never reaches the filesystem."""


class UnknownRequestError(RecordError):
    """No request record exists for the id."""


class RequestStateError(TeamsRuntimeError):
    """The request's status does not allow what was asked (more work for a finished request
    without reopening it, a retry of one that has not failed); nothing was written."""


class EnvelopeError(TeamsRuntimeError):
    """A queued envelope file cannot be used; the message names the file."""


class ModelFailure(TeamsRuntimeError):
    """One model call failed; the message is a content-free reason (no prompt or output).

    What the model printed travels beside the message, for the attempts folder and never for
    logs: ``stderr_tail`` (its last 8 KiB of stderr), ``output`` (its stdout text; for a model
    server, what it answered: an error body, or the text that came before the failure) and
    ``exit_status`` (``None`` when it did not exit by itself, and for a model server), and
    ``finish_reason``: why a model server said its answer ended, when it said so before the
    call failed (one of ``codecs.model._replies.FINISH_REASONS``; ``None`` otherwise).
    """

    def __init__(
        self,
        reason: str,
        *,
        stderr_tail: str = "",
        output: str = "",
        exit_status: int | None = None,
        finish_reason: str | None = None,
    ) -> None:
        super().__init__(reason)
        self.stderr_tail = stderr_tail
        self.output = output
        self.exit_status = exit_status
        self.finish_reason = finish_reason


class PromptTooLarge(ModelFailure):
    """The prompt does not fit the model server's context: sending it again unchanged cannot
    help, so it is not (the reason names the prompt's size and ``max_events``)."""


class ActorStopped(TeamsRuntimeError):
    """The actor stopped (or was never running) before it could answer."""


class AskTimeout(TeamsRuntimeError, TimeoutError):
    """An ask was not answered before its deadline."""


class ActorBusy(AskTimeout):
    """The actor was at its limit of work in flight and did not take the ask; ask again later.

    An ``AskTimeout``: callers that wait and ask again after a timeout do the same here, and
    nothing was done (no write)."""


class StorageError(TeamsRuntimeError):
    """The shared storage (a NATS server) cannot be reached or refused a request."""


class AnswerRefused(TeamsRuntimeError):
    """A person's answer (``teams-runtime answer``) was not recorded: nothing waits under that
    id, it was answered already, its request ended, or the result breaks the role's contract.
    Nothing was written."""


# Renamed in issue 30 ("backend" is a model backend; where requests are kept is storage): the
# old name is the same class, so ``except BackendError`` still catches it, for one release.
_RENAMED = {"BackendError": "StorageError"}


def __getattr__(name: str) -> Any:
    """An old name of this module's (``_RENAMED``), with a ``DeprecationWarning``."""
    return renamed(__name__, name, _RENAMED)
