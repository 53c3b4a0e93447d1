"""What ``status`` says a person can do: a line for each failed request and each rejected
envelope, with the command that tries it again (``teams-runtime retry``)."""

from __future__ import annotations

from typing import Any

from teams_runtime.storage.rejected import RejectedShelf

__all__ = ["hint_lines", "rejected_rows"]

_REASON_SHOWN = 200  # characters of a reason on its line (--json has it whole)


def rejected_rows(shelf: RejectedShelf) -> list[dict[str, Any]]:
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


def hint_lines(report: dict[str, Any]) -> list[str]:
    """A line per failed request and per rejected envelope of ``report``, saying how to
    try it again."""
    lines = [
        f"failed {row['request_id']} ({row.get('current_role') or 'no role'}): "
        f"`teams-runtime retry {row['request_id']}` queues its last step again"
        for row in report["requests"]
        if row["status"] == "failed"
    ]
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
