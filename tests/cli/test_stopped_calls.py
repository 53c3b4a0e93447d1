"""A `teams-runtime run` worker stopped by SIGTERM mid-call: the call is `stopped`, not failed.

Real processes and real signals: the prompt record the worker logs for the cut call, and what
`metrics` counts of it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable

from teams_runtime.codecs.prompt_records import PROMPT_RECORD_SCHEMA
from teams_runtime.storage import Workspace

from ..support.waiting import eventually_sync


def test_a_call_cut_by_sigterm_is_recorded_stopped_and_not_counted_failed(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None]
) -> None:
    workspace = team_workspace("sleep", model={"timeout_seconds": 60})
    seed(workspace, "req-1", "qa", events=3)
    worker = subprocess.Popen(
        [sys.executable, "-m", "teams_runtime", "run", "--workspace", str(workspace.root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        calls = workspace.root / "model-state" / "calls-req-1-qa"
        eventually_sync(calls.exists, "the model call", 30)
    finally:
        worker.send_signal(signal.SIGTERM)  # the model sleeps 30 s: this cuts its call
        _, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    log = workspace.root / ".teams_runtime" / "logs" / "prompt_context.jsonl"
    (line,) = log.read_text().splitlines()
    record = json.loads(line)
    assert (record["outcome"], record["schema_version"]) == ("stopped", PROMPT_RECORD_SCHEMA)
    assert PROMPT_RECORD_SCHEMA == 3  # the first schema whose outcome may be `stopped`
    metrics = subprocess.run(
        [sys.executable, "-m", "teams_runtime", "metrics", "--json",
         "--workspace", str(workspace.root)],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    totals = json.loads(metrics.stdout)["totals"]
    assert (totals["prompts"], totals["failures"], totals["stopped"]) == (1, 0, 1)
