"""The ContextActor under ``prompt_context.layout: shared_prefix``: its answers equal the pure
stepped projection, also when a backfilled report lies beyond what a record's index keeps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from teams_runtime import PromptContextConfig, open_context, project_request
from teams_runtime.codecs.request_records import encode_record
from teams_runtime.storage import Workspace

pytestmark = pytest.mark.anyio

STEPPED = PromptContextConfig(layout="shared_prefix", step=8)


def _report(role: str) -> dict[str, Any]:
    return {"type": "role_report", "actor": role, "payload": {"role": role, "status": "completed"}}


def _note(number: int) -> dict[str, Any]:
    return {"type": "note", "summary": f"note {number} " + "x" * 600}  # a large record: indexed


async def test_a_report_older_than_the_index_reaches_is_read_whole(tmp_path: Path) -> None:
    # research reported once, first; 300 notes later (beyond the index's last 256 events) it
    # reports again, in the growing part of the tail (events 296..303 share the start 288):
    # its backfill is then its first report, which only a whole read finds.
    history = [_report("research"), *(_note(i) for i in range(300))]
    source = {"request_id": "req-1", "status": "in_progress", "events": history}
    path = Workspace(tmp_path).request_path("req-1")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(encode_record(source))
    answers = []
    async with open_context(tmp_path, STEPPED) as ctx:
        for event in [_report("research"), _note(900)]:
            await ctx.append_event("req-1", event)
            answers.append(await ctx.project("req-1"))
            async with open_context(tmp_path, STEPPED) as cold:  # another process's view
                assert (await cold.project("req-1")).selected_indices == answers[
                    -1
                ].selected_indices
            expected = project_request(path.read_bytes(), STEPPED)
            assert answers[-1].selected_indices == expected.selected_indices
            assert answers[-1].record == expected.record
    first, second = (answer.selected_indices for answer in answers)
    assert first[0] == 0 and first[1] == 288  # research's first report, then the tail
    assert second == (*first, 302)  # the next event appended
