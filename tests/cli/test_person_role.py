"""A person as a role (``model.backend: human``), with real processes: ``run`` queues the
envelope into the inbox, ``inbox`` and ``answer`` (other processes, on NATS other hosts) list
and answer it, and the answer goes on as a model's result would. Each answer is recorded once:
a second one, two at once, one to a cancelled request are refused (exit 2)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from anyio.from_thread import start_blocking_portal

from teams_runtime.codecs.config import NatsSettings
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.demo import sample_record
from teams_runtime.storage import Workspace
from teams_runtime.storage.files.file_inbox import FileAnswerInbox
from teams_runtime.storage.nats.blocking_faces import blocking_queue, blocking_store
from teams_runtime.storage.nats.connection import open_connection

from ..support.waiting import eventually_sync

SEEDED = 3  # generated events each request starts with
REPORTS = ("role_report", "version_control_completed")
# What the fake model hands on (planner -> developer -> version_controller -> qa); qa is a
# person here, so the chain stops there for an answer.
BEFORE_QA = ["planner", "developer", "version_controller"]


def _cli(
    workspace: Workspace, *argv: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "teams_runtime", *argv, "--workspace", str(workspace.root)],
        capture_output=True, text=True, timeout=120, input=stdin,
    )  # fmt: skip


def _json(workspace: Workspace, *argv: str) -> Any:
    done = _cli(workspace, *argv, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


class Team:
    """A team whose qa is a person: ``worker`` is where ``run`` runs, ``person`` where the
    person types (the same folder on files; another host's folder on NATS)."""

    def __init__(self, worker: Workspace, person: Workspace, nats: NatsSettings | None) -> None:
        self.worker, self.person, self.nats = worker, person, nats

    def seed(self, request_id: str, role: str = "planner") -> None:
        envelope = MessageEnvelope(request_id=request_id, sender="user", target=role, scope="s")
        if self.nats is None:
            from teams_runtime.storage import FileWorkQueue
            from teams_runtime.storage.files.file_store import create_record

            create_record(self.worker.record_paths(request_id), sample_record(SEEDED, request_id))
            FileWorkQueue(self.worker).put(envelope)
            return
        with (
            start_blocking_portal() as portal,
            portal.wrap_async_context_manager(open_connection(self.nats)) as connection,
        ):
            blocking_store(connection).create(request_id, sample_record(SEEDED, request_id))
            blocking_queue(connection).put(envelope)

    def record(self, request_id: str) -> dict[str, Any]:
        if self.nats is None:
            data = self.worker.request_path(request_id).read_bytes()
        else:
            with (
                start_blocking_portal() as portal,
                portal.wrap_async_context_manager(open_connection(self.nats)) as connection,
            ):
                data = blocking_store(connection).load(request_id)
        record: dict[str, Any] = json.loads(data)
        return record

    def reports(self, request_id: str) -> list[str]:
        events = self.record(request_id)["events"][SEEDED:]
        return [event["actor"] for event in events if event.get("type") in REPORTS]

    def run_once(self) -> str:
        done = _cli(self.worker, "run", "--once", "--plain")
        assert done.returncode == 0, done.stderr
        return done.stdout


@pytest.fixture(params=["file", "nats"])
def person_team(
    request: pytest.FixtureRequest, team_workspace: Callable[..., Workspace], tmp_path: Path
) -> Callable[..., Team]:
    """Make a team whose ``role`` is a person (its ``model`` keys laid over ``backend:
    human``); the rest run the fake model CLI. On NATS the person's folder is another host's."""

    def make(role: str = "qa", **model: Any) -> Team:
        roles = {"roles": {role: {"model": {"backend": "human", **model}}}}
        if request.param == "file":
            workspace = team_workspace("valid", sections=roles)
            return Team(workspace, workspace, None)
        settings: NatsSettings = request.getfixturevalue("nats_server").settings()
        backend = {"kind": "nats", "nats": {"url": settings.url, "prefix": settings.prefix}}
        hosts = [
            team_workspace("valid", root=tmp_path / name, sections={**roles, "backend": backend})
            for name in ("worker-host", "person-host")
        ]
        return Team(hosts[0], hosts[1], settings)

    return make


def test_a_person_answers_what_a_worker_put_in_the_inbox(person_team: Callable[..., Team]) -> None:
    team = person_team()
    team.seed("req-1")
    out = team.run_once()
    assert "1 envelope put in the inbox for a person's answer" in out
    assert team.reports("req-1") == BEFORE_QA  # the models' work; qa asked nobody
    (waiting,) = _json(team.person, "inbox")["waiting"]
    assert (waiting["request_id"], waiting["role"], waiting["from_role"]) == (
        "req-1", "qa", "version_controller"
    )  # fmt: skip
    assert waiting["due_at"] is None and not waiting["overdue"]
    # No worker holds it: the claim was acked once the envelope was in the inbox.
    status = _json(team.person, "status")
    assert status["roles"]["qa"] == {"waiting": 0, "claimed": 0, "deferred": 0}
    assert [row["request_id"] for row in status["waiting_answers"]] == ["req-1"]
    one = _json(team.person, "status", "req-1")  # the request alone says it waits too
    assert [(row["role"], row["request_id"]) for row in one["waiting_answers"]] == [("qa", "req-1")]
    said = _cli(team.person, "status", "req-1").stdout
    assert "waiting for an answer from qa since " in said
    shown = _cli(team.person, "inbox", "show", "req-1")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("You are the qa role inside teams_runtime.")
    assert "Current request:" in shown.stdout and "Incoming envelope:" in shown.stdout
    answered = _cli(team.person, "answer", "req-1", "--status", "completed", "--summary", "Fine.")
    assert answered.returncode == 0, answered.stderr
    assert (
        "Recorded the qa answer to req-1 (completed); the request is completed." in answered.stdout
    )
    record = team.record("req-1")
    assert record["status"] == "completed" and record["result"]["summary"] == "Fine."
    assert team.reports("req-1") == [*BEFORE_QA, "qa"]
    again = _cli(team.person, "answer", "req-1", "--status", "completed", "--summary", "Twice.")
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.startswith("teams-runtime: error: no answer waits for request req-1")
    assert team.reports("req-1") == [*BEFORE_QA, "qa"]  # recorded once
    assert _json(team.person, "inbox")["waiting"] == []
    assert _json(team.person, "status")["waiting_answers"] == []


def test_an_answer_hands_the_request_on_like_a_models_result(
    person_team: Callable[..., Team],
) -> None:
    team = person_team()
    team.seed("req-1")
    team.run_once()
    answered = _json(team.person, "answer", "req-1", "--status", "blocked", "--summary",
                     "The totals are off.", "--next-role", "developer")  # fmt: skip
    assert answered["handed_to"] == "developer" and answered["request_status"] == "in_progress"
    team.run_once()  # developer and version_controller again, then qa waits again
    assert team.reports("req-1") == [*BEFORE_QA, "qa", "developer", "version_controller"]
    (waiting,) = _json(team.person, "inbox")["waiting"]
    assert waiting["from_role"] == "version_controller"
    hand_offs = [e["payload"] for e in team.record("req-1")["events"][SEEDED:]
                 if e.get("type") in ("delegated", "version_control_requested")]  # fmt: skip
    assert {"from_role": "qa", "to_role": "developer"} in hand_offs
    # Named by its envelope id this time (the id `inbox --json` gives).
    assert _json(team.person, "answer", waiting["envelope_id"], "--status", "completed",
                 "--summary", "Now right.")["request_status"] == "completed"  # fmt: skip
    assert team.record("req-1")["hops"] == len(hand_offs) == 6


def test_two_answers_at_once_record_one(person_team: Callable[..., Team]) -> None:
    team = person_team()
    ids = ["req-1", "req-2"]
    for request_id in ids:
        team.seed(request_id)
    team.run_once()
    command = [sys.executable, "-P", "-m", "teams_runtime", "answer"]
    racers = [
        subprocess.Popen(
            [
                *command,
                request_id,
                "--status",
                "completed",
                "--summary",
                f"answer {n}",
                "--workspace",
                str(team.person.root),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for request_id in ids
        for n in (1, 2)
    ]
    outcomes = [(racer.wait(timeout=120), *racer.communicate()) for racer in racers]
    for request_id, pair in zip(ids, (outcomes[0:2], outcomes[2:4]), strict=True):
        assert sorted(status for status, _, _ in pair) == [0, 2], pair
        (refused,) = [err for status, _, err in pair if status == 2]
        assert refused.startswith("teams-runtime: error: ") and "Traceback" not in refused
        assert team.reports(request_id) == [*BEFORE_QA, "qa"], request_id
        (won,) = [out for status, out, _ in pair if status == 0]
        assert won.startswith(f"Recorded the qa answer to {request_id} (completed)")
        assert team.record(request_id)["result"]["summary"] in ("answer 1", "answer 2")
    assert _json(team.person, "inbox")["waiting"] == []


def test_racing_answers_queue_the_follow_up_once(person_team: Callable[..., Team]) -> None:
    # Each answer that loses the race queues again the follow-up the winner recorded, should a
    # crash have kept it from the queue: the queue keeps one envelope per id.
    team = person_team()
    team.seed("req-1")
    team.run_once()
    racers = [
        subprocess.Popen(
            [
                sys.executable,
                "-P",
                "-m",
                "teams_runtime",
                "answer",
                "req-1",
                "--status",
                "blocked",
                "--summary",
                f"answer {n}",
                "--next-role",
                "developer",
                "--workspace",
                str(team.person.root),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(6)
    ]
    outcomes = [(racer.wait(timeout=120), *racer.communicate()) for racer in racers]
    assert sorted(status for status, _, _ in outcomes) == [0, 2, 2, 2, 2, 2], outcomes
    assert _json(team.person, "status")["roles"]["developer"]["waiting"] == 1
    assert team.reports("req-1") == [*BEFORE_QA, "qa"]


def test_answers_that_find_the_winners_item_still_waiting_queue_no_copy(
    team_workspace: Callable[..., Workspace],
) -> None:
    # What a loser of the race above sees in the moment between the winner's record and its
    # removal of the inbox item: the item, and the outcome recorded. Each such loser queues
    # the recorded follow-up again (a crash may have kept it from the queue); before the queue
    # kept one envelope per id, each of those puts was another copy.
    workspace = team_workspace("valid", sections={"roles": {"qa": {"model": {"backend": "human"}}}})
    team = Team(workspace, workspace, None)
    team.seed("req-1")
    team.run_once()
    (item,) = (path for path in workspace.inbox_dir.rglob("*") if path.is_file())
    kept = item.read_bytes()
    answer = ("answer", "req-1", "--status", "blocked", "--summary", "No.", "--next-role",
              "developer")  # fmt: skip
    assert _cli(workspace, *answer).returncode == 0
    for _ in range(3):
        item.write_bytes(kept)  # still there, as the winner has not removed it yet
        assert _cli(workspace, *answer).returncode == 2
    assert _json(workspace, "status")["roles"]["developer"]["waiting"] == 1
    assert team.reports("req-1") == [*BEFORE_QA, "qa"]


def test_an_answer_to_a_request_cancelled_meanwhile_is_refused(
    person_team: Callable[..., Team],
) -> None:
    team = person_team()
    team.seed("req-1")
    team.run_once()
    assert _cli(team.person, "cancel", "req-1").returncode == 0
    before = team.record("req-1")
    refused = _cli(team.person, "answer", "req-1", "--status", "completed", "--summary", "Ok.")
    assert refused.returncode == 2
    assert refused.stderr == (
        "teams-runtime: error: request req-1 was cancelled meanwhile; the answer was not "
        "recorded.\n"
    )
    assert team.record("req-1") == before  # nothing written
    again = _cli(team.person, "answer", "req-1", "--status", "completed", "--summary", "Ok.")
    assert (
        again.stderr
        == "teams-runtime: error: request req-1 is cancelled: no answer waits for it.\n"
    )
    assert _json(team.person, "inbox")["waiting"] == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        pytest.param(
            ["--status", "completed", "--summary", "Ok.", "--next-role", "auditor"],
            "the answer breaks the qa role's contract, so it was not recorded: `next_role` must "
            "be empty or one of: orchestrator, research, planner, designer, architect, "
            "developer, qa, version_controller. (`teams-runtime inbox show` prints the "
            "contract; give a whole result with --from FILE).",
            id="next-role-not-in-team",
        ),
        pytest.param(
            ["--status", "completed"],
            "answer needs --status and --summary (or a whole result with --from FILE), e.g. "
            '--status completed --summary "Looks right".',
            id="no-summary",
        ),
        pytest.param(
            ["--from", "-"],
            "the answer breaks the qa role's contract, so it was not recorded: `status` must "
            "be one of: completed, blocked, failed. `summary` is missing or empty. "
            "(`teams-runtime inbox show` prints the contract).",
            id="from-breaks-the-contract",
        ),
        pytest.param(
            ["--from", "no-such-result.json"],
            "no-such-result.json: cannot be read (No such file or directory).",
            id="from-missing",
        ),
    ],
)
def test_a_bad_answer_is_refused_and_changes_nothing(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    argv: list[str],
    message: str,
) -> None:
    workspace = team_workspace("valid", sections={"roles": {"qa": {"model": {"backend": "human"}}}})
    seed(workspace, "req-1", "qa", events=SEEDED)
    assert _cli(workspace, "run", "--once", "--plain").returncode == 0
    before = workspace.request_path("req-1").read_bytes()
    done = _cli(workspace, "answer", "req-1", *argv, stdin='{"status": "done-ish"}')
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == f"teams-runtime: error: {message}\n"
    assert workspace.request_path("req-1").read_bytes() == before
    assert [row["request_id"] for row in _json(workspace, "inbox")["waiting"]] == ["req-1"]


def test_a_whole_result_from_a_file_is_recorded_as_given(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]],
    tmp_path: Path,
) -> None:
    roles = {"roles": {"version_controller": {"model": {"backend": "human"}}}}
    workspace = team_workspace("valid", sections=roles)
    seed(workspace, "req-1", "version_controller", events=SEEDED)
    assert _cli(workspace, "run", "--once", "--plain").returncode == 0
    flags = _cli(workspace, "answer", "req-1", "--status", "completed", "--summary", "Done.")
    assert flags.returncode == 2 and "`commit_status` must be one of" in flags.stderr
    result = {"status": "completed", "summary": "Committed by hand.",
              "commit_status": "committed", "commit_sha": "abc123",
              "insights": ["the tests pass"], "next_role": "qa"}  # fmt: skip
    (tmp_path / "result.json").write_text(json.dumps(result))
    done = _json(workspace, "answer", "req-1", "--from", str(tmp_path / "result.json"),
                 "--next-role", "")  # fmt: skip
    assert (done["handed_to"], done["request_status"]) == ("", "completed")  # the flag won
    record = read_record(workspace, "req-1")
    (report,) = [e for e in record["events"] if e.get("type") == "version_control_completed"]
    assert report["payload"]["commit_sha"] == "abc123"
    assert report["payload"]["insights"] == ["the tests pass"]
    assert report["payload"]["next_role"] == ""


def test_a_serving_worker_fails_a_request_whose_answer_did_not_come_in_time(
    person_team: Callable[..., Team],
) -> None:
    team = person_team(answer_within="1s")
    team.seed("req-1", role="qa")
    worker = subprocess.Popen(
        [sys.executable, "-P", "-m", "teams_runtime", "run", "--plain", "--workspace",
         str(team.worker.root)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        eventually_sync(lambda: team.record("req-1")["status"] == "failed", "the timeout", 60)
    finally:
        worker.send_signal(signal.SIGTERM)
        out, err = worker.communicate(timeout=60)
    assert worker.returncode == 0, err
    assert "qa: no answer for request req-1 within 1 s; the request failed" in err
    # The run's summary says the envelope it put in the inbox did not stay there.
    assert "1 envelope put in the inbox" in out
    assert "1 waiting answer ran out of time (answer_within): on_failure failed" in out
    (timed_out,) = [
        e for e in team.record("req-1")["events"] if e.get("type") == "answer_timed_out"
    ]
    assert timed_out["payload"] == {"from_role": "qa", "answer_within_seconds": 1.0}
    assert _json(team.person, "inbox")["waiting"] == []
    late = _cli(team.person, "answer", "req-1", "--status", "completed", "--summary", "Late.")
    assert late.returncode == 2
    assert "request req-1 failed: no answer came within its answer_within" in late.stderr
    # The envelope that waited is kept: `retry` queues the same work for the person again.
    retried = _json(team.person, "retry", "req-1")
    assert (retried["request_id"], retried["role"]) == ("req-1", "qa")
    assert team.record("req-1")["status"] == "in_progress"
    assert _json(team.person, "status")["roles"]["qa"]["waiting"] == 1


def test_reading_the_inbox_applies_on_failure_to_what_is_overdue(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]],
) -> None:
    person = {"backend": "human", "answer_within": 1, "on_failure": "requeue"}
    workspace = team_workspace("valid", sections={"roles": {"qa": {"model": person}}})
    seed(workspace, "req-1", "qa", events=SEEDED)
    assert _cli(workspace, "run", "--once", "--plain").returncode == 0

    ran_out: list[dict[str, Any]] = []  # what each read says it applied

    def renewed() -> bool:
        looked = _json(workspace, "inbox")
        ran_out.extend(looked["ran_out"])
        (row,) = looked["waiting"]
        assert datetime.fromisoformat(row["due_at"])  # when its answer_within runs out
        return bool(row["renewals"] >= 1 and not row["overdue"])

    before = workspace.request_path("req-1").read_bytes()
    eventually_sync(renewed, "the answer's renewal", 30)  # requeue: it waits again, nothing failed
    assert workspace.request_path("req-1").read_bytes() == before
    assert [row["outcome"] for row in ran_out] == ["waits_again"]
    assert ran_out[0]["request_id"] == "req-1" and ran_out[0]["role"] == "qa"
    # on_failure is read when the time runs out: the config in force then decides.
    config = workspace.config_path
    config.write_text(config.read_text().replace("requeue", "fail"))
    notes: list[str] = []

    def timed_out() -> bool:
        read = _cli(workspace, "inbox")
        assert read.returncode == 0, read.stderr
        notes.append(read.stderr)
        return read.stdout.startswith("no answers waiting")

    eventually_sync(timed_out, "the timeout", 30)
    said = "note: no answer to req-1 (qa) within its answer_within: the request failed"
    assert sum(said in note for note in notes) == 1, notes
    record = read_record(workspace, "req-1")
    assert record["status"] == "failed"
    assert [e["type"] for e in record["events"]].count("answer_timed_out") == 1


def test_answers_go_only_to_a_persons_role_and_wait_for_one_that_left(
    team_workspace: Callable[..., Workspace],
) -> None:
    team = {"team": {"roles": ["writer", "approver"]},
            "roles": {"writer": {"hands_to": ["approver"]},
                      "approver": {"model": {"backend": "human"}, "hands_to": [""]}}}  # fmt: skip
    workspace = team_workspace("valid", sections=team)
    submitted = _cli(workspace, "submit", "--role", "approver", "--scope", "s", "--request-id",
                     "req-1")  # fmt: skip
    assert submitted.returncode == 0, submitted.stderr
    assert _cli(workspace, "run", "--once", "--plain").returncode == 0
    for argv in (["answer", "req-1", "--status", "completed", "--summary", "Ok."],
                 ["inbox", "show", "req-1"]):  # fmt: skip
        done = _cli(workspace, *argv, "--role", "writer")
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr == (
            "teams-runtime: error: --role: writer is not a person's role (its model.backend is "
            "command): only roles whose model.backend is human wait for answers; they are: "
            "approver.\n"
        )
    # The approver leaves the team while its answer waits: kept (it may come back), and
    # `inbox` says what to do with it; an answer to it is refused.
    config = workspace.config_path
    before = config.read_text()
    config.write_text(yaml.safe_dump({**yaml.safe_load(before), "team": {"roles": ["writer"]},
                                      "roles": {"writer": {"hands_to": [""]}}}))  # fmt: skip
    listed = _cli(workspace, "inbox")
    assert listed.returncode == 0 and "req-1" in listed.stdout
    assert listed.stderr == (
        "teams-runtime: note: req-1 waits for the approver role, which the team no longer "
        "has: put approver back in team.roles to answer it, or `teams-runtime cancel req-1`.\n"
    )
    late = _cli(workspace, "answer", "req-1", "--status", "completed", "--summary", "Ok.")
    assert late.returncode == 2 and "which the team no longer has" in late.stderr
    config.write_text(before)
    done = _cli(workspace, "answer", "req-1", "--status", "completed", "--summary", "Ok.")
    assert done.returncode == 0, done.stderr


def test_an_answer_after_its_deadline_is_refused_even_if_nobody_looked(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]],
) -> None:
    person = {"backend": "human", "answer_within": 1}
    workspace = team_workspace("valid", sections={"roles": {"qa": {"model": person}}})
    seed(workspace, "req-1", "qa", events=SEEDED)
    assert _cli(workspace, "run", "--once", "--plain").returncode == 0
    # Its deadline, from the inbox's file: `inbox` reads the inbox, and on a busy machine it may
    # start after the deadline and apply it itself.
    (waiting,) = FileAnswerInbox(workspace).items()
    assert waiting.due is not None
    # The scenario is the deadline passing while no one reads the inbox: the time is the point.
    time.sleep(max(waiting.due + 0.2 - time.time(), 0))
    late = _cli(workspace, "answer", "req-1", "--status", "completed", "--summary", "Late.")
    assert (late.returncode, late.stdout) == (2, "")
    assert late.stderr == (
        "teams-runtime: error: request req-1 failed: no answer came within its answer_within, "
        "so this one was not recorded (`teams-runtime retry req-1` puts it in the inbox "
        "again).\n"
    )
    record = read_record(workspace, "req-1")
    assert record["status"] == "failed"
    assert [e["type"] for e in record["events"]].count("answer_timed_out") == 1
    again = _cli(workspace, "answer", "req-1", "--status", "completed", "--summary", "Late.")
    assert again.returncode == 2 and "no answer came within its answer_within" in again.stderr


def test_an_answer_is_recorded_only_on_the_question_its_person_saw(
    person_team: Callable[..., Team],
) -> None:
    """Given the envelope its person saw (the console's form carries it), an answer is
    refused when another envelope waits under the request now (the one seen was answered and
    the request came back), on both storages; nothing is written."""
    from functools import partial

    import anyio

    from teams_runtime.actors.roles import answer
    from teams_runtime.exceptions import AnswerRefused
    from teams_runtime.storage import load_team_config

    team = person_team()
    team.seed("req-1", role="qa")
    team.run_once()
    (waiting,) = _json(team.person, "inbox")["waiting"]
    before = team.record("req-1")
    config = load_team_config(team.person.root)
    given = {"status": "completed", "summary": "Looks right.", "next_role": ""}

    def answered(envelope_id: str) -> Any:
        call = partial(answer, team.person, config, "req-1", given, envelope_id=envelope_id)
        return anyio.run(call)

    with pytest.raises(AnswerRefused) as refused:
        answered("env-seen-before")
    assert str(refused.value) == (
        "request req-1: the question you saw was answered; a new one waits: reload (envelope "
        f"{waiting['envelope_id']} waits, not env-seen-before). Nothing was recorded."
    )
    assert team.record("req-1") == before
    done = answered(waiting["envelope_id"])
    assert (done.envelope_id, done.request_status) == (waiting["envelope_id"], "completed")


def test_the_timeout_says_the_answer_within_the_envelope_waited_under(
    team_workspace: Callable[..., Workspace],
    seed: Callable[..., None],
    read_record: Callable[[Workspace, str], dict[str, Any]],
) -> None:
    """An envelope put in the inbox with ``answer_within: 1s`` times out after a second,
    and says so (the event, the log, ``status``), though the config says 8h by then."""
    person = {"backend": "human", "answer_within": 1}
    workspace = team_workspace("valid", sections={"roles": {"qa": {"model": person}}})
    seed(workspace, "req-1", "qa", events=SEEDED)
    assert _cli(workspace, "run", "--once", "--plain").returncode == 0
    config = yaml.safe_load(workspace.config_path.read_text())
    config["roles"]["qa"]["model"]["answer_within"] = "8h"
    workspace.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    (waiting,) = FileAnswerInbox(workspace).items()
    assert waiting.due is not None
    time.sleep(max(waiting.due + 0.2 - time.time(), 0))
    looked = _cli(workspace, "inbox")
    assert looked.returncode == 0, looked.stderr
    (timed_out,) = [
        e for e in read_record(workspace, "req-1")["events"] if e.get("type") == "answer_timed_out"
    ]
    assert timed_out["payload"] == {"from_role": "qa", "answer_within_seconds": 1.0}
    (row,) = _json(workspace, "status")["requests"]
    assert row["failure"]["reason"] == "qa gave no answer within 1 s"
