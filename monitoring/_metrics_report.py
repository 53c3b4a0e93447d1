"""``teams-runtime metrics`` over the prompt records: reading them, filtering, grouping.

``metrics`` reads ``prompt_context*.jsonl`` (rotated files too) a line at a time, decoding each
with msgspec; malformed, torn or over-long lines are counted and skipped. The logs folder is not
trusted: only regular files are read (never through a link, never a folder or a device named
like a log), and a file that vanishes while it is read (rotated away) ends its part quietly.
Memory holds one small aggregate per group (``call_groups``) and a few sums per request.
``matching_records`` is the one place records are filtered (``aggregate`` and ``--chart`` read
through it), and ``group_value`` the one place a record's group is named.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import msgspec

from teams_runtime.codecs.config import RateCard
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.prompt_records import (
    PROMPT_RECORD_SCHEMA,
    PromptRecord,
    decode_prompt_record,
)
from teams_runtime.monitoring._call_groups import CallGroup, Figures
from teams_runtime.monitoring._estimates import EstimateAccuracy, Estimates
from teams_runtime.monitoring._log_sinks import PROMPT_LOG_NAME

__all__ = [
    "CompletedFigures",
    "Filters",
    "Group",
    "GroupValue",
    "MetricsReport",
    "RequestFigures",
    "Skipped",
    "aggregate",
    "group_value",
    "log_files",
    "matching_records",
    "read_records",
]


class Filters(msgspec.Struct, frozen=True, kw_only=True):
    """Which records count; ``None`` means no filter."""

    since: str | None = None  # ISO-8601 with offset
    role: str | None = None
    purpose: str | None = None
    request_id: str | None = None


# A prompt record is a few hundred bytes; a line longer than this is no record of ours.
MAX_LINE_BYTES = 64 * 1024


def log_files(logs_dir: Path) -> list[Path]:
    """The prompt record files, rotated ones first (oldest first), the live one last: regular
    files only (a link, a folder or a device named like a log is passed over)."""
    stem, suffix = PROMPT_LOG_NAME.rsplit(".", 1)
    rotated = sorted(logs_dir.glob(f"{stem}.*.{suffix}"))
    return [path for path in [*rotated, logs_dir / PROMPT_LOG_NAME] if _is_regular(path)]


def _is_regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


@dataclass
class Skipped:
    lines: int = 0


def read_records(
    files: Iterable[Path], skipped: Skipped, *, tail: int | None = None
) -> Iterator[PromptRecord]:
    """Stream the records of ``files``; bad lines (torn, not JSON, wrong shape, longer than
    ``MAX_LINE_BYTES``) are counted. A file gone, or no longer a regular file, by the time it
    is opened is passed over. With ``tail``, only the records in the last ``tail`` bytes of
    the files taken together (the newest), from the first whole line there."""
    spans = [(path, 0) for path in files] if tail is None else _tail_spans(list(files), tail)
    for path, start in spans:
        for line in _lines(path, skipped, start):
            try:
                record = decode_prompt_record(line)
            except (msgspec.DecodeError, RecursionError):  # ValidationError included
                skipped.lines += 1
                continue
            yield record


def _tail_spans(files: list[Path], tail: int) -> list[tuple[Path, int]]:
    """Where to start reading each of ``files`` (oldest first) so that only their last
    ``tail`` bytes together are read; the files wholly before those are left out."""
    spans: list[tuple[Path, int]] = []
    for path in reversed(files):
        if tail <= 0:
            break
        try:
            size = os.lstat(path).st_size
        except OSError:
            continue
        spans.append((path, max(0, size - tail)))
        tail -= size
    return spans[::-1]


def _lines(path: Path, skipped: Skipped, start: int = 0) -> Iterator[bytes]:
    """The non-blank lines of a regular file, each at most ``MAX_LINE_BYTES`` (longer ones
    are counted in ``skipped`` and read past in pieces, never held whole); from ``start``
    on, the line it falls inside passed over."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENXIO):
            return  # rotated away, or made a link meanwhile
        raise
    with open(descriptor, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return
        if start > 0:  # begin after the line the offset falls in (its end is at start - 1)
            handle.seek(start - 1)
            line = handle.readline(MAX_LINE_BYTES)
            while line and not line.endswith(b"\n"):
                line = handle.readline(MAX_LINE_BYTES)
        while line := handle.readline(MAX_LINE_BYTES + 1):
            if len(line) > MAX_LINE_BYTES:
                skipped.lines += 1
                while line and not line.endswith(b"\n"):
                    line = handle.readline(MAX_LINE_BYTES)
                continue
            if line.strip():
                yield line


# What a record has for a `--by` key: its role, purpose, model, day or hour, or `enabled`.
GroupValue = str | bool


class Group(msgspec.Struct, frozen=True, kw_only=True):
    """One group of a report: its value for each ``--by`` key (in ``--by``'s order), and the
    figures of its calls."""

    values: dict[str, GroupValue]
    figures: Figures


class RequestFigures(msgspec.Struct, frozen=True, kw_only=True):
    """One request's calls, input tokens and cost (``None``: no call of it reported them),
    and its status now when one was asked for."""

    request_id: str
    calls: int
    prompt_tokens: int | None
    calls_with_usage: int
    cost_usd: float | None
    priced_calls: int
    status: str | msgspec.UnsetType | None = msgspec.UNSET  # left out unless asked for


class CompletedFigures(msgspec.Struct, frozen=True, kw_only=True):
    """The sums and means over the requests whose status is ``completed``; a mean is ``None``
    when no call of theirs had what it needs (usage, a price): unknown, not zero."""

    requests: int
    calls: int
    calls_with_usage: int
    priced_calls: int
    prompt_tokens: int | None
    cost_usd: float | None
    mean_prompt_tokens: float | None
    mean_cost_usd: float | None


class MetricsReport(msgspec.Struct, kw_only=True):
    """A metrics report: the figures of every group, of all calls (``totals``), of each
    request (``requests``) and of the completed ones (``completed_requests``)."""

    schema_version: int
    filters: Filters
    by: list[str]
    totals: Figures
    groups: list[Group]
    requests: list[RequestFigures]
    completed_requests: CompletedFigures
    skipped_lines: int
    # Per model, when prompt records carry a budget's estimate (left out of --json otherwise).
    estimates: list[EstimateAccuracy] | msgspec.UnsetType = msgspec.UNSET

    def as_json(self) -> JsonObject:
        """What ``metrics --json`` prints: a group as one object, its ``--by`` values first
        (so its keys depend on ``--by``), then its figures."""
        report: JsonObject = msgspec.to_builtins(self)
        report["groups"] = [
            {**group.values, **msgspec.to_builtins(group.figures)} for group in self.groups
        ]
        return report


def group_value(record: PromptRecord, key: str) -> GroupValue:
    """The value ``record`` has for a ``--by`` key (``GROUP_KEYS``)."""
    match key:
        case "role":
            return record.role
        case "purpose":
            return record.purpose
        case "enabled":
            return record.enabled
        case "model":
            return record.model or "unknown"  # a schema-1 record does not say
        case "hour":  # as the record's own (local, with offset) date and hour
            return f"{record.timestamp[:10]} {record.timestamp[11:13]}h"
        case _:  # day, as the record's own (local, with offset) date
            return record.timestamp[:10]


@dataclass
class _Request:
    calls: int = 0
    prompt_tokens: int = 0
    calls_with_usage: int = 0
    cost_usd: float = 0.0
    priced_calls: int = 0

    def add(self, record: PromptRecord) -> None:
        self.calls += 1
        if record.prompt_tokens is not None:
            self.calls_with_usage += 1
            self.prompt_tokens += record.prompt_tokens
        if record.cost_usd is not None:
            self.priced_calls += 1
            self.cost_usd += record.cost_usd

    def figures(
        self, request_id: str, status: str | msgspec.UnsetType | None = msgspec.UNSET
    ) -> RequestFigures:
        """Its figures; ``None`` for a sum that no call reported (unknown, not zero)."""
        return RequestFigures(
            request_id=request_id,
            calls=self.calls,
            prompt_tokens=self.prompt_tokens if self.calls_with_usage else None,
            calls_with_usage=self.calls_with_usage,
            cost_usd=self.cost_usd if self.priced_calls else None,
            priced_calls=self.priced_calls,
            status=status,
        )


def _completed(requests: list[RequestFigures]) -> CompletedFigures:
    """The completed requests' sums and means."""
    done = [row for row in requests if row.status == "completed"]
    count = len(done)
    with_usage = sum(row.calls_with_usage for row in done)
    priced = sum(row.priced_calls for row in done)
    tokens = sum(row.prompt_tokens or 0 for row in done) if with_usage else None
    cost = sum(row.cost_usd or 0.0 for row in done) if priced else None
    return CompletedFigures(
        requests=count,
        calls=sum(row.calls for row in done),
        calls_with_usage=with_usage,
        priced_calls=priced,
        prompt_tokens=tokens,
        cost_usd=cost,
        mean_prompt_tokens=tokens / count if tokens is not None else None,
        mean_cost_usd=cost / count if cost is not None else None,
    )


def _passes(record: PromptRecord, filters: Filters, since: datetime | None) -> bool | None:
    """Whether ``record`` counts; ``None`` when its timestamp cannot be placed."""
    if filters.role is not None and record.role != filters.role:
        return False
    if filters.purpose is not None and record.purpose != filters.purpose:
        return False
    if filters.request_id is not None and record.request_id != filters.request_id:
        return False
    if since is not None:
        try:
            return datetime.fromisoformat(record.timestamp) >= since
        except (ValueError, TypeError):  # no offset or not a timestamp: cannot place it
            return None
    return True


def matching_records(
    files: Iterable[Path], filters: Filters, skipped: Skipped
) -> Iterator[PromptRecord]:
    """The records of ``files`` that pass ``filters``; one whose timestamp cannot be placed
    against ``since`` counts as a skipped line."""
    since = datetime.fromisoformat(filters.since) if filters.since else None
    for record in read_records(files, skipped):
        counted = _passes(record, filters, since)
        if counted is None:
            skipped.lines += 1
        if counted:
            yield record


def aggregate(
    files: Iterable[Path],
    filters: Filters,
    by: list[str],
    *,
    rate_cards: Mapping[str, RateCard] | None = None,
    status_of: Callable[[str], str | None] | None = None,
) -> MetricsReport:
    """Aggregate the records of ``files`` that pass ``filters``, grouped by ``by``.
    ``rate_cards`` price the full-history estimate (the records carry their own costs);
    ``status_of`` gives a request's status now (what ``completed_requests`` counts)."""
    cards = rate_cards or {}
    skipped = Skipped()
    totals = CallGroup()
    groups: dict[tuple[GroupValue, ...], CallGroup] = {}
    requests: dict[str, _Request] = {}
    estimates = Estimates()
    for record in matching_records(files, filters, skipped):
        card = cards.get(record.model) if record.model is not None else None
        totals.add(record, card)
        estimates.add(record)
        key = tuple(group_value(record, name) for name in by)
        groups.setdefault(key, CallGroup()).add(record, card)
        requests.setdefault(record.request_id, _Request()).add(record)
    rows = [
        request.figures(request_id, msgspec.UNSET if status_of is None else status_of(request_id))
        for request_id, request in sorted(requests.items())
    ]
    return MetricsReport(
        schema_version=PROMPT_RECORD_SCHEMA,
        filters=filters,
        by=list(by),
        totals=totals.figures(),
        groups=[
            Group(values=dict(zip(by, key, strict=True)), figures=group.figures())
            for key, group in sorted(groups.items(), key=lambda item: [str(v) for v in item[0]])
        ],
        requests=rows,
        completed_requests=_completed(rows),
        skipped_lines=skipped.lines,
        estimates=estimates.accuracy() or msgspec.UNSET,
    )
