"""The Team supervisor: the ContextActor and one role actor per role, in one task group.

It loads ``team_runtime.yaml`` once for every actor (a restart picks up changes) and feeds
queued envelopes to their roles. Deferred envelopes (``storage._deferrals``) come back by
themselves: every ``RESTORE_SECONDS`` the Team queues again those whose next attempt is due,
whichever worker deferred them (``team_chores``, which also looks at the waiting answers of the
people's roles it serves); ``run --once`` waits for the ones it deferred itself, at most
``DEFERRED_WAIT_SECONDS`` in all."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from types import TracebackType

import anyio
from anyio.abc import TaskGroup, TaskStatus

from teams_runtime._logs import logger
from teams_runtime.actors._locks import RequestLocks
from teams_runtime.actors.context import DEFAULT_ASK_TIMEOUT, ContextHandle, open_context
from teams_runtime.actors.models import (
    McpServers,
    ModelBackend,
    ModelServers,
    open_mcp_servers,
    role_backends,
    server_away,
)
from teams_runtime.actors.models.spawn import ModelStarter
from teams_runtime.actors.roles import Outcome, RoleActor, is_person
from teams_runtime.actors.team._chores import RESTORE_SECONDS, TeamChores
from teams_runtime.actors.team._once_wait import OnceWait
from teams_runtime.actors.team._reports import RoleStatus, RunSummary, log_start
from teams_runtime.actors.telemetry import Tracing, active, stamping, tracing_for
from teams_runtime.codecs.config import DEFAULT_CONCURRENCY, TeamConfig
from teams_runtime.codecs.formats import count_of
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.policy.pricing import card_for
from teams_runtime.policy.token_counts import LearnedRatios
from teams_runtime.storage import (
    AnswerInbox,
    Claim,
    RecordStore,
    StorageQueue,
    Workspace,
    load_team_config,
)
from teams_runtime.storage.opening import open_storage
from teams_runtime.storage.queued_envelopes import new_worker_id

__all__ = ["DEFERRED_WAIT_SECONDS", "RESTORE_SECONDS", "RoleStatus", "RunSummary", "Team"]

DEFERRED_WAIT_SECONDS = 60.0  # how long `run --once` waits in all for envelopes it deferred


class Team:
    """Runs the roles of one workspace.

    Its store, queue and inbox (of people's answers) are the ones given, or the workspace's,
    opened by ``run`` for the run (on NATS: a connection of the run's own) and closed after it.
    Inside ``async with team:`` they stay open across runs and after them, for the block."""

    def __init__(
        self,
        workspace: str | Path,
        config: TeamConfig | None = None,
        *,
        backend: ModelBackend | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        poll_interval: float = 0.1,
        keep_prompt_records: bool = False,
        store: RecordStore | None = None,
        queue: StorageQueue | None = None,
        inbox: AnswerInbox | None = None,
        ask_timeout: float = DEFAULT_ASK_TIMEOUT,
        roles: Sequence[str] | None = None,
        deferred_wait: float | None = None,
        tracing: Tracing | None = None,
        ratios: LearnedRatios | None = None,
    ) -> None:
        self.workspace = Workspace(workspace)
        self.config = config if config is not None else load_team_config(self.workspace.root)
        self.cast = self.config.cast  # the team's roles: every part of the run takes them here
        self.served = tuple(self.cast.check(role) for role in roles) if roles else self.cast.names
        self.servers = ModelServers(self.workspace)  # which model servers are away, and since
        self.starter = ModelStarter()  # starts model commands; its process is the run's
        self.mcp = McpServers()  # the roles' MCP servers (model.tools.mcp), while it runs
        self.backends = role_backends(
            self.config, self.served, self.workspace.root, self.servers, self.starter, backend
        )
        # OpenTelemetry spans and metrics (telemetry.otel); a no-op without it.
        self.tracing = tracing if tracing is not None else tracing_for(self.config, self.served)
        self._given = (store, queue, inbox)
        self._store, self._queue, self._inbox = store, queue, inbox  # given, or the scope's
        self._opened: AbstractAsyncContextManager[None] | None = None  # `async with team`
        self._worker_id = new_worker_id()  # one per Team, whichever scope opens its queue
        self.roles: dict[str, RoleActor] = {}
        self._ask_timeout = ask_timeout
        # Envelopes each role handles at once: the role's own `concurrency`, else this.
        self._concurrency = {
            role: self.cast.concurrency_of(role, concurrency) for role in self.served
        }
        self._poll_interval = poll_interval
        self._in_flight = 0  # envelopes told to a role and not finished yet
        self._busy: Counter[str] = Counter()  # the same, per role
        self._handled: Counter[str] = Counter()  # outcomes per role, for `status`
        self._failed: Counter[str] = Counter()
        self._inbox_size = 256
        self._progress = anyio.Event()
        self._keep_prompt_records = keep_prompt_records
        # `run --once`: how long it waits in all for envelopes it deferred to come due.
        wait = DEFERRED_WAIT_SECONDS if deferred_wait is None else deferred_wait
        self._once = OnceWait(self.served, wait)
        self._chores: TeamChores | None = None  # the run's (it needs the run's ContextActor)
        self.people = tuple(role for role in self.served if is_person(self.config.model_for(role)))
        self.summary = RunSummary()
        # Each model's tokens a character, from its calls (and those ``ratios`` was seeded with).
        self._ratios = ratios if ratios is not None else LearnedRatios()
        self._facts = self.servers.facts  # each model server's window and tokenizer, asked once

    @property
    def store(self) -> RecordStore:
        """The record store, while it is open (given, or inside ``run`` or ``async with``)."""
        if self._store is None:
            raise RuntimeError("the Team's store is open only while it runs (Team.run)")
        return self._store

    @property
    def queue(self) -> StorageQueue:
        """The work queue, while it is open (given, or inside ``run`` or ``async with``)."""
        if self._queue is None:
            raise RuntimeError("the Team's queue is open only while it runs (Team.run)")
        return self._queue

    @property
    def inbox(self) -> AnswerInbox:
        """The inbox of people's answers, while it is open (as the store is)."""
        if self._inbox is None:
            raise RuntimeError("the Team's inbox is open only while it runs (Team.run)")
        return self._inbox

    @asynccontextmanager
    async def _backend_open(self) -> AsyncIterator[None]:
        """The store, queue and inbox open for the block: the given ones, those of an
        enclosing scope, else the workspace's, opened here and closed when the block ends."""
        if self._store is not None and self._queue is not None and self._inbox is not None:
            yield
            return
        async with open_storage(self.workspace, self.config, worker_id=self._worker_id) as opened:
            given_store, given_queue, given_inbox = self._given
            self._store = given_store if given_store is not None else opened.store
            self._queue = given_queue if given_queue is not None else opened.queue
            self._inbox = given_inbox if given_inbox is not None else opened.inbox
            try:
                yield
            finally:
                self._store, self._queue, self._inbox = self._given

    async def __aenter__(self) -> Team:
        """Open the store and queue until the block ends (``run`` inside it uses them)."""
        if self._opened is not None:
            raise RuntimeError("the Team is open already (async with team: once at a time)")
        opened = self._backend_open()
        await opened.__aenter__()
        self._opened = opened
        return self

    async def __aexit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            await opened.__aexit__(kind, error, traceback)

    def _prompt_sent(self, record: PromptRecord) -> None:
        self.summary.model_calls += 1
        self.summary.answered += record.outcome in ("completed", "invalid")
        if self._keep_prompt_records:
            self.summary.prompts.append(record)

    def _finished(self, claim: Claim, outcome: Outcome) -> None:
        self._in_flight -= 1
        self._busy[claim.role] -= 1
        match outcome:
            case "done":
                self.summary.done += 1
                self._handled[claim.role] += 1
            case "failed":
                self.summary.failed += 1
                self._failed[claim.role] += 1
            case "deferred":
                self.summary.deferred += 1
            case "rejected":
                self.summary.rejected += 1
            case "waiting":
                self.summary.waiting += 1
        if claim.envelope is not None:
            self._once.finished(claim.envelope.envelope_id, deferred=outcome == "deferred")
        self._progress.set()

    async def status(self) -> list[RoleStatus]:
        """Each served role's work now, outcomes so far and queued envelopes. Reads only how
        many envelopes wait per role (``QueueAdmin.waiting``: a listing per role folder, or one
        round of consumer infos on NATS), awaited so the roles are not held up; call it at a
        human pace (a live view: a few times a second)."""
        # What the roles hold is taken before the queue is read: an envelope is claimed (out
        # of `waiting`) before its role gets it, so one shown at work is never counted queued.
        now = {
            role: (actor.working(), self._handled[role], self._failed[role])
            for role, actor in self.roles.items()
        }
        queue, inbox = self._queue, self._inbox
        waiting = await queue.waiting() if queue is not None else {}
        # People's answers are counted only when this worker serves a person's role.
        answers = {}
        if inbox is not None and self.people:
            answers = await inbox.counts()
        return [
            RoleStatus(
                role=role,
                working=working,
                handled=handled,
                failed=failed,
                queued=waiting.get(role, 0),
                person=role in self.people,
                answers=answers.get(role, 0),
            )
            for role, (working, handled, failed) in now.items()
        ]

    async def _dispatch_pending(self) -> int:
        """Claim newly queued envelopes and tell each to its role; returns how many."""
        given = 0
        for role, actor in self.roles.items():
            if server_away(self.backends[role]):  # its calls wait: no new work for it
                continue
            # Claim only what this worker can start now: an envelope claimed and left waiting
            # here is one another worker could be handling.
            room = self._concurrency[role] - self._busy[role]
            claims = await self.queue.claim(role, room)
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
                concurrency=self._concurrency[role],
                inbox_size=self._inbox_size,
                rate_card=card_for(self.config.telemetry, self.config.model_for(role)),
                inbox=self.inbox,
                cast=self.cast,
                budget=self.config.prompt_budget(role),
                ratios=self._ratios,
                facts=self._facts,
                mcp=self.mcp.toolbox_for(self.config.model_for(role)),
            )
            self.roles[role] = actor
            await group.start(actor.serve)

    async def _feed_roles(self, once: bool) -> None:
        due_soon = False  # `once` waited for an envelope it deferred: restore it now
        while True:
            self._progress = anyio.Event()
            assert self._chores is not None
            await self._chores.run(force=due_soon)
            given = await self._dispatch_pending()
            if once and self._in_flight:
                await self._progress.wait()
                continue
            # New work may come from other workers (or, for a service, from anyone).
            wait, due_soon = self._poll_interval, False
            if once and not given:
                until_due = await self._once.next_wait(self.queue, self.summary)
                if until_due is None:
                    return
                wait, due_soon = until_due or self._poll_interval, bool(until_due)
            with anyio.move_on_after(wait):
                await self._progress.wait()

    async def _renew_lease(self) -> None:
        if not await self.queue.renew():
            logger.warning(
                "the worker's lease could not be renewed ({}); retrying", self.queue.renew_trouble
            )

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
        self._chores = TeamChores(
            self.queue,
            self.inbox,
            context,
            self.config.model_for,
            self.people,
            self.cast,
            self.summary,
        )
        group.start_soon(self._keep_lease, lease)
        await self._start_roles(group, context, locks)
        log_start(self.workspace.root, self.config, self.queue, self.backends, self.served)

    async def run(
        self, *, once: bool = False, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> RunSummary:
        """Run until the queue is empty (``once``) or until cancelled.

        Cancelling it (Ctrl-C) stops the roles; envelopes being handled stay queued and are
        handled again on the next run.
        """
        async with self._backend_open():
            return await self._run(once, task_status)

    async def _run(self, once: bool, task_status: TaskStatus[None]) -> RunSummary:
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
                    requests_in_flight=self.config.team.requests_in_flight,
                ) as context,
                open_mcp_servers([self.config.model_for(r) for r in self.served]) as mcp,
                anyio.create_task_group() as group,
            ):
                try:
                    self.mcp = mcp
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
                await self.starter.aclose()  # the roles have stopped: no model is running
                await anyio.to_thread.run_sync(self.tracing.close)  # the spans still buffered
                try:
                    await self.queue.retire()
                except (TeamsRuntimeError, OSError) as exc:  # its lease runs out instead
                    logger.error("the worker could not hand its envelopes back: {}", exc)
        summary = self.summary
        logger.info(
            "team finished: {} done, {} failed, {} rejected, {} deferred; {}, {} answered",
            summary.done,
            summary.failed,
            summary.rejected,
            count_of(summary.deferred, "time"),
            count_of(summary.model_calls, "model call"),
            summary.answered,
        )
        return self.summary


@asynccontextmanager
async def _tracing_active(tracing: Tracing) -> AsyncIterator[None]:
    """``tracing.active`` for the tasks of a run (an async context, to sit with the others)."""
    with active(tracing):
        yield
