"""Commands on a workspace and its team: ``init``, ``submit``, ``run``, ``metrics``, ``demo``
(``config`` is ``config_command``)."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import anyio
from loguru import logger

from teams_runtime import demo
from teams_runtime.actors.intake import submit
from teams_runtime.actors.team import RunSummary, Team
from teams_runtime.cli.live_view import LiveView, wants_live_view
from teams_runtime.cli.output import PROG, UserError, write_json
from teams_runtime.cli.role_flags import new_work_role, team_roles
from teams_runtime.codecs.config import (
    CONFIG_FILE_NAME,
    DEFAULT_CONFIG_TEXT,
    NatsSettings,
    backend_block_text,
)
from teams_runtime.codecs.formats import count_of, iso_of
from teams_runtime.monitoring import (
    Filters,
    aggregate,
    configure_logging,
    log_files,
    rate_cards_of,
    render_report,
    statuses_of,
    stop_logging,
)
from teams_runtime.storage import Workspace, load_team_config

__all__ = ["cmd_demo", "cmd_init", "cmd_metrics", "cmd_run", "cmd_submit", "due_words"]


def cmd_init(args: argparse.Namespace) -> int:
    workspace = Workspace(args.directory)
    if args.nats_url is not None and args.backend != "nats":
        raise UserError("--nats-url needs --backend nats.")
    text = DEFAULT_CONFIG_TEXT
    # Built (so checked) once, before anything is written.
    settings = NatsSettings(url=args.nats_url) if args.nats_url else NatsSettings()
    if args.backend == "nats":
        text += backend_block_text(settings)
    if workspace.config_path.exists():
        raise UserError(
            f"{workspace.config_path} already exists; not overwriting it "
            "(edit it, or remove it first to start over)."
        )
    # With nats the folder keeps only what is local to this host (logs, attempts).
    folder = workspace.requests_dir if args.backend == "file" else workspace.runtime_dir
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with workspace.config_path.open("x", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise UserError(f"cannot create the workspace in {workspace.root}: {exc}") from exc
    where = ".teams_runtime/requests/"
    if args.backend == "nats":
        where = f"requests and the queue on NATS at {settings.shown_url}"
    print(f"Initialised workspace {workspace.root} ({CONFIG_FILE_NAME}, {where}).")
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    config = load_team_config(args.workspace)  # broken or missing: an error before any write
    new_work_role(config.cast, args.role)
    done = anyio.run(
        partial(
            submit,
            args.workspace,
            role=args.role,
            scope=args.scope,
            body=args.body,
            intent=args.intent,
            urgency=args.urgency,
            request_id=args.request_id,
            reopen=args.reopen,
        )
    )
    if args.json:
        write_json(
            {
                "request_id": done.request_id,
                "role": args.role,
                "created": done.created,
                "reopened": bool(done.reopened),
            }
        )
        return 0
    state = "new request" if done.created else "existing request"
    if done.reopened:
        state = f"reopened: it was {done.reopened}"
    print(f"Queued {done.request_id} for {args.role} ({state}); run `teams-runtime run --once`.")
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
    team: Team, *, once: bool, view: LiveView | None
) -> tuple[bool, int | None]:
    """Run the team (``_run_until_signal``) with its store and queue open for this command,
    then count what is left queued for the next run (while they are still open): whether a
    signal stopped it, and that count (``None`` after a ``--once`` run that finished)."""
    async with team:
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


def _print_summary(
    team: Team, *, once: bool, stopped: bool, queued: int | None, as_json: bool
) -> None:
    summary = team.summary
    next_attempt = None if summary.next_attempt is None else iso_of(summary.next_attempt)
    if as_json:
        write_json(
            {
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
                "stopped": stopped or not once,
                "queued": queued,
                "left_deferred": summary.left_deferred,
                "next_attempt_at": next_attempt,
            }
        )
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
    if summary.left_deferred and summary.next_attempt is not None:
        print(
            f"Left {count_of(summary.left_deferred, 'deferred envelope')}; the next is "
            f"{due_words(summary.next_attempt, time.time())}, when any running worker takes it "
            "(`status` lists them)."
        )
    if queued is not None:
        print(f"Stopped; {count_of(queued, 'envelope')} queued for the next run.")


def cmd_run(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    config = load_team_config(workspace.root)
    roles = team_roles(config.cast, args.roles) if args.roles else None
    team = Team(workspace.root, config, roles=roles)
    view = LiveView() if wants_live_view(args.plain) else None
    configure_logging(
        workspace,
        console_level="DEBUG" if args.verbose else "INFO",
        console=None if view is None else view.log_line,
        roles=team.served,
    )
    try:
        run = partial(_run_and_count, team, once=args.once, view=view)
        stopped, queued = anyio.run(run)
        _print_summary(team, once=args.once, stopped=stopped, queued=queued, as_json=args.json)
    finally:
        stop_logging()
    return 0


def cmd_metrics(args: argparse.Namespace) -> int:
    if args.per is not None and not args.chart:
        raise UserError("--per goes with --chart (a bar pair per day or hour).")
    if args.chart and (args.json or args.by):
        raise UserError("--chart draws bars: give it without --json and --by.")
    # --workspace may be repeated (one folder per host); none given: the one found from here.
    folders = args.workspace if isinstance(args.workspace, list) else [args.workspace]
    workspaces = _distinct_workspaces(folders)
    for workspace in workspaces:
        if not workspace.config_path.exists():
            # Without this check a mistyped folder would read as a quiet workspace: "no data".
            raise UserError(
                f"{workspace.root} is not a workspace (it has no {CONFIG_FILE_NAME}); pass the "
                "folder holding it with --workspace DIR."
            )
    since = args.since
    if args.hours is not None:
        since = (datetime.now().astimezone() - timedelta(hours=args.hours)).isoformat()
    filters = Filters(since=since, role=args.role, purpose=args.purpose, request_id=args.request_id)
    files = [path for workspace in workspaces for path in log_files(workspace.logs_dir)]
    if args.chart:
        from teams_runtime.cli.metrics_chart import render_chart

        print(render_chart(files, filters, args.per or "day"))
        return 0
    with statuses_of(workspaces) as status_of:
        report = aggregate(
            files,
            filters,
            args.by or ["role", "purpose"],
            rate_cards=rate_cards_of(workspaces),
            status_of=status_of,
        )
    if args.json:
        write_json({**report.as_json(), "no_data": report.totals.prompts == 0})
    elif report.totals.prompts == 0:
        print(
            f"no data: no prompt records match (read {count_of(len(files), 'log file')} in "
            f"{', '.join(str(w.logs_dir) for w in workspaces)}; "
            f"{report.skipped_lines} skipped lines)."
        )
    else:
        print(render_report(report))
    return 0


def _distinct_workspaces(folders: list[Path]) -> list[Workspace]:
    """The workspaces of ``folders``, each once: a folder named twice (the same path, or
    another leading to it: ``..``, a link) would count its prompts twice. Says so on stderr."""
    first_named: dict[Path, Path] = {}
    workspaces = []
    for folder in folders:
        place = Path(folder).resolve()
        if place in first_named:
            print(
                f"{PROG}: note: --workspace {folder} is the folder already given as "
                f"{first_named[place]}; its logs are read once.",
                file=sys.stderr,
            )
            continue
        first_named[place] = Path(folder)
        workspaces.append(Workspace(folder))
    return workspaces


def cmd_demo(args: argparse.Namespace) -> int:
    if not wants_live_view(args.plain):
        return demo.run(keep=args.keep)
    view = LiveView()

    async def run_with_view(team: Team) -> RunSummary:
        async with view.showing(team, "teams-runtime demo (dry run, no model)"):
            return await team.run(once=True)

    return demo.run(keep=args.keep, run_team=run_with_view, console=view.log_line)
