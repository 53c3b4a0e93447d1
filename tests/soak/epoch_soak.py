"""A soak of a request's epochs with real processes: workers killed with SIGKILL while users
cancel, reopen, retry and answer (racing each other), then the promises checked on the records.

    python tests/soak/epoch_soak.py [--backend file|nats] [--seconds S] [--workers W] [--seed K]

It runs `teams-runtime` itself, as a user would: `run` workers (killed with -9 and started
again), `submit`, `submit --reopen`, `cancel`, `retry` and concurrent `answer`s of a person's
role (`developer`), on a model command that takes a moment and sometimes fails. Everything it
starts runs on this machine (the NATS server on a loopback port), and it stops by itself.

At the end it stops killing, drains the queue (`run --once`), and checks each request's record:

- no request is left in progress with nothing queued, claimed or waiting for a person;
- no role's report is recorded twice for one envelope (work applied twice);
- nothing of an older epoch moved a request: after `cancelled` or `failed`, the next status
  change comes from a reopen or a retry.

It prints its figures (operations, kills, requests, events) and every broken promise, and
exits 1 if any was broken.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_MODEL = """\
import json, os, random, sys, time
sys.stdin.read()
role = os.environ["TEAMS_RUNTIME_ROLE"]
request_id = os.environ["TEAMS_RUNTIME_REQUEST_ID"]
time.sleep(random.uniform(0.3, 2.0))
if random.random() < FAILURE_RATE:
    sys.exit(1)
route = {"planner": "developer", "version_controller": "qa"}
answer = {"request_id": request_id, "role": role, "status": "completed",
          "summary": f"{role} did its part", "insights": [], "proposals": {}, "artifacts": [],
          "next_role": route.get(role, ""), "error": ""}
if role == "version_controller":
    answer |= {"commit_status": "no_changes", "commit_sha": "", "commit_message": "",
               "commit_paths": [], "change_detected": False}
print(json.dumps(answer))
"""

_ENDED = {"completed", "failed", "cancelled"}


def _cli(workspace: Path, *argv: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-P", "-m", "teams_runtime", *argv, "--workspace", str(workspace)]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for_port(port: int, seconds: float = 10.0) -> None:
    """Until something accepts connections on ``port`` (the NATS server started)."""
    until = time.monotonic() + seconds
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > until:
                raise SystemExit(f"nats-server did not start on port {port}") from None
            time.sleep(0.05)


def _workspace(root: Path, backend: str, nats_url: str | None, failure_rate: float) -> Path:
    workspace = root / "ws"
    init = ["init", str(workspace)]
    if backend == "nats":
        init += ["--backend", "nats", "--nats-url", str(nats_url)]
    subprocess.run([sys.executable, "-P", "-m", "teams_runtime", *init], check=True,
                   capture_output=True)  # fmt: skip
    model = root / "model.py"
    model.write_text(_MODEL.replace("FAILURE_RATE", repr(failure_rate)))
    text = (workspace / "team_runtime.yaml").read_text()
    start = text.index("model:\n")
    end = text.find("\n\n", start)
    block = (
        "model:\n  backend: command\n"
        f"  command: [{json.dumps(sys.executable)}, {json.dumps(str(model))}]\n"
        "  timeout_seconds: 20\n  attempts: 1\n"
        "roles:\n  developer:\n    model:\n      backend: human\n"
        "queue:\n  lease_seconds: 3\n"
    )
    tail = text[end:] if end != -1 else "\n"
    (workspace / "team_runtime.yaml").write_text(text[:start] + block + tail)
    return workspace


class Soak:
    """The operations of one soak and what they did."""

    def __init__(self, workspace: Path, workers: int, rng: random.Random) -> None:
        self.workspace = workspace
        self.rng = rng
        self.workers: list[subprocess.Popen[bytes]] = []
        self.want_workers = workers
        self.requests: list[str] = []
        self.done: Counter[str] = Counter()

    def start_worker(self) -> None:
        command = [sys.executable, "-P", "-m", "teams_runtime", "run", "--plain",
                   "--workspace", str(self.workspace)]  # fmt: skip
        self.workers.append(
            subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        )

    def kill_one(self) -> None:
        victim = self.workers.pop(self.rng.randrange(len(self.workers)))
        victim.send_signal(signal.SIGKILL)
        victim.wait()
        self.done["kill -9"] += 1
        self.start_worker()

    def status(self) -> dict[str, dict[str, object]]:
        shown = _cli(self.workspace, "status", "--json")
        if shown.returncode != 0:
            return {}
        return {r["request_id"]: r for r in json.loads(shown.stdout)["requests"]}

    def step(self) -> None:
        known = self.status()
        action = self.rng.choice(
            ["submit", "cancel", "cancel_reopen", "reopen", "retry", "answer", "answer", "kill"]
        )
        if action == "submit" or not self.requests:
            made = _cli(self.workspace, "submit", "--role", "planner", "--scope", "s", "--json")
            if made.returncode == 0:
                self.requests.append(json.loads(made.stdout)["request_id"])
                self.done["submit"] += 1
        elif action == "cancel":
            self._run("cancel", self.rng.choice(self.requests))
        elif action == "cancel_reopen":  # back at once: its calls in flight, its waiting answers
            request = self.rng.choice(self.requests)
            self._run("cancel", request)
            self._run("submit", "--request-id", request, "--reopen", "--role", "planner",
                      "--scope", "again")  # fmt: skip
        elif action == "reopen":
            ended = [r for r, v in known.items() if v.get("status") in _ENDED]
            if ended:
                request = self.rng.choice(ended)
                self._run("submit", "--request-id", request, "--reopen", "--role", "planner",
                          "--scope", "again")  # fmt: skip
        elif action == "retry":
            failed = [r for r, v in known.items() if v.get("status") == "failed"]
            if failed:
                self._run("retry", self.rng.choice(failed))
        elif action == "answer":
            self._answer_racing()
        elif action == "kill" and self.workers:
            self.kill_one()

    def _run(self, *argv: str) -> None:
        result = _cli(self.workspace, *argv)
        self.done[f"{argv[0]} (exit {result.returncode})"] += 1
        if "Traceback" in result.stderr:
            self.done["traceback"] += 1
            print(f"traceback from {argv}:\n{result.stderr[-2000:]}", file=sys.stderr)

    def _answer_racing(self) -> None:
        shown = _cli(self.workspace, "inbox", "--json")
        if shown.returncode != 0:
            return
        waiting = json.loads(shown.stdout).get("waiting", [])
        if not waiting:
            return
        item = self.rng.choice(waiting)
        ident = str(item.get("envelope_id") or item.get("request_id"))
        racers = self.rng.randint(1, 4)
        argv = ("answer", ident, "--status", "completed", "--summary", "ok",
                "--next-role", "version_controller")  # fmt: skip
        with ThreadPoolExecutor(racers) as pool:
            results = list(pool.map(lambda _: _cli(self.workspace, *argv), range(racers)))
        wins = sum(result.returncode == 0 for result in results)
        self.done[f"answer x{racers} ({wins} won)"] += 1
        if wins > 1:
            self.done["answer won twice"] += 1

    def stop(self) -> None:
        for worker in self.workers:
            worker.send_signal(signal.SIGTERM)
        for worker in self.workers:
            try:
                worker.wait(timeout=30)
            except subprocess.TimeoutExpired:
                worker.kill()
                worker.wait()
        self.workers.clear()


def _records(workspace: Path, requests: Sequence[str], root: Path) -> dict[str, dict[str, object]]:
    records = {}
    for request in dict.fromkeys(requests):
        target = root / "export" / f"{request}.json"
        target.parent.mkdir(exist_ok=True)
        if _cli(workspace, "export", request, "--out", str(target)).returncode == 0:
            records[request] = json.loads(target.read_text())
    return records


def _broken(records: dict[str, dict[str, object]], waiting: set[str]) -> list[str]:
    """The promises each record breaks. The team hands a request along one chain, so every
    report answers one hand-off still pending to its role (``delegated``, ``retried``); a
    report with none pending is work applied twice, or an older epoch's outcome."""
    broken = []
    for request, record in records.items():
        status = record.get("status")
        if status not in _ENDED | {"blocked"} and request not in waiting:
            broken.append(f"{request}: {status} with nothing queued, claimed or waiting")
        events = record.get("events")
        pending: Counter[str] = Counter()
        for number, event in enumerate(events if isinstance(events, list) else []):
            if not isinstance(event, dict):
                continue
            kind, payload = event.get("type"), event.get("payload")
            payload = payload if isinstance(payload, dict) else {}
            if kind in ("delegated", "version_control_requested"):
                pending[str(payload.get("to_role"))] += 1
            elif kind == "retried":
                pending[str(payload.get("role"))] += 1
            elif kind in ("role_report", "version_control_completed", "model_failed"):
                role = str(event.get("actor"))
                if pending[role] <= 0:
                    broken.append(f"{request}: event {number} ({kind} by {role}) answers no "
                                  "hand-off pending to it")  # fmt: skip
                else:
                    pending[role] -= 1
            if kind in ("cancelled", "hop_limit", "model_failed", "answer_timed_out"):
                pending.clear()
    return broken


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["file", "nats"], default="file")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--failure-rate", type=float, default=0.1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    root = Path(tempfile.mkdtemp(prefix="epoch-soak-"))
    server = None
    try:
        nats_url = None
        if args.backend == "nats":
            port = _free_port()
            binary = shutil.which("nats-server") or "nats-server"
            command = [binary, "-js", "-a", "127.0.0.1", "-p", str(port), "-sd", str(root / "nats")]
            server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            _wait_for_port(port)
            nats_url = f"nats://127.0.0.1:{port}"
        workspace = _workspace(root, args.backend, nats_url, args.failure_rate)
        soak = Soak(workspace, args.workers, rng)
        for _ in range(args.workers):
            soak.start_worker()
        started = time.monotonic()
        while time.monotonic() - started < args.seconds:
            soak.step()
        soak.stop()
        _cli(workspace, "run", "--once", "--plain", timeout=300)
        inbox = json.loads(_cli(workspace, "inbox", "--json").stdout or "{}")
        waiting = {str(item.get("request_id")) for item in inbox.get("waiting", [])}
        records = _records(workspace, soak.requests, root)
        broken = _broken(records, waiting)
        events = sum(len(r.get("events", [])) for r in records.values())  # type: ignore[arg-type]
        print(
            f"backend {args.backend}, {args.seconds:g} s, {args.workers} workers, seed {args.seed}"
        )
        print(f"{len(records)} requests, {events} events; operations:")
        for what, count in sorted(soak.done.items()):
            print(f"  {what}: {count}")
        print(f"broken promises: {len(broken)}")
        for line in broken:
            print(f"  {line}")
        return 1 if broken or soak.done["traceback"] or soak.done["answer won twice"] else 0
    finally:
        if server is not None:
            server.terminate()
            server.wait()
        if os.environ.get("EPOCH_SOAK_KEEP"):
            print(f"kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
