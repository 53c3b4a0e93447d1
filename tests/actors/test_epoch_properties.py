"""A property of a request's epochs, on both backends: random interleavings of submit, reopen,
cancel, retry, a person's answers (racing), a worker's run, claim and crash. Crashes are
simulated in the test's process (a worker that dies holding its claims, which come back; a
retry killed between its write and its queue put; an answer killed between its record and its
inbox removal), so a few hundred operations fit in the suite's time; `just soak` runs the same
promises with real processes and kill -9 (docs/operations.md).

After every operation, no envelope is queued twice (one per role and id); at the end, with the
queue drained: no request is left in progress with nothing queued, claimed or waiting for a
person, and no report answers a hand-off that is not pending (work applied twice, or an older
epoch's outcome moving a request), checked by the soak's own judge.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import nats.js.errors
import pytest

from teams_runtime.actors.context import open_context
from teams_runtime.actors.intake._retry import retry_with
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.storage import Workspace
from teams_runtime.storage.opening import open_storage, workspace_config

from ..support.cli_in_process import init_nats_workspace, run_cli

_SOAK = Path(__file__).parents[1] / "soak" / "epoch_soak.py"
_spec = importlib.util.spec_from_file_location("epoch_soak", _SOAK)
assert _spec is not None and _spec.loader is not None
_soak = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_soak)
broken_promises: Callable[[dict[str, dict[str, object]], set[str]], list[str]] = _soak._broken

PERSON = "roles:\n  developer:\n    model: {backend: human}\n"
_ENDED = ("completed", "failed", "cancelled")


class _Stopped(BaseException):
    """A process dying at that point."""


class Interleavings:
    """One workspace and the random operations done on it."""

    def __init__(self, root: Path, capsys: pytest.CaptureFixture[str], seed: int) -> None:
        self.root, self.capsys = root, capsys
        self.ws = ("--workspace", str(root))
        self.rng = random.Random(seed)
        self.requests: list[str] = []
        self.done: Counter[str] = Counter()
        self.nats = "kind: nats" in (root / "team_runtime.yaml").read_text()

    def cli(self, *argv: str) -> tuple[int, str, str]:
        status, out, err = run_cli(self.capsys, *argv, *self.ws)
        assert "Traceback" not in err, (argv, err)
        self.done[f"{argv[0]} {status}"] += 1
        return status, out, err

    def json(self, *argv: str) -> Any:
        status, out, err = self.cli(*argv, "--json")
        assert status == 0, err
        return json.loads(out)

    def statuses(self) -> dict[str, str]:
        return {r["request_id"]: r["status"] for r in self.json("status")["requests"]}

    def step(self) -> None:
        action = self.rng.choice(
            ["submit", "cancel", "reopen", "cancel_reopen", "retry", "retry_stopped",
             "answer", "answer_stopped", "run", "run", "crash"]
        )  # fmt: skip
        known = self.statuses()
        request = self.rng.choice(self.requests) if self.requests else None
        if action == "submit" or request is None:
            request = f"req-{len(self.requests)}"
            self.cli("submit", "--role", "planner", "--scope", "s", "--request-id", request)
            self.requests.append(request)
        elif action == "cancel":
            self.cli("cancel", request)
        elif action in ("reopen", "cancel_reopen"):
            if action == "cancel_reopen":
                self.cli("cancel", request)
            if self.statuses().get(request) in _ENDED:
                self.cli("submit", "--request-id", request, "--reopen", "--role", "planner",
                         "--scope", "again")  # fmt: skip
        elif action == "retry" and known.get(request) in ("failed", "in_progress"):
            self.cli("retry", request)
        elif action == "retry_stopped" and known.get(request) == "failed":
            anyio.run(self._stopped_retry, request)
        elif action in ("answer", "answer_stopped"):
            self._answer(racers=self.rng.randint(1, 3), stopped=action == "answer_stopped")
        elif action == "run":
            assert self.cli("run", "--once", "--plain")[0] == 0
        elif action == "crash":
            anyio.run(self._worker_dies)
        self.check_queue()

    async def _stopped_retry(self, request: str) -> None:
        workspace = Workspace(self.root)
        config = workspace_config(workspace)
        async with (
            open_storage(workspace, config) as storage,
            open_context(self.root, store=storage.store) as context,
        ):

            class Dies:
                async def put(self, envelope: MessageEnvelope) -> str:
                    raise _Stopped

            try:
                await retry_with(context, Dies(), request, max_hops=40, roles=config.cast.names)  # type: ignore[arg-type]
                pytest.fail("the retry went past its put")
            except _Stopped:
                self.done["retry stopped before its put"] += 1
            except Exception:  # refused: not failed after all
                pass

    async def _worker_dies(self) -> None:
        """A worker claims envelopes and dies: its claims come back for any worker (what a
        lease running out does; here at once)."""
        async with open_storage(Workspace(self.root)) as storage:
            role = self.rng.choice(["planner", "designer", "architect", "qa", "developer"])
            claims = await storage.queue.claim(role, 2)
            await storage.queue.retire()
            self.done[f"worker died holding {len(claims)}"] += 1

    def _answer(self, *, racers: int, stopped: bool) -> None:
        waiting = self.json("inbox")["waiting"]
        if not waiting:
            return
        item = self.rng.choice(waiting)
        argv = ("answer", item["envelope_id"], "--status", "completed", "--summary", "ok",
                "--next-role", "qa")  # fmt: skip
        if stopped:  # recorded, then killed before the inbox removal: the item stays
            inbox_file = self._inbox_copy(item["envelope_id"])
            self.cli(*argv)
            if inbox_file is not None:
                inbox_file[0].write_bytes(inbox_file[1])
            return
        for _ in range(racers):  # one after another: the losers find it answered
            self.cli(*argv)

    def _inbox_copy(self, envelope_id: str) -> tuple[Path, bytes] | None:
        for path in Workspace(self.root).inbox_dir.rglob("*.json"):
            data = path.read_bytes()
            if envelope_id.encode() in data:
                return path, data
        return None  # NATS: its inbox is a bucket; the answer is not stopped there

    def check_queue(self) -> None:
        """No role and envelope id queued twice (waiting, claimed or deferred)."""
        ids = Counter(self.queued_ids())
        assert [key for key, count in ids.items() if count > 1] == []

    def queued_ids(self) -> list[tuple[str, str]]:
        if self.nats:
            return anyio.run(self._nats_ids)
        queue_dir = Workspace(self.root).queue_dir
        found = []
        for path in queue_dir.rglob("*.json"):
            if "rejected" in path.parts:
                continue
            envelope = json.loads(path.read_bytes())
            found.append((envelope["target"], envelope["envelope_id"]))
        return found

    async def _nats_ids(self) -> list[tuple[str, str]]:
        async with open_storage(Workspace(self.root)) as storage:
            connection = storage.queue.connection  # type: ignore[attr-defined]
            found, seq = [], 1
            while True:
                try:
                    answer = await connection.api(
                        f"STREAM.MSG.GET.{connection.names.queue}",
                        {"seq": seq, "next_by_subj": ">"},
                    )
                except nats.js.errors.APIError:
                    return found  # no message at or after seq
                message = answer["message"]
                envelope = json.loads(base64.b64decode(message["data"]))
                found.append((envelope["target"], envelope["envelope_id"]))
                seq = int(message["seq"]) + 1


@pytest.fixture(params=["file", "nats"])
def person_workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    if request.param == "nats":
        init_nats_workspace(root, request.getfixturevalue("nats_server").settings())
    else:
        assert run_cli(request.getfixturevalue("capsys"), "init", str(root))[0] == 0
    config = root / "team_runtime.yaml"
    config.write_text(config.read_text() + PERSON)
    return root


@pytest.mark.parametrize("seed", [20261206, 7])
def test_random_interleavings_keep_the_epoch_promises(
    person_workspace: Path, capsys: pytest.CaptureFixture[str], seed: int
) -> None:
    run = Interleavings(person_workspace, capsys, seed=seed)
    for _ in range(150):
        run.step()
    # Drain: answer what waits, run until nothing is left to do.
    for _ in range(6):
        run._answer(racers=1, stopped=False)
        assert run.cli("run", "--once", "--plain")[0] == 0
    records = {}
    for request in run.requests:
        status, out, err = run.cli("export", request)
        assert status == 0, err
        records[request] = json.loads(out)
    waiting = {item["request_id"] for item in run.json("inbox")["waiting"]}
    assert broken_promises(records, waiting) == [], run.done
    assert run.done["retry stopped before its put"] + run.done["run 0"] > 0, run.done
