"""What ``teams-runtime status`` reports, as one object (its ``--json``): every request's state,
every role's envelopes, every worker's lease, the model servers away, the answers waiting, the
rejected envelopes and the strays.

Waiting answers are shown here as ``inbox`` shows them too: ids, roles and times, never
envelope text.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from teams_runtime.codecs.config import TeamConfig
from teams_runtime.codecs.events import PROMPT_TOO_LARGE
from teams_runtime.codecs.formats import iso_of
from teams_runtime.codecs.request_records import EVENTS_KEY, decode_any
from teams_runtime.codecs.statuses import ENDED
from teams_runtime.codecs.waiting_answers import WaitingAnswer
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.policy.outcomes import RequestState
from teams_runtime.storage import (
    IndexedParts,
    QueueSnapshot,
    Workspace,
    load_team_config,
)
from teams_runtime.storage.opening import BlockingStorage, blocking_storage
from teams_runtime.storage.server_files import server_strays, servers_away

if TYPE_CHECKING:
    from teams_runtime.storage.blocking import BlockingRecordStore, BlockingRejectedShelf

__all__ = ["age", "due", "retry_hint", "status_report", "waiting_rows"]


def status_report(workspace: Workspace) -> dict[str, Any]:
    """Every request's state, every role's envelopes, every worker's lease: one object."""
    config = load_team_config(workspace.root)
    with blocking_storage(workspace, config) as storage:  # NATS connects, then closes
        snapshot = storage.queue.snapshot()
        read = [_request_row(storage.store, request_id) for request_id in storage.store.list_ids()]
        strays = stray_rows(workspace, storage)
        rejected = rejected_rows(storage.rejected)
        waiting = storage.inbox.items()
    now = time.time()
    rows = [row for row, _ in read]
    # Read only: an answer whose request ended, or moved to a later epoch since (cancelled and
    # reopened, retried), waits no more (`inbox` removes it).
    ended = {row["request_id"] for row in rows if row["status"] in ENDED}
    epochs = {row["request_id"]: epoch for row, epoch in read}
    waiting = [
        item
        for item in waiting
        if item.request_id not in ended
        and not RequestState(epoch=epochs.get(item.request_id)).is_stale(item.envelope)
    ]
    return {
        "workspace": str(workspace.root.resolve()),
        "requests": rows,
        "max_hops": config.team.max_hops,  # a failed request at it needs it raised to retry
        "roles": {
            role: {
                "waiting": snapshot.waiting[role],
                "claimed": snapshot.claimed[role],
                "deferred": snapshot.deferred[role],
            }
            for role in config.cast.names
        },
        "model_servers_away": _servers_away(workspace, config, snapshot),
        "waiting_answers": waiting_rows(waiting, now),
        "deferred": [
            {
                "role": deferred.role,
                "request_id": deferred.request_id,
                "envelope_id": deferred.envelope_id,
                "deferrals": deferred.deferrals,
                "next_attempt_at": iso_of(deferred.next_attempt),
                "due_in_seconds": round(max(deferred.next_attempt - now, 0.0), 1),
            }
            for deferred in snapshot.deferred_envelopes
        ],
        "rejected": rejected,
        "workers": [
            {
                "worker": worker.worker,
                "alive": worker.alive,
                "lease_age_seconds": None
                if worker.lease_age is None
                else round(worker.lease_age, 1),
                "holds": worker.holds,
            }
            for worker in snapshot.workers
        ],
        "strays": strays,
    }


def _text(fields: dict[str, Any], key: str) -> str:
    value = fields.get(key)
    return value if isinstance(value, str) else ""


def _request_row(
    store: BlockingRecordStore, request_id: str, read: Any = None
) -> tuple[dict[str, Any], Any]:
    """The request's row, and its ``epoch`` as the record holds it (``None``: absent), from
    ``read`` when its newest event was read already (``store.read(request_id, tail=1)``);
    ``store`` is read again only for a failure whose failing event is further back."""
    if read is None:
        try:
            read = store.read(request_id, tail=1)
        except TeamsRuntimeError as exc:
            return {"request_id": request_id, "status": "unreadable", "error": str(exc)}, None
    if isinstance(read, IndexedParts):
        count, last = read.count, read.tail[-1:]
    else:
        events = read.fields.get(EVENTS_KEY)
        history = events if isinstance(events, list) else []
        count, last = len(history), history[-1:]
    last_event = decode_any(last[0]) if last else None
    hops = read.fields.get("hops")
    status = _text(read.fields, "status")
    row = {
        "request_id": request_id,
        "status": status,
        "current_role": _text(read.fields, "current_role"),
        "hops": hops if type(hops) is int else 0,
        "events": count,
        "last_event_at": _text(last_event, "timestamp") if isinstance(last_event, dict) else "",
        "failure": None,
    }
    if status == "failed":
        row["failure"] = failure_of(last_event) or _failure_further_back(store, request_id)
    return row, read.fields.get("epoch")


# How far back from a failed request's newest event its failing event is looked for: past the
# few a person or a late outcome may add after it (``append``, ``stale_outcome``).
_FAILURE_SCAN = 32


def _failure_further_back(store: BlockingRecordStore, request_id: str) -> dict[str, Any] | None:
    """The failure of a failed request whose newest event is not the failing one."""
    try:
        read = store.read(request_id, tail=_FAILURE_SCAN)
    except TeamsRuntimeError:
        return None
    if isinstance(read, IndexedParts):
        tail = read.tail
    else:
        events = read.fields.get(EVENTS_KEY)
        tail = events[-_FAILURE_SCAN:] if isinstance(events, list) else []
    for raw in reversed(tail):
        failure = failure_of(decode_any(raw))
        if failure is not None:
            return failure
    return None


def failure_of(event: Any) -> dict[str, Any] | None:
    """Why a request failed, if ``event`` is a failing one: its ``event`` type, the ``role``
    it concerns and the ``reason`` in one line; ``None`` for any other event."""
    if not isinstance(event, dict):
        return None
    kind = event.get("type")
    payload = event.get("payload")
    fields = payload if isinstance(payload, dict) else {}
    role = _text(fields, "from_role") or _text(event, "actor")
    if kind == "model_failed" and fields.get("cause") == PROMPT_TOO_LARGE:
        reason = f"{role}'s prompt does not fit: {_text(fields, 'reason') or 'no reason'}"
    elif kind == "model_failed":
        reason = f"every call of {role}'s model failed: {_text(fields, 'reason') or 'no reason'}"
    elif kind == "hop_limit":
        reason = (
            f"the hand-off {_text(fields, 'from_role')} -> {_text(fields, 'to_role')} would "
            f"pass team.max_hops ({fields.get('max_hops')})"
        )
    elif kind == "answer_timed_out":
        within = fields.get("answer_within_seconds")
        limit = f"within {within:g} s" if _is_number(within) else "in time"
        reason = f"{role} gave no answer {limit}"
    elif kind == "role_report" and fields.get("error") == "contract_validation_failed":
        role = _text(fields, "role") or role
        issues = fields.get("contract_issues")
        first = issues[0] if isinstance(issues, list) and issues else "no issue named"
        more = (
            f" (and {len(issues) - 1} more)" if isinstance(issues, list) and len(issues) > 1 else ""
        )
        reason = (
            f"the contract rejected {role}'s answer and each repair of it: {first}{more}; "
            "the answers are in .teams_runtime/attempts/"
        )
    elif kind in ("role_report", "version_control_completed") and fields.get("status") == "failed":
        role = _text(fields, "role") or role
        error = _text(fields, "error")
        reason = f"{role} reported failed: {_text(fields, 'summary') or 'no summary'}" + (
            f" ({error})" if error else ""
        )
    elif kind == "retry_not_queued":
        reason = "its retry could not be queued"
    else:
        return None
    failure = {"event": kind, "role": role, "reason": " ".join(reason.split())}
    if kind == "model_failed" and fields.get("cause"):
        failure["cause"] = fields["cause"]
    return failure


def retry_hint(request_id: str, failure: dict[str, Any] | None) -> str:
    """How to try a failed request again: ``retry`` alone, or first what it needs (a prompt
    that cannot fit fails again until the budget or the window is larger)."""
    retry = f"`teams-runtime retry {request_id}` queues its last step again"
    if failure is not None and failure.get("cause") == PROMPT_TOO_LARGE:
        return f"make the prompt fit first, as its reason says; then {retry}"
    return retry


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _servers_away(
    workspace: Workspace, config: TeamConfig, snapshot: QueueSnapshot
) -> list[dict[str, Any]]:
    """The model servers (and models on a server) a running worker waits for
    (``model_servers``' files), each with the roles it serves and their envelopes, counted as
    the ``roles`` block counts them: waiting (no worker took them: none will while it is away)
    and claimed (held by calls that wait)."""
    served: dict[str, list[tuple[str, str]]] = {}  # base_url -> (role, model) on that server
    for role in config.cast.names:
        model = config.model_for(role)
        if model.backend == "openai" and model.openai is not None:
            served.setdefault(model.openai.base_url, []).append((role, model.openai.model))
    rows = []
    for away in servers_away(workspace):
        on_server = served.get(away.base_url, [])
        roles = [role for role, model in on_server if away.model in (None, model)]
        rows.append(
            {
                "base_url": away.base_url,
                "model": away.model,
                "away_since": away.away_since,
                "roles": roles,
                "waiting": sum(snapshot.waiting[role] for role in roles),
                "claimed": sum(snapshot.claimed[role] for role in roles),
            }
        )
    return rows


def stray_rows(workspace: Workspace, storage: BlockingStorage) -> list[dict[str, Any]]:
    """Every stray of the workspace's store, queue and model-server files, as ``--json``
    shows them (``envelopes``: how many wait there for no role)."""
    found = [*storage.store.strays(), *storage.queue.strays(), *server_strays(workspace)]
    return [
        {"where": stray.where, "reason": stray.reason, "envelopes": stray.envelopes}
        for stray in found
    ]


def rejected_rows(shelf: BlockingRejectedShelf) -> list[dict[str, Any]]:
    """The rejected envelopes as ``status --json`` lists them (``stray``: set aside from where
    no role reads, and left there by ``retry --rejected``)."""
    return [
        {
            "role": envelope.role,
            "request_id": envelope.request_id or None,
            "name": envelope.name,
            "reason": envelope.reason,
            "stray": envelope.stray,
        }
        for envelope in shelf.listing()
    ]


def waiting_rows(items: list[WaitingAnswer], now: float) -> list[dict[str, Any]]:
    """Each waiting answer as ``inbox --json`` and ``status --json`` show it (ids, roles and
    times only: no envelope text)."""
    return [
        {
            "request_id": item.request_id,
            "envelope_id": item.envelope_id,
            "role": item.role,
            "from_role": item.from_role,
            "since": iso_of(item.since),
            "waiting_seconds": round(max(now - item.since, 0.0), 1),
            "due_at": None if item.due is None else iso_of(item.due),
            "overdue": item.overdue(now),
            "renewals": item.renewals,
        }
        for item in items
    ]


def age(seconds: float) -> str:
    """A span as a person reads it: ``42s``, ``3m05s``, ``2h10m``, ``3d04h``."""
    seconds = max(int(seconds), 0)
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 86_400:
        return f"{seconds // 3600}h{seconds // 60 % 60:02d}m"
    return f"{seconds // 86_400}d{seconds // 3600 % 24:02d}h"


def due(item: WaitingAnswer, now: float) -> str:
    """When ``item``'s answer_within runs out: ``in 1h59m``, ``overdue``, or ``-``."""
    if item.due is None:
        return "-"
    return "overdue" if item.due <= now else f"in {age(item.due - now)}"
