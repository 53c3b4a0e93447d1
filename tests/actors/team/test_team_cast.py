"""A team of one's own, end to end on both backends: a workspace whose config declares
``writer``, ``reviewer`` and ``editor`` runs a request through them with a real model command
(``fake_model.py`` in script mode), every part of the runtime knowing only those roles, and a
hand-off outside a role's ``hands_to`` is repaired or failed as the contract says."""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import nats
import pytest
import yaml

from teams_runtime.cli import main
from teams_runtime.codecs.config import NatsSettings

from ...support.cli_in_process import init_nats_workspace, run_cli

ROLES = ("writer", "reviewer", "editor")
TEAM: dict[str, Any] = {
    "writer": {"rules": ["Write the draft the scope asks for.", "Keep it under a page."],
               "hands_to": ["reviewer"]},
    "reviewer": {"hands_to": ["writer", "editor", ""], "concurrency": 2},
    "editor": {"hands_to": [""]},
}  # fmt: skip


class Workspace:
    """A workspace of the team on one backend, driven through the CLI in this process."""

    def __init__(self, root: Path, settings: NatsSettings | None) -> None:
        self.root = root
        self.settings = settings
        self.state = root / "model-state"

    def configure(
        self, script: dict[str, list[str]], fake_model: Path, team: dict[str, Any]
    ) -> None:
        """The ``team`` (role -> its settings), its model the fake one answering by ``script``
        (role -> next roles)."""
        config = yaml.safe_load((self.root / "team_runtime.yaml").read_text())
        (self.root / "script.json").write_text(json.dumps(script))
        config["team"] = {"roles": list(team)}
        config["roles"] = team
        config["model"] = {
            "backend": "command",
            "command": [sys.executable, str(fake_model), f"script:{self.root / 'script.json'}",
                        str(self.state)],
            "timeout_seconds": 20,
        }  # fmt: skip
        text = yaml.safe_dump(config, sort_keys=False, allow_unicode=True)
        (self.root / "team_runtime.yaml").write_text(text, encoding="utf-8")

    def cli(self, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        return run_cli(capsys, *argv, "--workspace", str(self.root))

    def record(self, capsys: pytest.CaptureFixture[str], request_id: str) -> dict[str, Any]:
        status, out, err = self.cli(capsys, "export", request_id)
        assert status == 0, err
        record: dict[str, Any] = json.loads(out)
        return record

    def calls(self) -> list[tuple[str, str]]:
        lines = (self.state / "calls.log").read_text().splitlines()
        return [(json.loads(line)["role"], json.loads(line)["purpose"]) for line in lines]

    def prompt(self, role: str, call: int, request_id: str = "req-1") -> str:
        return (self.state / f"prompt-{request_id}-{role}-{call}.txt").read_text()


@pytest.fixture(params=["file", "nats"])
def workspace(
    request: pytest.FixtureRequest, tmp_path: Path, fake_model: Path
) -> Iterator[Callable[..., Workspace]]:
    def make(script: dict[str, list[str]], team: dict[str, Any] | None = None) -> Workspace:
        root = tmp_path / "ws"
        settings = None
        if request.param == "nats":
            settings = request.getfixturevalue("nats_server").settings()
            init_nats_workspace(root, settings)
        else:
            assert main(["init", str(root)]) == 0
        made = Workspace(root, settings)
        made.configure(script, fake_model, TEAM if team is None else team)
        return made

    yield make


def _reports(record: dict[str, Any]) -> list[str]:
    return [event["actor"] for event in record["events"] if event.get("type") == "role_report"]


def _consumers(settings: NatsSettings) -> set[str]:
    """The names of the team's consumers on its queue stream."""

    async def names() -> set[str]:
        client = await nats.connect(settings.url)
        try:
            infos = await client.jetstream().consumers_info(f"{settings.prefix}_queue")
            return {info.name for info in infos}
        finally:
            await client.close()

    return anyio.run(names)


def test_a_request_goes_through_the_team_the_config_declares(
    workspace: Callable[..., Workspace], capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace({"writer": ["reviewer"], "reviewer": ["editor"], "editor": [""]})
    capsys.readouterr()
    status, out, err = ws.cli(capsys, "submit", "--role", "writer", "--scope",
                              "Write the launch note", "--request-id", "req-1")  # fmt: skip
    assert status == 0, err
    status, out, err = ws.cli(capsys, "run", "--once")
    assert status == 0, err
    assert "Finished 3 envelopes: 3 done, 0 failed" in out
    record = ws.record(capsys, "req-1")
    assert _reports(record) == ["writer", "reviewer", "editor"]  # each role's report, once
    hand_offs = [(e["payload"]["from_role"], e["payload"]["to_role"])
                 for e in record["events"] if e["type"] == "delegated"]  # fmt: skip
    # A team without an orchestrator: its first events credit the user who submitted.
    assert hand_offs == [("user", "writer"), ("writer", "reviewer"),
                         ("reviewer", "editor")]  # fmt: skip
    assert [e["actor"] for e in record["events"][:2]] == ["user", "user"]
    assert record["owner_role"] == "user"
    assert (record["status"], record["hops"], record["current_role"]) == ("completed", 2, "editor")
    assert ws.calls() == [(role, "role_task") for role in ROLES]
    writer = ws.prompt("writer", 1)
    assert "Role rules (writer):\n- Write the draft the scope asks for.\n" in writer
    assert "- Set `next_role` to the role that should act next: one of reviewer.\n" in writer
    # Every part of the runtime knows the team's roles, and only those.
    status, out, _ = ws.cli(capsys, "status", "--json")
    assert list(json.loads(out)["roles"]) == list(ROLES)
    logs = ws.root / ".teams_runtime" / "logs"
    assert {path.name for path in logs.glob("*.log")} == {f"{role}.log" for role in ROLES}
    if ws.settings is None:
        queue = ws.root / ".teams_runtime" / "queue"
        assert {path.name for path in queue.iterdir()} <= {*ROLES, "claimed", "workers"}
    else:
        prefix = ws.settings.prefix
        assert _consumers(ws.settings) == {
            *(f"{prefix}_q_{role}" for role in ROLES),
            f"{prefix}_deferred",
        }


def test_a_hand_off_outside_hands_to_gets_a_repair_naming_the_allowed_roles(
    workspace: Callable[..., Workspace], capsys: pytest.CaptureFixture[str]
) -> None:
    # The writer names the editor (it may hand only to the reviewer), the reviewer names qa
    # (no role of this team); each is repaired, and the request goes on as the rules say.
    ws = workspace({"writer": ["editor", "reviewer"], "reviewer": ["qa", "editor"],
                    "editor": [""]})  # fmt: skip
    capsys.readouterr()
    assert ws.cli(capsys, "submit", "--role", "writer", "--scope", "Write it",
                  "--request-id", "req-1")[0] == 0  # fmt: skip
    status, out, err = ws.cli(capsys, "run", "--once")
    assert status == 0, err
    assert "Finished 3 envelopes: 3 done, 0 failed" in out
    assert ws.calls() == [
        ("writer", "role_task"),
        ("writer", "contract_repair"),
        ("reviewer", "role_task"),
        ("reviewer", "contract_repair"),
        ("editor", "role_task"),
    ]
    assert (
        "Validation errors:\n- `next_role` must be one of: reviewer (writer may hand the "
        "request only to these, and may not finish it).\n" in ws.prompt("writer", 2)
    )
    assert (
        "Validation errors:\n- `next_role` must be empty or one of: writer, editor (reviewer "
        "may hand only to these).\n" in ws.prompt("reviewer", 2)
    )
    record = ws.record(capsys, "req-1")
    assert _reports(record) == list(ROLES)  # the rejected replies are not reports
    assert record["status"] == "completed"
    attempts = ws.root / ".teams_runtime" / "attempts" / "req-1"
    assert len(list(attempts.glob("*.json"))) == 2  # each rejected answer, kept for a person


def test_a_role_that_keeps_breaking_the_rules_fails_the_request(
    workspace: Callable[..., Workspace], capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace({"writer": ["editor"], "reviewer": [""], "editor": [""]})
    capsys.readouterr()
    assert ws.cli(capsys, "submit", "--role", "writer", "--scope", "Write it",
                  "--request-id", "req-1")[0] == 0  # fmt: skip
    status, out, err = ws.cli(capsys, "run", "--once")
    assert status == 0, err
    assert "Finished 1 envelope: 0 done, 1 failed" in out
    assert ws.calls() == [("writer", "role_task")] + [("writer", "contract_repair")] * 2
    record = ws.record(capsys, "req-1")
    assert (record["status"], record["next_role"]) == ("failed", "")
    assert record["result"]["contract_issues"] == [
        "`next_role` must be one of: reviewer (writer may hand the request only to these, "
        "and may not finish it)."
    ]
    status, out, _ = ws.cli(capsys, "status", "--json")
    assert all(sum(counts.values()) == 0 for counts in json.loads(out)["roles"].values())


def test_the_role_flags_take_the_team_from_the_config(
    workspace: Callable[..., Workspace], capsys: pytest.CaptureFixture[str]
) -> None:
    ws = workspace({"writer": ["reviewer"], "reviewer": [""], "editor": [""]})
    capsys.readouterr()
    status, out, err = ws.cli(capsys, "submit", "--role", "planner", "--scope", "x")
    assert (status, out) == (2, "")
    assert "--role: unknown role 'planner'; choose one of: writer, reviewer, editor" in err
    status, _, err = ws.cli(capsys, "run", "--once", "--roles", "writer,qa")
    assert status == 2 and "--roles: qa is not of the team; its roles are: writer, " in err
    assert ws.cli(capsys, "submit", "--role", "writer", "--scope", "x",
                  "--request-id", "req-1")[0] == 0  # fmt: skip
    status, out, _ = ws.cli(capsys, "prompt", "req-1", "--role", "writer")
    assert status == 0 and out.startswith("You are the writer role inside teams_runtime.\n")
    assert "- Keep it under a page.\n" in out
    status, _, err = ws.cli(capsys, "prompt", "req-1", "--role", "qa")
    assert status == 2 and "--role: unknown role 'qa'; roles are: writer, reviewer, editor" in err
    status, out, _ = ws.cli(capsys, "status", "--json")
    assert json.loads(out)["roles"]["writer"]["waiting"] == 1


def test_the_dry_run_keeps_to_the_hand_off_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The route goes on to the editor, but the reviewer may hand only back to the writer, or
    # finish: the dry run finishes (its answers are valid by design).
    root = tmp_path / "ws"
    (root / ".teams_runtime" / "requests").mkdir(parents=True)
    (root / "team_runtime.yaml").write_text(
        "team: {roles: [writer, reviewer, editor]}\n"
        "roles: {writer: {hands_to: [reviewer]}, reviewer: {hands_to: [writer, '']}}\n"
        "model: {dry_run: {route: [writer, reviewer, editor]}}\n"
    )
    argv = ("--workspace", str(root))
    assert run_cli(capsys, "submit", "--role", "writer", "--scope", "x", "--request-id",
                   "req-1", *argv)[0] == 0  # fmt: skip
    status, out, _ = run_cli(capsys, "run", "--once", *argv)
    assert status == 0 and "Finished 2 envelopes: 2 done, 0 failed" in out
    record = json.loads((root / ".teams_runtime" / "requests" / "req-1.json").read_text())
    assert _reports(record) == ["writer", "reviewer"]
    assert record["status"] == "completed"


def _config_file(tmp_path: Path) -> Path:
    """The team_runtime.yaml of a new folder: only the file is read by `config`."""
    root = tmp_path / "ws"
    root.mkdir()
    return root / "team_runtime.yaml"


def test_config_graph_says_who_may_hand_to_whom(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config_file(tmp_path)
    config.write_text(yaml.safe_dump({"team": {"roles": list(ROLES)}, "roles": TEAM}))
    argv = ("config", "--graph", "--workspace", str(config.parent))
    status, out, _ = run_cli(capsys, *argv)
    assert (status, out) == (0, (
        "team: writer, reviewer, editor (new work: writer, reviewer, editor)\n"
        "writer   -> reviewer\n"
        "reviewer -> writer, editor, or done\n"
        "editor   -> done\n"
    ))  # fmt: skip
    status, out, _ = run_cli(capsys, *argv, "--json")
    graph = json.loads(out)["roles"]
    assert list(graph) == list(ROLES)
    assert graph["writer"] == {"prompt_kind": "role_task", "person": False, "takes_new_work": True,
                               "hands_to": ["reviewer"], "may_finish": False,
                               "limited": True}  # fmt: skip
    assert (graph["editor"]["hands_to"], graph["editor"]["may_finish"]) == ([], True)
    # Without hands_to a role may hand to any role of the team: the built-in team's case.
    config.write_text("team: {roles: [planner, qa, version_controller]}\n")
    status, out, _ = run_cli(capsys, *argv)
    assert out.splitlines() == [
        "team: planner, qa, version_controller (new work: planner, qa)",
        "planner            -> any role, or done",
        "qa                 -> any role, or done",
        "version_controller -> any role, or done",
    ]
    graph = json.loads(run_cli(capsys, *argv, "--json")[1])["roles"]
    assert graph["qa"]["hands_to"] == ["planner", "qa", "version_controller"]
    assert graph["version_controller"]["takes_new_work"] is False
    status, out, err = run_cli(capsys, *argv, "--probe")
    assert (status, out) == (2, "") and "--graph and --probe are two views" in err


def test_config_warns_of_requests_that_cannot_finish_and_roles_without_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config_file(tmp_path)
    root = config.parent
    config.write_text(
        "team: {roles: [writer, reviewer, publisher]}\n"
        "roles: {writer: {hands_to: [reviewer]}, reviewer: {hands_to: [writer]},\n"
        "        publisher: {prompt_kind: version_control, hands_to: ['']}}\n"
    )
    argv = ("config", "--workspace", str(root))
    stuck = (
        "a request at writer, reviewer can never finish: no chain of hand-offs from there "
        'reaches a role with "" in its hands_to (it ends failed, at the latest at the hop '
        "limit)"
    )
    idle = (
        "publisher never gets work: no role hands to it, and submit queues only for roles "
        "whose prompt_kind is not version_control"
    )
    status, out, _ = run_cli(capsys, *argv, "--graph")
    assert status == 0
    assert out.splitlines()[-2:] == [f"warning: {stuck}", f"warning: {idle}"]
    status, out, _ = run_cli(capsys, *argv, "--graph", "--json")
    assert json.loads(out)["warnings"] == [stuck, idle]
    status, out, err = run_cli(capsys, *argv)  # plain `config`: the same, as notes
    assert status == 0 and json.loads(out)["team"]["roles"] == ["writer", "reviewer", "publisher"]
    assert f"teams-runtime: note: {stuck}\n" in err and f"teams-runtime: note: {idle}\n" in err
    status, out, err = run_cli(capsys, "submit", "--role", "publisher", "--scope", "x",
                               "--workspace", str(root))  # fmt: skip
    assert (status, out) == (2, "")
    assert (
        "--role: role 'publisher' takes no new work: its prompt_kind is version_control, so "
        "its work comes from a hand-off that says what to commit; choose one of: writer, "
        "reviewer"
    ) in err
    config.write_text("team: {roles: [writer]}\nroles: {writer: {hands_to: [writer]}}\n")
    status, out, _ = run_cli(capsys, *argv, "--graph")
    assert out.splitlines()[-1] == (
        'warning: no role may finish a request (none has "" in its hands_to): every request '
        "ends failed, by a role's failed result or at the hop limit"
    )
    # A team whose every role may reach the end, and every role work: no warning.
    config.write_text(yaml.safe_dump({"team": {"roles": list(ROLES)}, "roles": TEAM}))
    status, out, err = run_cli(capsys, *argv, "--graph", "--json")
    assert json.loads(out)["warnings"] == []
    status, out, err = run_cli(capsys, *argv)
    assert "note:" not in err
    shown = json.loads(out)["roles"]  # the concurrency in force, written or not
    assert [shown[role]["concurrency"] for role in ROLES] == [4, 2, 4]


def test_a_role_name_of_any_script_names_its_folder_subject_and_log(
    workspace: Callable[..., Workspace], capsys: pytest.CaptureFixture[str]
) -> None:
    # `.`, `:` and letters beyond ASCII are a role name's as a request id's: they become a
    # folder and a log file as they are, and a NATS subject token and consumer name encoded.
    team = {"rédacteur.v2": {"hands_to": ["relecteur:2"]}, "relecteur:2": {"hands_to": [""]}}
    ws = workspace({"rédacteur.v2": ["relecteur:2"], "relecteur:2": [""]}, team)
    capsys.readouterr()
    assert ws.cli(capsys, "submit", "--role", "rédacteur.v2", "--scope", "Écris-le",
                  "--request-id", "req-1")[0] == 0  # fmt: skip
    status, out, err = ws.cli(capsys, "run", "--once")
    assert status == 0 and "Finished 2 envelopes: 2 done, 0 failed" in out, err
    assert _reports(ws.record(capsys, "req-1")) == list(team)
    logs = ws.root / ".teams_runtime" / "logs"
    assert {path.name for path in logs.glob("*.log")} == {f"{role}.log" for role in team}
    status, out, _ = ws.cli(capsys, "status", "--json")
    assert list(json.loads(out)["roles"]) == list(team)
    if ws.settings is not None:
        prefix = ws.settings.prefix
        assert _consumers(ws.settings) == {
            f"{prefix}_q_r=C3=A9dacteur=2Ev2",
            f"{prefix}_q_relecteur=3A2",
            f"{prefix}_deferred",
        }


@pytest.mark.parametrize("concurrency", [1, 3])
def test_a_role_handles_as_many_envelopes_at_once_as_its_concurrency(
    team_workspace: Callable[..., Any], capsys: pytest.CaptureFixture[str], concurrency: int
) -> None:
    sections = {"team": {"roles": ["writer"]}, "roles": {"writer": {"concurrency": concurrency}}}
    ws = team_workspace("slow:1.0", sections=sections)
    argv = ("--workspace", str(ws.root))
    for number in range(3):
        assert run_cli(capsys, "submit", "--role", "writer", "--scope", "x", "--request-id",
                       f"req-{number}", *argv)[0] == 0  # fmt: skip
    status, out, _ = run_cli(capsys, "run", "--once", *argv)
    assert status == 0 and "Finished 3 envelopes: 3 done" in out
    log = (ws.root / "model-state" / "calls.log").read_text().splitlines()
    spans = sorted((json.loads(line)["start"], json.loads(line)["end"]) for line in log)
    overlapping = any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))
    assert overlapping is (concurrency > 1)
