"""``teams-runtime export`` and ``import``: requests moved between storages, as their canonical
record files (docs/scaling.md, migration).

``export`` writes a request as the bytes the file storage holds (or, ``--output-only``, its
deliverable alone); ``import`` checks record files
(each ``<request id>.json``) and loads them into the workspace's storage. A record file the
user names is read here too for ``project`` and ``explain --record``.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from teams_runtime.cli._flags import add_workspace
from teams_runtime.cli._output import UserError
from teams_runtime.codecs.formats import count_of, pretty_json
from teams_runtime.codecs.model import OUTPUT_KEY, has_output
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.request_records import EVENTS_KEY, RecordFields, decode_record
from teams_runtime.exceptions import RecordError, TeamsRuntimeError, UnknownRequestError
from teams_runtime.storage import Workspace
from teams_runtime.storage.local_files import open_regular
from teams_runtime.storage.opening import blocking_storage

if TYPE_CHECKING:
    from teams_runtime.storage.blocking import BlockingRecordStore

__all__ = [
    "cmd_export",
    "cmd_import",
    "declare_export",
    "declare_import",
    "read_record_file",
    "records_by_id",
]


def declare_export(export: argparse.ArgumentParser) -> None:
    """Declare ``export``: its description, flags and handler."""
    export.description = (
        "Write the request as its canonical record file, from either backend: to "
        "standard output, or atomically to --out FILE. `import` loads it elsewhere."
    )
    export.add_argument("request_id", metavar="REQUEST_ID", help="the request to export")
    export.add_argument(
        "--out", type=Path, metavar="FILE", help="write to FILE (default: standard output)"
    )
    export.add_argument(
        "--output-only",
        action="store_true",
        help="write the request's deliverable (result.output) instead of its record: text as "
        "it is, an object as JSON",
    )
    add_workspace(export)
    export.set_defaults(handler=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    with blocking_storage(Workspace(args.workspace)) as storage:
        data = storage.store.load(args.request_id)
    if args.output_only:
        data = _deliverable(args.request_id, data)
    if args.out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return 0
    out = Path(args.out)
    temp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:  # a reader of FILE sees the old file or the whole new one
        temp.write_bytes(data)
        os.replace(temp, out)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise UserError(f"{out}: cannot be written ({exc.strerror or exc}).") from None
    print(f"Exported {args.request_id} to {out} ({len(data)} bytes).", file=sys.stderr)
    return 0


def _deliverable(request_id: str, data: bytes) -> bytes:
    """The ``result.output`` of the record ``data``: text as it is, anything else as JSON (a
    ``UserError`` when it has none)."""
    result = decode_record(data, f"request {request_id}").get("result")
    output = result.get(OUTPUT_KEY) if isinstance(result, dict) else None
    if not has_output(output):
        raise UserError(f"request {request_id} has no output (result.output) yet.")
    text = output if isinstance(output, str) else pretty_json(output)
    return (text if text.endswith("\n") else text + "\n").encode("utf-8")


def declare_import(load: argparse.ArgumentParser) -> None:
    """Declare ``import``: its description, flags and handler."""
    load.description = (
        "Load record files (each <request id>.json, as `export` writes them) into "
        "the workspace's backend. Every file is checked first: nothing is written if one is "
        "not a record, names another request, or clashes with what the backend holds."
    )
    load.add_argument(
        "files", nargs="+", type=Path, metavar="FILE", help="record files (<request id>.json)"
    )
    add_workspace(load)
    load.set_defaults(handler=cmd_import)


def cmd_import(args: argparse.Namespace) -> int:
    # Every file is read and checked before anything is written.
    records = [_record_to_import(Path(path)) for path in args.files]
    ids = [request_id for request_id, _, _ in records]
    twice = sorted({request_id for request_id in ids if ids.count(request_id) > 1})
    if twice:
        raise UserError(f"the same request is given more than once: {', '.join(twice)}.")
    with blocking_storage(Workspace(args.workspace)) as storage:
        return _import_records(storage.store, records)


def _record_to_import(path: Path) -> tuple[str, bytes, RecordFields]:
    """A record file's request id (its name, which must agree with its ``request_id``), bytes
    and fields."""
    data, fields = read_record_file(path)
    if not path.name.endswith(".json"):
        raise RecordError(f"{path}: a record file is named <request id>.json.")
    request_id = path.name.removesuffix(".json")
    try:
        check_request_id(request_id)
    except RecordError as exc:
        raise RecordError(f"{path}: the file name is not a request id ({exc})") from None
    named = fields.get("request_id")
    if named is None:  # `{}`, or some other JSON object: a record names its request
        raise RecordError(
            f"{path}: not a request record (it has no `request_id`); import only record "
            "files, as `export` writes them."
        )
    if not isinstance(named, str):
        raise RecordError(
            f"{path}: its request_id is not text; fix the field (it must be {request_id!r} "
            "for this file name)."
        )
    if named != request_id:
        raise RecordError(
            f"{path}: its request_id {named!r} is not its file name; rename the file to "
            f"{named}.json or fix the field."
        )
    if not isinstance(fields.get(EVENTS_KEY, []), list):
        raise RecordError(f"{path}: `events` is not a list; fix it by hand before importing.")
    return request_id, data, fields


def _differs(store: BlockingRecordStore, request_id: str, data: bytes) -> bool:
    """Whether the storage holds ``request_id`` with other bytes than ``data`` (one read)."""
    try:
        return store.load(request_id) != data
    except UnknownRequestError:
        return False


def _import_records(
    store: BlockingRecordStore, records: list[tuple[str, bytes, RecordFields]]
) -> int:
    clashes = [request_id for request_id, data, _ in records if _differs(store, request_id, data)]
    if clashes:
        raise UserError(
            f"already in the backend with other content, not overwritten: {', '.join(clashes)}; "
            "nothing was imported (export and compare them, or import into another workspace)."
        )
    imported = 0
    for request_id, _, fields in records:
        try:
            # A store writes a request whole or not at all (on NATS: its events first, the
            # head that makes it a request last), so a failure here leaves no part of it.
            created = store.create(request_id, fields)
        except TeamsRuntimeError as exc:
            raise UserError(
                f"{request_id} was not imported ({exc}); nothing of it was written "
                f"({count_of(imported, 'request')} imported before it). Fix the cause and run "
                "the same import again: requests already there are left as they are."
            ) from None
        if created:
            imported += 1
            events = fields.get(EVENTS_KEY, [])
            print(f"Imported {request_id} ({len(events)} events).")
        else:
            print(f"{request_id} is already there, identical; left as it is.")
    print(f"Imported {imported} of {count_of(len(records), 'request')}.")
    return 0


def read_record_file(path: Path) -> tuple[bytes, RecordFields]:
    """The file's bytes and decoded fields. The file is the user's own, so it is read through a
    link; a FIFO or device in its place is refused, never read. Raises ``RecordError``."""
    try:
        fd = open_regular(path.resolve())
        with open(fd, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise RecordError(f"{path}: no such record file.") from None
    except OSError as exc:
        raise RecordError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    return data, decode_record(data, str(path))


def records_by_id(paths: list[Path], flag: str) -> dict[str, bytes]:
    """The record files at ``paths`` (given with ``flag``), by their request id."""
    given: dict[str, bytes] = {}
    for path in paths:
        data, fields = read_record_file(path)
        request_id = fields.get("request_id")
        if not isinstance(request_id, str) or not request_id:
            raise UserError(f"{flag} {path}: the record has no request_id.")
        given[request_id] = data
    return given
