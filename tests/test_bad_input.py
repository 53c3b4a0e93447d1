"""Bad input: a typed error or exit 2, a message naming the file or field, nothing changed."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from teams_runtime import RecordError, UnsafeRequestIdError, open_context, project_request
from teams_runtime.actors.team._team import RunSummary
from teams_runtime.cli import main
from teams_runtime.codecs.request_ids import MAX_REQUEST_ID_BYTES, check_request_id
from teams_runtime.codecs.request_records import encode_record
from teams_runtime.demo import sample_record
from teams_runtime.storage import Workspace
from teams_runtime.storage.files import file_store as store

pytestmark = pytest.mark.anyio

RunOnce = Callable[..., Awaitable[RunSummary]]

DEEP = b'{"events": [{"type": "role_report", "payload": ' + b"[" * 50_000 + b"]" * 50_000 + b"}]}"
BAD_RECORDS = [
    pytest.param(b'{"request_id": "bad", "events": [{"type": "x"', "not valid JSON", id="torn"),
    pytest.param(b"[1, 2, 3]", "must be a JSON object", id="array"),
    pytest.param(b"42", "must be a JSON object", id="scalar"),
    pytest.param(b'{"summary": "caf\xe9"}', "not valid UTF-8 at byte", id="invalid-utf8"),
    pytest.param(DEEP, "nested too deeply", id="deeply-nested"),
]


@pytest.mark.parametrize(("content", "needle"), BAD_RECORDS)
def test_bad_record_files_exit_2_and_stay_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes, needle: str
) -> None:
    path = Workspace(tmp_path).request_path("bad")
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    for argv in (
        ["project", "bad"],
        ["explain", "bad"],
        ["append", "bad", "--type", "x", "--actor", "qa", "--summary", "s"],
        ["prompt", "bad", "--role", "qa"],
    ):
        (tmp_path / "team_runtime.yaml").write_text("")
        status = main([*argv, "--workspace", str(tmp_path)])
        out, err = capsys.readouterr()
        assert status == 2, argv
        assert out == ""
        assert err.startswith(f"teams-runtime: error: {path}: ") and needle in err, err
    assert path.read_bytes() == content


@pytest.mark.parametrize(("content", "needle"), BAD_RECORDS)
async def test_bad_record_files_are_typed_errors_for_the_actor(
    tmp_path: Path, content: bytes, needle: str
) -> None:
    path = Workspace(tmp_path).request_path("bad")
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    async with open_context(tmp_path) as ctx:
        with pytest.raises(RecordError, match=rf"^{re.escape(str(path))}: .*{needle}"):
            await ctx.project("bad")
        with pytest.raises(RecordError, match=rf"^{re.escape(str(path))}: .*{needle}"):
            await ctx.append_event("bad", {"type": "note"})
    assert path.read_bytes() == content


@pytest.mark.parametrize(
    "events",
    [
        pytest.param("a string", id="string"),
        pytest.param({"0": 1}, id="object"),
        pytest.param(7, id="number"),
    ],
)
async def test_events_of_the_wrong_type_are_kept_and_never_appended_to(
    tmp_path: Path, events: object
) -> None:
    path = Workspace(tmp_path).request_path("req-1")
    path.parent.mkdir(parents=True)
    path.write_bytes(encode_record({"request_id": "req-1", "events": events}))
    before = path.read_bytes()
    async with open_context(tmp_path) as ctx:
        projection = await ctx.project("req-1")
        assert projection.record["events"] == events and projection.total_events == 0
        with pytest.raises(RecordError, match=r"`events` is a \w+, not a list"):
            await ctx.append_event("req-1", {"type": "note"})
    assert path.read_bytes() == before


async def test_an_enormous_single_event_is_carried_whole(tmp_path: Path) -> None:
    source = sample_record(30, "req-1")
    source["events"][-1]["payload"] = {"role": "qa", "status": "done", "blob": "é" * 5_000_000}
    store.create_record(Workspace(tmp_path).record_paths("req-1"), source)
    async with open_context(tmp_path) as ctx:
        projection = await ctx.project("req-1")
        assert projection.record["events"][-1]["payload"]["blob"] == "é" * 5_000_000
        await ctx.append_event("req-1", {"type": "note", "payload": {"blob": "x" * 3_000_000}})
        assert (await ctx.project("req-1")).total_events == 31
    on_disk = json.loads(Workspace(tmp_path).request_path("req-1").read_bytes())
    assert len(on_disk["events"][-1]["payload"]["blob"]) == 3_000_000


@pytest.mark.parametrize(
    "request_id",
    [
        pytest.param("", id="empty"),
        pytest.param("..", id="dotdot"),
        pytest.param(".", id="dot"),
        pytest.param("a/b", id="slash"),
        pytest.param("a\\b", id="backslash"),
        pytest.param("a\x00b", id="nul"),
        pytest.param("a\x01b", id="control"),
        pytest.param("a\tb", id="tab"),
        pytest.param("req\n", id="trailing-newline"),
        pytest.param("x" * (MAX_REQUEST_ID_BYTES + 1), id="too-long"),
        pytest.param("a..b", id="inner-dotdot"),
        pytest.param(" req", id="space"),
    ],
)
def test_unsafe_request_ids(request_id: str) -> None:
    with pytest.raises(UnsafeRequestIdError):
        check_request_id(request_id)


@pytest.mark.parametrize("request_id", ["req-1", "a.b", "2026:11:30", "A_b-C", "x" * 200])
def test_safe_request_ids(request_id: str) -> None:
    assert check_request_id(request_id) == request_id


@pytest.mark.parametrize("request_id", ["../etc/passwd", "a\tb", "x" * 300, "..", "a\\b"])
def test_unsafe_ids_on_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], request_id: str
) -> None:
    for argv in (
        ["project", request_id],
        ["append", request_id, "--type", "x", "--actor", "a", "--summary", "s"],
        ["export", request_id, "--out", str(tmp_path / "out.json")],
        ["submit", "--role", "qa", "--scope", "s", "--request-id", request_id],
    ):
        (tmp_path / "team_runtime.yaml").write_text("")
        status = main([*argv, "--workspace", str(tmp_path)])
        out, err = capsys.readouterr()
        assert status == 2 and out == ""
        assert "not a safe file name" in err or "bytes long in UTF-8" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["team_runtime.yaml"]


async def test_bad_envelopes_are_rejected_with_their_reason(
    team_workspace: Callable[..., Workspace], seed: Callable[..., None], run_once: RunOnce
) -> None:
    workspace = team_workspace()
    folder = workspace.role_queue("qa")
    folder.mkdir(parents=True)
    cases = {
        "1-not-json.json": ("{oops", "not valid JSON"),
        "2-array.json": ("[1, 2]", "not a valid envelope"),
        "3-missing.json": ('{"request_id": "req-1", "target": "qa"}', "not a valid envelope"),
        "4-target.json": (
            '{"request_id": "req-1", "sender": "x", "target": "planner"}',
            "its target is not the qa role",
        ),
        "5-unsafe.json": ('{"request_id": "../x", "sender": "x", "target": "qa"}', "not a safe"),
    }
    for name, (content, _) in cases.items():
        (folder / name).write_text(content)
    seed(workspace, "req-1", "qa")
    summary = await run_once(workspace)
    assert (summary.rejected, summary.handled) == (5, 1)
    rejected = workspace.queue_dir / "rejected"
    for name, (content, reason) in cases.items():
        assert (rejected / f"qa-{name}").read_text() == content  # kept as it was
        assert reason in (rejected / f"qa-{name}.reason").read_text()


def test_unknown_role_names_never_become_paths(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    for role in ("../x", "qa/../../etc", "", "QA"):
        with pytest.raises(ValueError, match="unknown role"):
            workspace.role_queue(role)
        with pytest.raises(ValueError, match="unknown role"):
            workspace.role_log(role)


async def test_the_model_command_never_goes_through_a_shell(
    tmp_path: Path,
    team_workspace: Callable[..., Workspace],
    model_command: Callable[..., list[str]],
    seed: Callable[..., None],
    run_once: RunOnce,
) -> None:
    marker = tmp_path / "pwned"
    command = model_command("valid", tmp_path / "state", f"$(touch {marker})")
    workspace = team_workspace(command=command)
    seed(workspace, "req-1", "qa")
    summary = await run_once(workspace)
    assert summary.handled == 1
    assert not marker.exists()


def test_project_request_rejects_values_json_cannot_hold() -> None:
    with pytest.raises(RecordError, match="cannot be encoded as JSON"):
        project_request({"request_id": "r", "events": [], "when": object()})


def _tree(root: Path) -> dict[str, bytes | None]:
    """Every file (with its bytes) and folder (``None``) under ``root``."""
    return {
        str(path.relative_to(root)): path.read_bytes() if path.is_file() else None
        for path in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(
            ["append", "nope", "--type", "a", "--actor", "b", "--summary", "c"], id="append"
        ),
        pytest.param(
            ["append", "nope", "--type", "a", "--actor", "b", "--summary", "c", "--key", "k"],
            id="append-keyed",
        ),
        pytest.param(["project", "nope"], id="project"),
        pytest.param(["explain", "nope"], id="explain"),
        pytest.param(["prompt", "nope", "--role", "qa"], id="prompt"),
        pytest.param(["cancel", "nope"], id="cancel"),
        pytest.param(["export", "nope"], id="export"),
        pytest.param(["export", "nope", "--out", "nope.json"], id="export-to-a-file"),
    ],
)
@pytest.mark.parametrize("fresh", ["init", "config-only"])
def test_an_unknown_request_changes_nothing_on_disk(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    fresh: str,
) -> None:
    if fresh == "init":  # what `init` makes: the config and an empty requests folder
        assert main(["init", str(tmp_path / "fresh")]) == 0
    else:  # a config and nothing else, as a workspace copied without .teams_runtime/
        (tmp_path / "fresh").mkdir()
        (tmp_path / "fresh" / "team_runtime.yaml").write_text("")
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    before = _tree(tmp_path)
    status = main([*argv, "--workspace", "fresh"])
    out, err = capsys.readouterr()
    assert (status, out) == (2, "")
    assert err.startswith("teams-runtime: error: no request 'nope'"), err
    assert _tree(tmp_path) == before
