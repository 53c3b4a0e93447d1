"""Monitoring: the CLI's log sinks, and ``teams-runtime metrics`` over the prompt records.

The library only emits (loguru, with ``role``, ``request_id`` and ``purpose`` bound; the prompt
records come from ``actors.prompt_log``); sinks are added by the CLI through
``configure_logging``:

- stderr: human-readable, INFO and up;
- ``.teams_runtime/logs/<role>.log``: each role's own lines (the compaction line among them);
- ``.teams_runtime/logs/prompt_context.jsonl``: one ``PromptRecord`` per prompt sent, rotated
  at 10 MB, keeping 10 old files (``prompt_context.<time>.jsonl``).

Nothing logged here ever holds prompt, event, payload or envelope text.

``metrics`` reads ``prompt_context*.jsonl`` (rotated files too) a line at a time, decoding each
with msgspec; malformed or torn lines are counted and skipped. Memory holds one small aggregate
per group (plus the prompt sizes of the group, 4 bytes each, for the p95).
"""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import msgspec
from loguru import logger

from teams_runtime.actors.prompt_log import RECORD_KEY
from teams_runtime.codecs.prompt_names import GROUP_KEYS
from teams_runtime.codecs.prompt_records import (
    PROMPT_RECORD_SCHEMA,
    PromptRecord,
    decode_prompt_record,
)
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import RecordError
from teams_runtime.storage import Workspace
from teams_runtime.storage.local_files import ensure_folder

__all__ = [
    "GROUP_KEYS",
    "PROMPT_LOG_NAME",
    "Filters",
    "MetricsReport",
    "aggregate",
    "configure_logging",
    "log_files",
    "read_records",
    "render_report",
    "stop_logging",
]

PROMPT_LOG_NAME = "prompt_context.jsonl"


def _is_record(entry: Any) -> bool:
    return RECORD_KEY in entry["extra"]


def _role_filter(role: str) -> Callable[[Any], bool]:
    def accept(entry: Any) -> bool:
        return bool(entry["extra"].get("role") == role) and not _is_record(entry)

    return accept


def configure_logging(
    workspace: Workspace | None,
    *,
    console_level: str = "INFO",
    console: Callable[[str], None] | None = None,
) -> None:
    """Add the CLI's sinks (replacing any) and turn the library's logging on.

    Console lines go to stderr, or to ``console`` (a live view prints them above itself, so
    the two never garble each other)."""
    logger.remove()
    logger.enable("teams_runtime")
    logger.add(
        sys.stderr if console is None else console,
        level=console_level,
        format="<green>{time:HH:mm:ss}</green> <level>{level: <7}</level> {message}",
        filter=lambda entry: not _is_record(entry),
        colorize=None if console is None else False,
        diagnose=False,  # never print variable values (prompt text) in tracebacks
    )
    if workspace is None:
        return
    logs = workspace.logs_dir
    ensure_folder(logs, workspace.runtime_dir)  # a linked logs folder is refused
    for name in (*(f"{role}.log" for role in ROLES), PROMPT_LOG_NAME):
        if (logs / name).is_symlink():  # loguru would write through it
            raise RecordError(
                f"{logs / name} is a symbolic link; teams-runtime never writes through links "
                "under .teams_runtime/ (remove the link, then retry)."
            )
    for role in ROLES:
        logger.add(
            workspace.role_log(role),
            level="INFO",
            format="{time:YYYY-MM-DDTHH:mm:ss.SSSZZ} {level} {message}",
            filter=_role_filter(role),
            rotation="10 MB",
            retention=10,
            enqueue=True,
            diagnose=False,
        )
    logger.add(
        logs / PROMPT_LOG_NAME,
        level="INFO",
        format="{extra[" + RECORD_KEY + "]}",
        filter=_is_record,
        rotation="10 MB",
        retention=10,
        enqueue=True,
        diagnose=False,
    )


def stop_logging() -> None:
    """Flush and close the sinks (background writers included); the library is quiet again."""
    logger.complete()
    logger.remove()
    logger.disable("teams_runtime")


# --- metrics ---------------------------------------------------------------------------


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """Which records count; ``None`` means no filter."""

    since: str | None = None  # ISO-8601 with offset
    role: str | None = None
    purpose: str | None = None
    request_id: str | None = None


def log_files(logs_dir: Path) -> list[Path]:
    """The prompt record files, rotated ones first (oldest first), the live one last."""
    stem, suffix = PROMPT_LOG_NAME.rsplit(".", 1)
    rotated = sorted(logs_dir.glob(f"{stem}.*.{suffix}"))
    live = logs_dir / PROMPT_LOG_NAME
    return [*rotated, *([live] if live.exists() else [])]


@dataclass
class _Skipped:
    lines: int = 0


def read_records(files: Iterable[Path], skipped: _Skipped) -> Iterator[PromptRecord]:
    """Stream the records of ``files``; bad lines (torn, not JSON, wrong shape) are counted."""
    for path in files:
        with open(path, "rb") as handle:
            for line in handle:
                if not line.strip():
                    continue
                try:
                    record = decode_prompt_record(line)
                except (msgspec.DecodeError, RecursionError):  # ValidationError included
                    skipped.lines += 1
                    continue
                yield record


@dataclass
class _Group:
    prompts: int = 0
    eligible: int = 0
    compacted: int = 0
    total_events: int = 0
    included_events: int = 0
    omitted_events: int = 0
    prompt_chars: int = 0
    full_history_chars: int = 0
    prompts_with_usage: int = 0  # prompts whose model server reported tokens
    prompt_tokens: int = 0
    completion_tokens: int = 0
    sizes: array[int] = field(default_factory=lambda: array("q"))

    def add(self, record: PromptRecord) -> None:
        self.prompts += 1
        self.eligible += record.eligible
        self.compacted += record.compacted
        self.total_events += record.total_events
        self.included_events += record.included_events
        self.omitted_events += record.omitted_events
        self.prompt_chars += record.prompt_chars
        self.full_history_chars += record.full_history_chars
        if record.prompt_tokens is not None and record.completion_tokens is not None:
            self.prompts_with_usage += 1
            self.prompt_tokens += record.prompt_tokens
            self.completion_tokens += record.completion_tokens
        self.sizes.append(record.prompt_chars)

    def as_dict(self) -> dict[str, Any]:
        ordered = sorted(self.sizes)
        p95 = ordered[max(math.ceil(0.95 * len(ordered)) - 1, 0)] if ordered else 0
        per_prompt = max(self.prompts, 1)
        saving = 1 - self.prompt_chars / self.full_history_chars if self.full_history_chars else 0.0
        return {
            "prompts": self.prompts,
            "eligible": self.eligible,
            "compacted": self.compacted,
            "compacted_percent": round(100 * self.compacted / per_prompt, 1),
            "total_events": self.total_events,
            "included_events": self.included_events,
            "omitted_events": self.omitted_events,
            "prompt_chars": self.prompt_chars,
            "full_history_chars": self.full_history_chars,
            "mean_prompt_chars": round(self.prompt_chars / per_prompt, 1),
            "p95_prompt_chars": p95,
            "mean_full_history_chars": round(self.full_history_chars / per_prompt, 1),
            "mean_included_events": round(self.included_events / per_prompt, 2),
            "saving_percent": float(round(100 * saving, 1)),  # always a number, one decimal
            "prompts_with_usage": self.prompts_with_usage,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


class MetricsReport(msgspec.Struct, kw_only=True):
    """What ``metrics --json`` prints."""

    schema_version: int
    filters: dict[str, Any]
    by: list[str]
    totals: dict[str, Any]
    groups: list[dict[str, Any]]
    skipped_lines: int


def _group_value(record: PromptRecord, key: str) -> Any:
    match key:
        case "role":
            return record.role
        case "purpose":
            return record.purpose
        case "enabled":
            return record.enabled
        case _:  # day, as the record's own (local, with offset) date
            return record.timestamp[:10]


def aggregate(files: Iterable[Path], filters: Filters, by: list[str]) -> MetricsReport:
    """Aggregate the records of ``files`` that pass ``filters``, grouped by ``by``."""
    since = datetime.fromisoformat(filters.since) if filters.since else None
    skipped = _Skipped()
    totals = _Group()
    groups: dict[tuple[Any, ...], _Group] = {}
    for record in read_records(files, skipped):
        if filters.role is not None and record.role != filters.role:
            continue
        if filters.purpose is not None and record.purpose != filters.purpose:
            continue
        if filters.request_id is not None and record.request_id != filters.request_id:
            continue
        if since is not None:
            try:
                if datetime.fromisoformat(record.timestamp) < since:
                    continue
            except (ValueError, TypeError):  # no offset or not a timestamp: cannot place it
                skipped.lines += 1
                continue
        totals.add(record)
        key = tuple(_group_value(record, name) for name in by)
        groups.setdefault(key, _Group()).add(record)
    return MetricsReport(
        schema_version=PROMPT_RECORD_SCHEMA,
        filters={name: value for name, value in msgspec.structs.asdict(filters).items()},
        by=list(by),
        totals=totals.as_dict(),
        groups=[
            {**dict(zip(by, key, strict=True)), **group.as_dict()}
            for key, group in sorted(groups.items(), key=lambda item: [str(v) for v in item[0]])
        ],
        skipped_lines=skipped.lines,
    )


def _row(label: list[str], values: dict[str, Any], tokens: bool) -> list[str]:
    counts = (values["total_events"], values["included_events"], values["omitted_events"])
    events = "/".join(f"{count:,}" for count in counts)
    usage = [f"{values['prompt_tokens']:,}/{values['completion_tokens']:,}"] if tokens else []
    return [
        *label,
        f"{values['prompts']:,}",
        f"{values['eligible']:,}",
        f"{values['compacted']:,} ({values['compacted_percent']:.0f}%)",
        events,
        f"{values['mean_prompt_chars']:,.0f}",
        f"{values['p95_prompt_chars']:,}",
        f"{values['saving_percent']:.1f}%",
        *usage,
    ]


def _label(value: Any) -> str:
    """A group's value as a row label: the ``enabled`` flag reads enabled/disabled."""
    if isinstance(value, bool):
        return "enabled" if value else "disabled"
    return str(value)


def render_report(report: MetricsReport) -> str:
    """The human table: a row per group, then the totals (and a tokens column when a model
    server reported usage)."""
    tokens = report.totals["prompts_with_usage"] > 0
    headers = [
        *report.by,
        "prompts",
        "eligible",
        "compacted",
        "events total/incl/omit",
        "mean chars",
        "p95 chars",
        "saving",
        *(["tokens in/out"] if tokens else []),
    ]
    rows = [
        _row([_label(group[key]) for key in report.by], group, tokens) for group in report.groups
    ]
    rows.append(_row(["total", *[""] * (len(report.by) - 1)], report.totals, tokens))
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(headers, widths, strict=True))]
    for row in rows:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)))
    lines.insert(-1, "")
    if report.by == ["enabled"]:
        lines += ["", _compare_enabled(report)]
    lines.append(f"\nskipped lines: {report.skipped_lines}")
    return "\n".join(line.rstrip() for line in lines)


def _compare_enabled(report: MetricsReport) -> str:
    per = {group["enabled"]: group for group in report.groups}
    on, off = per.get(True), per.get(False)
    if on is None or off is None:
        return "Comparison: needs records from both an enabled and a disabled period."
    if not off["mean_prompt_chars"]:
        return "Comparison: the disabled period's prompts have no size to compare against."
    change = 1 - on["mean_prompt_chars"] / off["mean_prompt_chars"]
    return (
        f"Per prompt, compaction on: {on['mean_prompt_chars']:,.0f} chars and "
        f"{on['mean_included_events']:.1f} events; off: {off['mean_prompt_chars']:,.0f} chars and "
        f"{off['mean_included_events']:.1f} events ({change:.0%} smaller with compaction). "
        "Compare like with like: same request shapes, roles and model (docs/monitoring.md)."
    )
