"""What a Team reports: the summary of a run, each role as the worker sees it now (what
``Team.status`` gives a live view), the line it logs when it starts, and a lease that differs
from the config's. Ids and counts only, never content."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import msgspec

from teams_runtime._logs import logger
from teams_runtime.actors.models import ModelBackend
from teams_runtime.actors.roles import Working
from teams_runtime.codecs.config import TeamConfig
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.storage import DeferredEnvelope, WorkQueue

__all__ = ["RoleStatus", "RunSummary", "log_lease_difference", "log_start"]


class RunSummary(msgspec.Struct, kw_only=True):
    """What one run did. Each envelope the run finished counts once, by how it ended:
    ``done`` (its outcome recorded, the request handed on or ended as the role said, or the
    request found ended), ``failed`` (the request is failed by it) or ``rejected`` (set aside
    unusable); ``finished`` is their sum. ``model_calls`` counts every call made to a model
    (its prompt handed to the backend), ``answered`` those that got an answer back (valid or
    not): a call to a model that never answered is a call, not an answer."""

    done: int = 0
    failed: int = 0
    deferred: int = 0  # times an envelope was deferred (one may be deferred, then done)
    rejected: int = 0
    waiting: int = 0  # envelopes put in the inbox for a person's answer
    # Waiting answers whose answer_within ran out while this run served their role:
    # `on_failure: fail` failed the request (timed out), `requeue` let it wait again.
    answers_timed_out: int = 0
    answers_renewed: int = 0
    model_calls: int = 0
    answered: int = 0
    # `once`: envelopes this run deferred and left (not due within its wait), and when the
    # first of them is due (Unix time); any worker takes them then.
    left_deferred: int = 0
    next_attempt: float | None = None
    # `once`: the deferred envelopes it left, by when they are due: those it deferred itself
    # (``left_deferred`` counts them), and those an earlier run deferred that were not due
    # yet (it neither took nor waited for them).
    left_envelopes: list[DeferredEnvelope] = msgspec.field(default_factory=list)
    not_due: list[DeferredEnvelope] = msgspec.field(default_factory=list)
    # The records themselves only when the Team is asked to keep them (a service that runs
    # for weeks must not grow); they are in the logs either way.
    prompts: list[PromptRecord] = msgspec.field(default_factory=list)

    @property
    def finished(self) -> int:
        """The envelopes this run took to an end: done, failed or rejected."""
        return self.done + self.failed + self.rejected

    @property
    def handled(self) -> int:
        """``done``, by its older name."""
        return self.done

    @property
    def prompts_sent(self) -> int:
        """``model_calls``, by its older name."""
        return self.model_calls


class RoleStatus(msgspec.Struct, frozen=True, kw_only=True):
    """One role as this worker sees it now (what ``Team.status`` gives a live view): the
    requests it is handling and since when, its outcomes so far in this run, and the envelopes
    waiting for it in the queue (for any worker); for a person's role (``person``), its answers
    waiting in the inbox. Ids and counts only, never content."""

    role: str
    working: list[Working]
    handled: int
    failed: int
    queued: int
    person: bool = False
    answers: int = 0


def log_start(
    root: Path,
    config: TeamConfig,
    queue: WorkQueue,
    backends: Mapping[str, ModelBackend],
    served: Sequence[str],
) -> None:
    """Log that a team started (where, which worker, backends, roles, prompt_context), and
    warn when the shared queue's lease is not the one this host's config names."""
    context_config = config.prompt_context
    logger.info(
        "team started in {} as worker {} (backend {}, roles {}; prompt_context "
        "enabled={} recent_events={} max_events={})",
        root,
        getattr(queue, "worker_id", "-"),
        ",".join(sorted({backend.name for backend in backends.values()})),
        ",".join(served),
        str(context_config.enabled).lower(),
        context_config.recent_events,
        context_config.max_events,
    )
    log_lease_difference(config.queue.lease_seconds, queue.lease_seconds)


def log_lease_difference(wanted: float, ack_wait: float) -> None:
    """Warn when this host's ``queue.lease_seconds`` (``wanted``) is not the lease the team's
    queue has (``ack_wait``: a shared queue made by a host set otherwise), which this worker
    uses."""
    if abs(wanted - ack_wait) >= 0.001:
        logger.warning(
            "queue.lease_seconds is {:g} here, but the team's queue was created with an "
            "ack wait of {:g} s: this worker uses {:g} s (renewing every {:g} s); "
            "docs/scaling.md says how to change it",
            wanted,
            ack_wait,
            ack_wait,
            ack_wait / 3,
        )
