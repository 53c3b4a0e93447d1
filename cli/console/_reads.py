"""What the console reads, through the code the commands use (so its ``/api/...`` JSON is
their ``--json``): blocking reads run in a worker thread, never on the server's event loop."""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

import anyio.to_thread
import msgspec
from starlette.exceptions import HTTPException

from teams_runtime.actors.roles import read_inbox, waiting_prompt
from teams_runtime.cli._flags import role_name, team_role
from teams_runtime.cli._inbox import inbox_json, person_role, shown_json
from teams_runtime.cli._metrics import metrics_filters, metrics_json, metrics_report
from teams_runtime.cli._output import UserError
from teams_runtime.cli._parser import parse_refusing
from teams_runtime.cli._records import explain_json, prompt_json, read_whole
from teams_runtime.cli._status_report import status_report
from teams_runtime.codecs.config import TeamConfig
from teams_runtime.codecs.evidence import event_type_label, role_of_raw
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.prompt_records import PromptRecord
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.request_records import decode_any
from teams_runtime.exceptions import AnswerRefused, TeamsRuntimeError
from teams_runtime.monitoring import Filters, Skipped, log_files, matching_records
from teams_runtime.storage import Workspace, load_team_config
from teams_runtime.storage.opening import blocking_storage

__all__ = ["Reads", "TimelineRow", "field_json", "timeline"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


async def _in_thread(call: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    return await anyio.to_thread.run_sync(lambda: call(*args, **kwargs))


@dataclass(frozen=True)
class TimelineRow:
    """One event of a request as the timeline shows it, with the projection's decision."""

    index: int
    timestamp: str
    role: str
    type: str
    size: int
    summary: str
    decision: str
    tokens: int | None  # the event's estimate, where a budget is in force


@dataclass(frozen=True)
class Reads:
    """The workspace the console shows, read anew on each call (the config too: an edit
    shows without a restart)."""

    workspace: Workspace

    def config(self) -> TeamConfig:
        """The workspace's config now."""
        return load_team_config(self.workspace.root)

    def role(self, config: TeamConfig, given: str) -> str:
        """``given`` if it is a role of the team (the names ``--role`` takes)."""
        problem = None
        try:
            return team_role(config.cast, role_name(given))
        except argparse.ArgumentTypeError as exc:  # as --role refuses it
            problem = str(exc)
        raise UserError(f"role: {problem}")

    async def status(self) -> JsonObject:
        """``status --json``."""
        return await _in_thread(status_report, self.workspace)

    async def inbox(self) -> JsonObject:
        """``inbox --json``'s shape, read only: what waits as ``status`` sees it (an overdue
        answer shown overdue, its ``on_failure`` not applied), and so nothing ran out."""
        report = await self.status()
        return {"workspace": report["workspace"], "waiting": report["waiting_answers"],
                "ran_out": []}  # fmt: skip

    async def tidy_inbox(self) -> JsonObject:
        """``inbox --json``, the inbox tidied as the command tidies it: answered and ended
        answers finished, overdue ones handled by their role's ``on_failure`` (a write)."""
        looked = await read_inbox(self.workspace, self.config())
        return inbox_json(self.workspace, looked, time.time())

    async def waiting(self, wanted: str, role: str | None) -> tuple[JsonObject, Any]:
        """``inbox show ID --json``, and the waiting envelope itself; 404 (``HTTPException``
        or ``UnknownRequestError``) when nothing waits under ``wanted``."""
        config = self.config()
        request_id = check_request_id(wanted)
        chosen = person_role(config, role) if role else None
        try:
            item, bundle = await waiting_prompt(self.workspace, config, request_id, chosen)
        except AnswerRefused as exc:
            waiting = (await self.status())["waiting_answers"]
            if any(request_id in (w["request_id"], w["envelope_id"]) for w in waiting):
                raise  # several wait, or its role left the team: a refusal (400)
            await self.export(request_id)  # no such request: UnknownRequestError (404)
            raise HTTPException(404, str(exc)) from None  # answered, ended: nothing here
        return shown_json(item, bundle, time.time()), item

    async def scopes(self, request_ids: list[str]) -> dict[str, str]:
        """Each request's scope (what it is about), read from its record's fields; one that
        cannot be read is left out."""

        def load() -> dict[str, str]:
            found: dict[str, str] = {}
            with blocking_storage(self.workspace) as storage:
                for request_id in request_ids:
                    try:
                        fields = storage.store.read(request_id, tail=1).fields
                    except TeamsRuntimeError:
                        continue
                    scope = field_json(dict(fields), "scope")
                    if isinstance(scope, str):
                        found[request_id] = scope
            return found

        return await _in_thread(load)

    async def export(self, request_id: str) -> bytes:
        """``export REQUEST_ID``: the request as its canonical record file."""

        def load() -> bytes:
            with blocking_storage(self.workspace) as storage:
                return storage.store.load(request_id)

        return await _in_thread(load)

    def _args(self, command: str, *argv: str) -> argparse.Namespace:
        """``command``'s arguments as its own parser reads them (so the console's JSON is the
        command's, and a bad value is refused with the parser's message: ``UserError``), on
        this workspace; values go as ``--flag=value`` and after ``--``, so none is read as a
        flag."""
        return parse_refusing([command, f"--workspace={self.workspace.root}", *argv])

    async def prompt(self, request_id: str, role: str, *flags: str) -> JsonObject:
        """``prompt REQUEST_ID --role ROLE [FLAGS] --json``."""
        role = self.role(self.config(), role)
        args = self._args("prompt", f"--role={role}", *flags, "--", check_request_id(request_id))
        _, shown = await _in_thread(prompt_json, args)
        return shown

    async def explained(self, request_id: str, role: str | None = None, *flags: str) -> JsonObject:
        """``explain REQUEST_ID [--role ROLE] [FLAGS] --json``."""
        chosen = [f"--role={self.role(self.config(), role)}"] if role else []
        args = self._args("explain", *chosen, *flags, "--", check_request_id(request_id))
        return await _in_thread(explain_json, args)

    async def fields(self, request_id: str) -> JsonObject:
        """The request's fields, every event with them."""
        wanted = check_request_id(request_id)
        fields, _ = await _in_thread(read_whole, self.workspace, self.config(), wanted)
        return fields

    async def calls(self, request_id: str) -> list[PromptRecord]:
        """The prompt log's records of ``request_id``'s model calls, oldest first (counts and
        sizes only: the tokens a server reported, the latency, the cost)."""
        wanted = Filters(request_id=check_request_id(request_id))
        files = log_files(self.workspace.logs_dir)
        return await _in_thread(lambda: list(matching_records(files, wanted, Skipped())))

    async def metrics(self, by: list[str], *flags: str) -> JsonObject:
        """``metrics --json --by ... [FLAGS]`` over this workspace's logs."""
        args = self._args("metrics", *flags)
        files = log_files(self.workspace.logs_dir)
        filters = metrics_filters(args)
        report = await _in_thread(metrics_report, [self.workspace], files, filters, by)
        return metrics_json(report)


def timeline(fields: JsonObject, explained: JsonObject) -> list[TimelineRow]:
    """The request's events, oldest first, each with what ``explain`` decided for it."""
    events = fields.get("events")
    if not isinstance(events, list):
        return []
    explains = {row["index"]: row for row in explained["events"] or []}
    rows = []
    for index, raw in enumerate(events):
        event = decode_any(raw)
        head = event if isinstance(event, dict) else {}
        rows.append(
            TimelineRow(
                index=index,
                timestamp=str(head.get("timestamp", "")),
                role=role_of_raw(raw) or str(head.get("actor", "")),
                type=event_type_label(raw),
                size=len(raw),
                summary=str(head.get("summary", "")),
                decision=explains.get(index, {}).get("decision", ""),
                tokens=explains.get(index, {}).get("tokens"),
            )
        )
    return rows


def field_json(fields: JsonObject, key: str) -> Any:
    """A record field as plain JSON values (``None`` when absent)."""
    value = fields.get(key)
    if isinstance(value, msgspec.Raw):
        return decode_any(value)
    return value
