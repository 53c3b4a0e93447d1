"""``teams-runtime run`` and ``demo``: a team run, its roles handling their queued envelopes,
with a live view on a terminal.

``run`` serves the workspace's team until Ctrl-C or SIGTERM (or, with ``--once``, until no work
is left) and says what it did; ``demo`` builds a workspace of long request histories and runs
the team on it with the dry-run backend (``teams_runtime.demo``).
"""

from __future__ import annotations

import argparse
import signal
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from teams_runtime import demo
from teams_runtime._logs import logger
from teams_runtime.actors.team import RunSummary, Team
from teams_runtime.cli._flags import add_json, add_workspace, role_list, team_roles
from teams_runtime.cli._live_view import LiveView, wants_live_view
from teams_runtime.cli._output import write_json
from teams_runtime.codecs.formats import count_of, iso_of
from teams_runtime.monitoring import configure_logging, stop_logging
from teams_runtime.storage import DeferredEnvelope, Workspace, load_team_config

__all__ = ["cmd_demo", "cmd_run", "declare_demo", "declare_run", "due_words"]


def declare_run(run: argparse.ArgumentParser) -> None:
    """Declare ``run``: its description, flags and handler."""
    run.description = (
        "Start the ContextActor and one actor per role. Several `run` processes "
        "(on one machine or several sharing the folder) share the queue: each envelope is "
        "claimed by one worker. With --once, handle all queued work (and the work it creates), "
        "then exit 0; without, run until Ctrl-C or SIGTERM (envelopes in flight stay queued)."
    )
    add_workspace(run)
    run.add_argument(
        "--once",
        action="store_true",
        help="exit when no envelope is waiting or claimed for any role, by any worker",
    )
    run.add_argument(
        "--roles",
        type=role_list,
        metavar="R1,R2",
        help="serve only these roles of the team (default: all of them)",
    )
    run.add_argument("--verbose", action="store_true", help="debug lines on stderr")
    run.add_argument(
        "--plain",
        action="store_true",
        help="plain log lines on stderr even on a terminal (no live view)",
    )
    add_json(run, "print the final summary as one JSON object (see docs/cli.md)")
    run.set_defaults(handler=cmd_run)


def cmd_run(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    config = load_team_config(workspace.root)
    roles = team_roles(config.cast, args.roles) if args.roles else None
    team = Team(workspace.root, config, roles=roles)
    view = LiveView() if wants_live_view(args.plain) else None
    sinks = partial(
        configure_logging,
        console_level="DEBUG" if args.verbose else "INFO",
        console=None if view is None else view.log_line,
        roles=team.served,
    )
    sinks(None)  # the console only: the log files wait until the storage is open
    try:
        run = partial(
            _run_and_count, team, once=args.once, view=view, logs=partial(sinks, workspace)
        )
        stopped, queued = anyio.run(run)
        _print_summary(team, once=args.once, stopped=stopped, queued=queued, as_json=args.json)
    finally:
        stop_logging()
    return 0


async def _run_until_signal(team: Team, *, once: bool, view: LiveView | None) -> bool:
    """Run the team until it is done (``once``) or SIGINT/SIGTERM stops it; whether a signal
    stopped it. Envelopes being handled when it stops go back to the queue. Signals after the
    first are logged and ignored, so a second Ctrl-C never cuts the cleanup short (model
    processes are still being ended). With ``view``, the live view is drawn on it meanwhile."""
    stopped = False
    team_scope = anyio.CancelScope()
    async with anyio.create_task_group() as group:

        async def stop_on_signal() -> None:
            nonlocal stopped
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for received in signals:
                    name = signal.Signals(received).name
                    if stopped:
                        logger.warning("{} received: already stopping", name)
                        continue
                    logger.warning("{} received: stopping the team", name)
                    stopped = True
                    team_scope.cancel()

        group.start_soon(stop_on_signal)
        with team_scope:
            if view is None:
                await team.run(once=once)
            else:
                title = f"teams-runtime run: {team.workspace.root.resolve()}"
                async with view.showing(team, title):
                    await team.run(once=once)
        group.cancel_scope.cancel()  # done: stop listening for signals
    return stopped


async def _run_and_count(
    team: Team, *, once: bool, view: LiveView | None, logs: Callable[[], None]
) -> tuple[bool, int | None]:
    """Run the team (``_run_until_signal``) with its store and queue open for this command,
    then count what is left queued for the next run (while they are still open): whether a
    signal stopped it, and that count (``None`` after a ``--once`` run that finished).
    ``logs`` adds the log files' sinks once the storage is open."""
    async with team:
        # Only now: a run whose storage cannot be opened (a NATS server down) leaves the
        # workspace as it found it, no logs folder nor an empty log file per role.
        await anyio.to_thread.run_sync(logs)
        stopped = await _run_until_signal(team, once=once, view=view)
        if not stopped and once:
            return stopped, None
        counts = await team.queue.counts()
        return stopped, sum(counts.values())


def due_words(next_attempt: float, now: float) -> str:
    """When a left envelope is due, as the summary says it: ``due at <time>``, or ``due now
    (it was due at <time>)`` once that time has passed (a run that ends after waiting on a
    held lock may end well after its envelopes came due)."""
    if next_attempt > now:
        return f"due at {iso_of(next_attempt)}"
    return f"due now (it was due at {iso_of(next_attempt)})"


_NAMED = 3  # deferred envelopes named on a summary line; `status` lists them all


def _named(envelopes: list[DeferredEnvelope]) -> str:
    """``role:request_id`` of the first few ``envelopes``, then how many more."""
    named = ", ".join(f"{e.role}:{e.request_id}" for e in envelopes[:_NAMED])
    more = len(envelopes) - _NAMED
    return named + (f" +{more} more" if more > 0 else "")


def _summary_json(summary: RunSummary, *, stopped: bool, queued: int | None) -> dict[str, Any]:
    """The run's summary as ``run --json`` prints it."""
    next_attempt = None if summary.next_attempt is None else iso_of(summary.next_attempt)
    return {
        "finished": summary.finished,
        "done": summary.done,
        "failed": summary.failed,
        "rejected": summary.rejected,
        "deferred": summary.deferred,
        "waiting": summary.waiting,
        "answers_timed_out": summary.answers_timed_out,
        "answers_renewed": summary.answers_renewed,
        "model_calls": summary.model_calls,
        "answered": summary.answered,
        "stopped": stopped,
        "queued": queued,
        "left_deferred": summary.left_deferred,
        "next_attempt_at": next_attempt,
        "deferred_envelopes": [
            {
                "role": envelope.role,
                "request_id": envelope.request_id,
                "envelope_id": envelope.envelope_id,
                "next_attempt_at": iso_of(envelope.next_attempt),
                "this_run": this_run,
            }
            for this_run, left in ((True, summary.left_envelopes), (False, summary.not_due))
            for envelope in left
        ],
    }


def _deferred_lines(summary: RunSummary) -> list[str]:
    """What a ``--once`` run left deferred: its own envelopes, and an earlier run's not due."""
    lines = []
    if summary.left_deferred and summary.next_attempt is not None:
        lines.append(
            f"Left {count_of(summary.left_deferred, 'deferred envelope')} "
            f"({_named(summary.left_envelopes)}); the next is "
            f"{due_words(summary.next_attempt, time.time())}, when any running worker takes it "
            "(`status` lists them)."
        )
    if summary.not_due:  # deferred before this run and not due: it did not take them
        lines.append(
            f"Not due yet: {count_of(len(summary.not_due), 'envelope')} an earlier run "
            f"deferred ({_named(summary.not_due)}); the next is "
            f"{due_words(summary.not_due[0].next_attempt, time.time())}, when any running "
            "worker takes it (`status` lists them)."
        )
    return lines


def _print_summary(
    team: Team, *, once: bool, stopped: bool, queued: int | None, as_json: bool
) -> None:
    summary = team.summary
    if as_json:
        write_json(_summary_json(summary, stopped=stopped or not once, queued=queued))
        return
    if once:
        # Each count says what it counts: the breakdown adds up to the envelopes finished,
        # and a model call is not an answer.
        print(
            f"Finished {count_of(summary.finished, 'envelope')}: {summary.done} done, "
            f"{summary.failed} failed, {summary.rejected} rejected; "
            f"{count_of(summary.model_calls, 'model call')}, {summary.answered} answered."
        )
    if summary.waiting:
        print(
            f"{count_of(summary.waiting, 'envelope')} put in the inbox for a person's answer "
            "(`teams-runtime inbox` lists what waits)."
        )
    if summary.answers_timed_out:  # the envelopes put above may be among them
        print(
            f"{count_of(summary.answers_timed_out, 'waiting answer')} ran out of time "
            "(answer_within): on_failure failed its request (`teams-runtime status` lists the "
            "failed requests, each with its retry command)."
        )
    if summary.answers_renewed:
        print(
            f"{count_of(summary.answers_renewed, 'waiting answer')} ran out of time "
            "(answer_within) and waits again (on_failure: requeue)."
        )
    for line in _deferred_lines(summary):
        print(line)
    if queued is not None:
        print(f"Stopped; {count_of(queued, 'envelope')} queued for the next run.")


def declare_demo(run_demo: argparse.ArgumentParser) -> None:
    """Declare ``demo``: its description, flags and handler."""
    run_demo.description = (
        "Build a workspace with three requests whose records hold long histories, "
        "run the team on them with the dry-run backend (no model) and print, per prompt, what "
        "compaction kept and saved. --keep DIR keeps the workspace to explore."
    )
    run_demo.add_argument(
        "--keep",
        type=Path,
        metavar="DIR",
        help="build the demo workspace in DIR and keep it (must not exist)",
    )
    run_demo.add_argument(
        "--plain",
        action="store_true",
        help="no live view on stderr even on a terminal",
    )
    run_demo.set_defaults(handler=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    if not wants_live_view(args.plain):
        return demo.run(keep=args.keep)
    view = LiveView()

    async def run_with_view(team: Team) -> RunSummary:
        async with view.showing(team, "teams-runtime demo (dry run, no model)"):
            return await team.run(once=True)

    return demo.run(keep=args.keep, run_team=run_with_view, console=view.log_line)
