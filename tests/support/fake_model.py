"""A real model CLI for the tests: reads the prompt on stdin, prints an answer on stdout.

    python fake_model.py MODE STATE_DIR

MODE: valid | invalid_once | always_invalid | not_json_once | exit_1 | sleep |
sleep:<request> | slow:<seconds> | gated (answers once STATE_DIR/gate exists: a test opens
it when what must happen during the call has) | empty | garbage | huge | slow_valid |
long_summary:<characters> (a valid reply whose summary is that long) |
script:<file> (a valid reply whose next_role is the script's: the file is a JSON object of
role -> the next_role of its 1st, 2nd, ... call on a request, the last one repeated; each
prompt is kept as STATE_DIR/prompt-<request>-<role>-<call>.txt; a key "<role>:fields" holds
a list of objects laid over that role's answer of its 1st, 2nd, ... call the same way).
STATE_DIR keeps per-call state and a log of calls (content-free).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

ROUTE = {
    "planner": "developer",
    "developer": "version_controller",
    "version_controller": "qa",
}


def answer_for(role: str, request_id: str) -> dict[str, object]:
    """A valid answer of ``role`` for ``request_id``, handing the request along ``ROUTE``."""
    answer: dict[str, object] = {
        "request_id": request_id,
        "role": role,
        "status": "completed",
        "summary": f"{role} did its part",
        "insights": [],
        "proposals": {},
        "artifacts": [],
        "next_role": ROUTE.get(role, ""),
        "error": "",
    }
    if role == "research":
        answer = {"request_id": request_id, "role": role, "needed": False, "subject": "",
                  "research_query": "", "reason_code": "enough", "summary": "no research",
                  "next_role": ""}  # fmt: skip
    if role == "version_controller":
        answer |= {"commit_status": "no_changes", "commit_sha": "", "commit_message": "",
                   "commit_paths": [], "change_detected": False}  # fmt: skip
    return answer


def main() -> int:
    mode, state = sys.argv[1], Path(sys.argv[2])
    state.mkdir(parents=True, exist_ok=True)
    prompt = sys.stdin.read()
    role = os.environ["TEAMS_RUNTIME_ROLE"]
    request_id = os.environ["TEAMS_RUNTIME_REQUEST_ID"]
    purpose = os.environ["TEAMS_RUNTIME_PURPOSE"]
    started = time.time()
    calls = state / f"calls-{request_id}-{role}"
    count = int(calls.read_text()) + 1 if calls.exists() else 1
    calls.write_text(str(count))
    if "Current request:" not in prompt:
        return 3
    answer = answer_for(role, request_id)
    if mode.startswith("script:"):
        scripts = json.loads(Path(mode.split(":", 1)[1]).read_text())
        script, fields = scripts[role], scripts.get(f"{role}:fields", [{}])
        answer["next_role"] = script[min(count, len(script)) - 1]
        answer |= fields[min(count, len(fields)) - 1]
        (state / f"prompt-{request_id}-{role}-{count}.txt").write_text(prompt)
    if mode == "exit_1":
        print("model exploded", file=sys.stderr)
        return 1
    if mode == "sleep" or mode == f"sleep:{request_id}":
        time.sleep(30)
    if mode.startswith("slow:"):
        time.sleep(float(mode.split(":", 1)[1]))
    if mode == "gated":
        deadline = time.monotonic() + 60
        while not (state / "gate").exists() and time.monotonic() < deadline:
            time.sleep(0.02)  # another process's file: nothing to wait on but a poll
    if mode == "empty":
        return 0
    if mode == "garbage":
        sys.stdout.buffer.write(b"\xff\xfe not utf-8")
        return 0
    if mode == "huge":
        sys.stdout.write("x" * 3_000_000)
        return 0
    if mode == "slow_valid":
        time.sleep(0.3)
    if mode.startswith("long_summary:"):
        answer["summary"] = "s" * int(mode.split(":", 1)[1])
    bad = (mode == "invalid_once" and count == 1) or mode == "always_invalid"
    if bad:
        answer.pop("summary")
        answer["status"] = "done-ish"
    if mode == "not_json_once" and count == 1:
        sys.stdout.write("Sure! Here is my answer: status completed")
        return 0
    with open(state / "calls.log", "a") as log:
        log.write(json.dumps({"request_id": request_id, "role": role, "purpose": purpose,
                              "start": started, "end": time.time()}) + "\n")  # fmt: skip
    sys.stdout.write(json.dumps(answer))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
