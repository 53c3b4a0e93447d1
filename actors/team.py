"""The Team supervisor: the ContextActor and one role actor per role, in one task group.

It loads ``team_runtime.yaml`` once (a restart picks up changes), hands the same config to
every role actor and to the ContextActor, and feeds queued envelopes to their roles.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import msgspec
from anyio.abc import TaskGroup, TaskStatus
from loguru import logger

from teams_runtime.actors.backend_checks import start_problem
from teams_runtime.actors.context import DEFAULT_ASK_TIMEOUT, ContextHandle, open_context
from teams_runtime.actors.model_backends import ModelBackend, make_backend, server_away
from teams_runtime.actors.model_servers import ModelServers
from teams_runtime.actors.request_locks import RequestLocks
from teams_runtime.actors.role_actor import Outcome, RoleActor, Working
from teams_runtime.actors.tracing import Tracing, active, stamping
from teams_runtime.actors.tracing_setup import tracing_for
from teams_runtime.codecs.config import TeamConfig
from teams_runtime.codecs.formats import count_of
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.codecs.roles import ROLES, check_role
from teams_runtime.exceptions import ConfigError, TeamsRuntimeError
from teams_runtime.storage import (
    Claim,
    RecordStore,
    WorkQueue,
    Workspace,
    load_team_config,
)
from teams_runtime.storage.backends import open_queue, open_store

__all__ = ["RoleStatus", "RunSummary", "Team"]


class RunSummary(msgspec.Struct, kw_only=True):
    """What one run did."""

    handled: int = 0
    failed: int = 0
    deferred: int = 0
    rejected: int = 0
    prompts_sent: int = 0
    # The records themselves only when the Team is asked to keep them (a service that runs
    # for weeks must not grow); they are in the logs either way.
    prompts: list[PromptRecord] = msgspec.field(default_factory=list)


class RoleStatus(msgspec.Struct, frozen=True, kw_only=True):
    """One role as this worker sees it now (what ``Team.status`` gives a live view): the
    requests it is handling and since when, its outcomes so far in this run, and the envelopes
    waiting for it in the queue (for any worker). Ids and counts only, never content."""

    role: str
    working: list[Working]
    handled: int
    failed: int
    queued: int


class Team:
    """Runs the roles of one workspace."""

    def __init__(
        self,
        workspace: str | Path,
        config: TeamConfig | None = None,
        *,
        backend: ModelBackend | None = None,
        concurrency: int = 4,
        poll_interval: float = 0.1,
        keep_prompt_records: bool = False,
        store: RecordStore | None = None,
        queue: WorkQueue | None = None,
        ask_timeout: float = DEFAULT_ASK_TIMEOUT,
        roles: Sequence[str] | None = None,
        tracing: Tracing | None = None,
    ) -> None:
        self.workspace = Workspace(workspace)
        self.config = config if config is not None else load_team_config(self.workspace.root)
        self.served = tuple(check_role(role) for role in roles) if roles else ROLES
        self.servers = ModelServers(self.workspace)  # which model servers are away, and since
        self.backends = self._role_backends(backend)
        self.store = store if store is not None else open_store(self.workspace, self.config)
        self.queue = queue if queue is not None else open_queue(self.workspace, self.config)
        # OpenTelemetry spans and metrics (telemetry.otel); a no-op without it.
        self.tracing = tracing if tracing is not None else tracing_for(self.config, self.served)
        self.roles: dict[str, RoleActor] = {}
        self._ask_timeout = ask_timeout
        self._concurrency = concurrency
        self._poll_interval = poll_interval
        self._in_flight = 0  # envelopes told to a role and not finished yet
        self._busy: Counter[str] = Counter()  # the same, per role
        self._handled: Counter[str] = Counter()  # outcomes per role, for `status`
        self._failed: Counter[str] = Counter()
        self._inbox_size = 256
        self._progress = anyio.Event()
        self._keep_prompt_records = keep_prompt_records
        self.summary = RunSummary()

    def _role_backends(self, backend: ModelBackend | None) -> dict[str, ModelBackend]:
        """Each served role's backend: ``backend`` for all, or one made from each role's model
        (roles whose models are the same share one). Raises ``ConfigError`` if a role's model
        cannot answer on this host (its command missing, its key's variable unset)."""
        if backend is not None:
            return dict.fromkeys(self.served, backend)
        models = [(role, self.config.model_for(role)) for role in self.served]
        problem = start_problem(models, self.workspace.root)
        if problem is not None:
            raise ConfigError(problem)
        made: dict[bytes, ModelBackend] = {}
        backends = {}
        for role, model in models:
            same = msgspec.json.encode(model)
            if same not in made:
                made[same] = make_backend(model, self.workspace.root, servers=self.servers)
            backends[role] = made[same]
        return backends

    def _prompt_sent(self, record: PromptRecord) -> None:
        self.summary.prompts_sent += 1
        if self._keep_prompt_records:
            self.summary.prompts.append(record)

    def _finished(self, claim: Claim, outcome: Outcome) -> None:
        self._in_flight -= 1
        self._busy[claim.role] -= 1
        match outcome:
            case "done":
                self.summary.handled += 1
                self._handled[claim.role] += 1
            case "failed":
                self.summary.failed += 1
                self._failed[claim.role] += 1
            case "deferred":
                self.summary.deferred += 1
            case "rejected":
                self.summary.rejected += 1
        self._progress.set()

    async def status(self) -> list[RoleStatus]:
        """Each served role's work now, outcomes so far and queued envelopes. Reads only how
        many envelopes wait per role (``WorkQueue.waiting``: a listing per role folder, or one
        round of consumer infos on NATS), in a worker thread so the roles are not held up;
        call it at a human pace (a live view: a few times a second)."""
        # What the roles hold is taken before the queue is read: an envelope is claimed (out
        # of `waiting`) before its role gets it, so one shown at work is never counted queued.
        now = {
            role: (actor.working(), self._handled[role], self._failed[role])
            for role, actor in self.roles.items()
        }
        waiting = await anyio.to_thread.run_sync(self.queue.waiting)
        return [
            RoleStatus(
                role=role,
                working=working,
                handled=handled,
                failed=failed,
                queued=waiting.get(role, 0),
            )
            for role, (working, handled, failed) in now.items()
        ]

    async def _dispatch_pending(self) -> int:
        """Claim newly queued envelopes and tell each to its role; returns how many."""
        given = 0
        for role, actor in self.roles.items():
            if server_away(
                self.backends[role]
            ):  # its calls wait for the server: no new work for it
                continue
            # Claim only what this worker can start now: an envelope claimed and left waiting
            # here is one another worker could be handling.
            room = self._concurrency - self._busy[role]
            claims = await anyio.to_thread.run_sync(self.queue.claim, role, room)
            for claim in claims:
                self._in_flight += 1
                self._busy[role] += 1
                await actor.tell(claim)
                given += 1
        return given

    async def _start_roles(
        self, group: TaskGroup, context: ContextHandle, locks: RequestLocks
    ) -> None:
        for role in self.served:
            actor = RoleActor(
                role,
                model=self.config.model_for(role),
                max_hops=self.config.team.max_hops,
                workspace=self.workspace,
                context=context,
                backend=self.backends[role],
                queue=stamping(self.queue),  # the envelopes it queues carry the trace on
                locks=locks,
                on_finished=self._finished,
                on_prompt=self._prompt_sent,
                concurrency=self._concurrency,
                inbox_size=self._inbox_size,
            )
            self.roles[role] = actor
            await group.start(actor.serve)

    async def _feed_roles(self, once: bool) -> None:
        while True:
            self._progress = anyio.Event()
            given = await self._dispatch_pending()
            if once and not given and self._in_flight == 0 and await self._team_is_idle():
                return
            if once and self._in_flight:
                await self._progress.wait()
            else:  # new work may come from other workers (or, for a service, from anyone)
                with anyio.move_on_after(self._poll_interval):
                    await self._progress.wait()

    async def _team_is_idle(self) -> bool:
        """No envelope waits or is claimed for any role, by any worker (`run --once`)."""
        snapshot = await anyio.to_thread.run_sync(self.queue.snapshot)
        return not any(snapshot.waiting.values()) and not any(snapshot.claimed.values())

    async def _renew_lease(self) -> None:
        if not await anyio.to_thread.run_sync(self.queue.renew):
            logger.warning("the worker's lease could not be renewed (a full disk?); retrying")

    async def _keep_lease(self, scope: anyio.CancelScope) -> None:
        with scope:
            while True:
                # The queue's lease, not the config's: on NATS the server's ack wait rules.
                await anyio.sleep(self.queue.lease_seconds / 3)
                await self._renew_lease()

    async def _start(
        self,
        group: TaskGroup,
        context: ContextHandle,
        locks: RequestLocks,
        lease: anyio.CancelScope,
    ) -> None:
        await self._renew_lease()
        restored = await anyio.to_thread.run_sync(self.queue.restore_deferred)
        if restored:
            logger.info("{} left by earlier runs queued again", count_of(restored, "envelope"))
        group.start_soon(self._keep_lease, lease)
        await self._start_roles(group, context, locks)
        context_config = self.config.prompt_context
        logger.info(
            "team started in {} as worker {} (backend {}, roles {}; prompt_context "
            "enabled={} recent_events={} max_events={})",
            self.workspace.root,
            getattr(self.queue, "worker_id", "-"),
            ",".join(sorted({backend.name for backend in self.backends.values()})),
            ",".join(self.served),
            str(context_config.enabled).lower(),
            context_config.recent_events,
            context_config.max_events,
        )
        wanted, ack_wait = self.config.queue.lease_seconds, self.queue.lease_seconds
        if abs(wanted - ack_wait) >= 0.001:  # a shared queue made by a host set otherwise
            logger.warning(
                "queue.lease_seconds is {:g} here, but the team's queue was created with an "
                "ack wait of {:g} s: this worker uses {:g} s (renewing every {:g} s); "
                "docs/scaling.md says how to change it",
                wanted,
                ack_wait,
                ack_wait,
                ack_wait / 3,
            )

    async def run(
        self, *, once: bool = False, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> RunSummary:
        """Run until the queue is empty (``once``) or until cancelled.

        Cancelling it (Ctrl-C) stops the roles; envelopes being handled stay queued and are
        handled again on the next run.
        """
        locks = RequestLocks()
        lease = anyio.CancelScope()
        try:
            async with (
                _tracing_active(self.tracing),
                open_context(
                    self.workspace.root,
                    self.config.prompt_context,
                    store=self.store,
                    ask_timeout=self._ask_timeout,
                ) as context,
                anyio.create_task_group() as group,
            ):
                try:
                    await self._start(group, context, locks, lease)
                    task_status.started()
                    await self._feed_roles(once)
                finally:
                    for actor in self.roles.values():
                        actor.stop()  # roles finish what they are handling, then return
                    lease.cancel()
        finally:
            with anyio.CancelScope(shield=True):
                # What this worker still holds (stopped mid-call) waits for the next worker.
                await anyio.to_thread.run_sync(self.servers.close)  # nobody waits now
                await anyio.to_thread.run_sync(self.tracing.close)  # the spans still buffered
                try:
                    await anyio.to_thread.run_sync(self.queue.retire)
                except (TeamsRuntimeError, OSError) as exc:  # its lease runs out instead
                    logger.error("the worker could not hand its envelopes back: {}", exc)
        logger.info(
            "team finished: {} handled, {} failed, {} deferred, {} rejected",
            self.summary.handled,
            self.summary.failed,
            self.summary.deferred,
            self.summary.rejected,
        )
        return self.summary


@asynccontextmanager
async def _tracing_active(tracing: Tracing) -> AsyncIterator[None]:
    """``tracing.active`` for the tasks of a run (an async context, to sit with the others)."""
    with active(tracing):
        yield
