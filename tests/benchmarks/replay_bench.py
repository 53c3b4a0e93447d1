"""``teams-runtime replay`` over a workspace of 1,000 requests against a naive replay that
decodes the request's record file per call and projects it from dicts (run by ``run.py``).

    python tests/benchmarks/replay_bench.py     # this row alone
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from teams_runtime.cli import main
from teams_runtime.codecs.config import DEFAULT_CONFIG_TEXT, DEFAULT_STEP, LAYOUTS, TeamConfig
from teams_runtime.codecs.prompt_records import PromptRecord, encode_prompt_record
from teams_runtime.codecs.request_records import encode_record
from teams_runtime.codecs.roles import ROLES
from teams_runtime.demo import sample_record
from teams_runtime.monitoring import PROMPT_LOG_NAME
from teams_runtime.monitoring.replay import (
    DEFAULT_POLICIES,
    Layout,
    PrefixCache,
    envelope_from,
    parse_policy,
)
from teams_runtime.policy.projection import project_request
from teams_runtime.policy.prompts import build_prompt
from teams_runtime.policy.token_counts import DEFAULT_RATE

REQUESTS = 1000
CALLS = 4  # per request: the last hops of its history
TARGET_SECONDS = 10.0

_START = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def make_workspace(root: Path, requests: int = REQUESTS) -> Path:
    """A workspace of ``requests`` records (20-60 events each) and ``CALLS`` prompt records
    each, two seconds apart."""
    requests_dir = root / ".teams_runtime" / "requests"
    logs = root / ".teams_runtime" / "logs"
    requests_dir.mkdir(parents=True)
    logs.mkdir()
    (root / "team_runtime.yaml").write_text(DEFAULT_CONFIG_TEXT, encoding="utf-8")
    lines = []
    for number in range(requests):
        request_id = f"req-{number}"
        events = 20 + number % 41
        (requests_dir / f"{request_id}.json").write_bytes(
            encode_record(sample_record(events, request_id))
        )
        for call in range(CALLS):
            total = events - CALLS + 1 + call
            at = _START + timedelta(seconds=2 * (number * CALLS + call))
            record = PromptRecord(
                timestamp=at.isoformat(),
                role=ROLES[(number + call) % len(ROLES)],
                purpose="role_task",
                request_id=request_id,
                enabled=True,
                recent_events=8,
                max_events=16,
                total_events=total,
                included_events=min(total, 16),
                omitted_events=max(total - 16, 0),
                compacted=total > 16,
                eligible=total > 16,
                backfilled_roles=[],
                prompt_chars=10_000,
                full_history_chars=20_000,
                model="dry_run/dry_run",
            )
            lines.append(encode_prompt_record(record))
    (logs / PROMPT_LOG_NAME).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def ours(root: Path) -> tuple[float, dict[str, int]]:
    """``teams-runtime replay --json`` in this process: its seconds and tokens per (policy,
    layout)."""
    out = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(out):
        assert main(["replay", "--workspace", str(root), "--json"]) == 0
    took = time.perf_counter() - start
    rows = json.loads(out.getvalue())["policies"]
    return took, {f"{row['policy']} {row['layout']}": row["prompt_tokens_estimate"] for row in rows}


def naive(root: Path) -> tuple[float, dict[str, int]]:
    """The same replay done plainly: each call's record file read and decoded with ``json``,
    projected from dicts and its prompt built, for every policy and layout."""
    config = TeamConfig()
    rows = [
        (f"{name} {layout}", parse_policy(name), Layout(layout))
        for name in DEFAULT_POLICIES
        for layout in LAYOUTS
    ]
    start = time.perf_counter()
    logs = root / ".teams_runtime" / "logs" / PROMPT_LOG_NAME
    calls = [json.loads(line) for line in logs.read_text(encoding="utf-8").splitlines()]
    tokens = dict.fromkeys((key for key, _, _ in rows), 0)
    caches = {key: PrefixCache(300) for key, _, _ in rows}
    for call in calls:
        when = datetime.fromisoformat(call["timestamp"]).timestamp()
        for key, policy, layout in rows:
            path = root / ".teams_runtime" / "requests" / f"{call['request_id']}.json"
            record = json.loads(path.read_text(encoding="utf-8"))
            record["events"] = record["events"][: call["total_events"]]
            context = policy.context_for(config, PromptRecord(**call))
            projection = project_request(record, layout.context(context, DEFAULT_STEP))
            envelope = envelope_from(projection, call["request_id"], call["role"])
            bundle = build_prompt(
                "task", role=call["role"], projection=projection, envelope=envelope
            )
            text = bundle.text()
            sizes = bundle.sizes()
            parts = (sizes.brief, sizes.record, sizes.envelope, sizes.notice, *sizes.events)
            tokens[key] += sum(DEFAULT_RATE.tokens(size) for size in parts)
            caches[key].send("dry_run/dry_run", call["role"], when, text)
    return time.perf_counter() - start, tokens


def replay_figures(requests: int = REQUESTS) -> tuple[float, float]:
    """Ours and the naive replay's seconds on a fresh workspace (their tokens checked equal)."""
    with tempfile.TemporaryDirectory(prefix="teams-runtime-replay-") as folder:
        root = make_workspace(Path(folder), requests)
        took, figures = ours(root)
        plain, expected = naive(root)
    assert figures == expected, (figures, expected)
    return took, plain


if __name__ == "__main__":
    took, plain = replay_figures(int(sys.argv[1]) if len(sys.argv) > 1 else REQUESTS)
    print(f"replay of {REQUESTS:,} requests: ours {took:.2f} s, naive {plain:.2f} s, "
          f"{plain / took:.1f}x")  # fmt: skip
