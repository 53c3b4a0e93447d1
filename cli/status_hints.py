"""What ``status`` says a person can do: a line for each failed request and each rejected
envelope, with the command that tries it again (``teams-runtime retry``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from teams_runtime.codecs.formats import count_of

if TYPE_CHECKING:
    from teams_runtime.storage.blocking import BlockingRejectedShelf

__all__ = ["hint_lines", "rejected_rows"]

_REASON_SHOWN = 200  # characters of a reason on its line (--json has it whole)


def rejected_rows(shelf: BlockingRejectedShelf) -> list[dict[str, Any]]:
    """The rejected envelopes as ``status --json`` lists them."""
    return [
        {
            "role": envelope.role,
            "request_id": envelope.request_id or None,
            "name": envelope.name,
            "reason": envelope.reason,
        }
        for envelope in shelf.listing()
    ]


def _failed_line(row: dict[str, Any], max_hops: int) -> str:
    request_id = row["request_id"]
    said = f"failed {request_id} ({row.get('current_role') or 'no role'})"
    retry = f"`teams-runtime retry {request_id}`"
    if row.get("hops", 0) >= max_hops:  # a retry is refused until the limit is raised
        return (
            f"{said} at the hop limit ({count_of(row['hops'], 'hand-off')}, team.max_hops "
            f"{max_hops}): "
            f"raise team.max_hops in team_runtime.yaml, then {retry} queues its last step again"
        )
    return f"{said}: {retry} queues its last step again"


def hint_lines(report: dict[str, Any], max_hops: int) -> list[str]:
    """A line per failed request and per rejected envelope of ``report``, saying how to
    try it again (a request at ``max_hops``, the team's limit, needs it raised first)."""
    lines = [_failed_line(row, max_hops) for row in report["requests"] if row["status"] == "failed"]
    for rejected in report["rejected"]:
        request_id = rejected["request_id"]
        again = "teams-runtime retry --rejected" + (f" {request_id}" if request_id else "")
        reason = rejected["reason"] or "no reason kept"
        if len(reason) > _REASON_SHOWN:
            reason = reason[: _REASON_SHOWN - 3] + "..."
        lines.append(
            f"rejected {rejected['role']}:{request_id or '?'} ({reason}): fix the cause, then "
            f"`{again}` puts it back"
        )
    return lines
