"""What the runtime did not write, on both storages: files in its folders, keys in its KV
buckets, envelopes on queue subjects no role reads. ``status`` names each with a reason and
exits 0, workers keep serving beside them, ``purge-strays`` sets the envelopes aside."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from hypothesis import given
from hypothesis import strategies as st

from teams_runtime.codecs.config import NatsSettings
from teams_runtime.storage.nats._names import id_of_token, request_id_of_token, token_of

from ..support.cli_in_process import init_nats_workspace, run_cli

Plant = Callable[[Path, NatsSettings | None], None]
_ENVELOPE = b'{"request_id": "req-9", "sender": "user", "target": "qa", "scope": "x"}'


# --- tokens read back strictly ---------------------------------------------------------------


@given(st.text())
def test_every_id_reads_back_from_its_token(value: str) -> None:
    assert id_of_token(token_of(value)) == (value or None)


@given(st.text(alphabet="=-_.abcAZ09EFxyz/", max_size=12))
def test_a_token_token_of_never_makes_reads_back_as_none(token: str) -> None:
    value = id_of_token(token)  # never an exception, whatever the key
    assert value is None or token_of(value) == token


@pytest.mark.parametrize(
    "token",
    [
        pytest.param("=ZZ", id="no-hex"),
        pytest.param("=2", id="short-escape"),
        pytest.param("=2e", id="lower-case-hex"),
        pytest.param("=41", id="escaped-letter"),
        pytest.param("a.b", id="dot-kept"),
        pytest.param("=C3", id="half-a-character"),
        pytest.param("", id="empty"),
    ],
)
def test_keys_the_runtime_never_writes_are_no_request_id(token: str) -> None:
    assert request_id_of_token(token) is None


def test_a_request_id_reads_back_only_in_its_nfc_form() -> None:
    nfc = unicodedata.normalize("NFC", "요청-é")
    assert request_id_of_token(token_of(nfc)) == nfc
    nfd = unicodedata.normalize("NFD", nfc)  # records are kept NFC: this token names none
    assert request_id_of_token(token_of(nfd)) is None
    assert request_id_of_token(token_of("a/b")) is None  # not a safe id


# --- planting strays ---------------------------------------------------------------------------


def _nats(settings: NatsSettings | None, act: Callable[[Any], Any]) -> Any:
    """Run ``act(client)`` on a raw nats-py client of the test's own (another program)."""
    assert settings is not None

    async def run() -> Any:
        client = await nats.connect(settings.url)
        try:
            return await act(client)
        finally:
            await client.close()

    return asyncio.run(run())


def _kv_put(bucket: str, key: str, value: bytes) -> Plant:
    def plant(root: Path, settings: NatsSettings | None) -> None:
        async def put(client: Any) -> None:
            assert settings is not None
            kv = await client.jetstream().key_value(f"{settings.prefix}_{bucket}")
            await kv.put(key, value)

        _nats(settings, put)

    return plant


def _publish(subject: str) -> Plant:
    def plant(root: Path, settings: NatsSettings | None) -> None:
        assert settings is not None
        full = f"{settings.prefix}.{subject}"
        _nats(settings, lambda client: client.jetstream().publish(full, _ENVELOPE))

    return plant


def _file(relative: str, data: bytes = b"{}\n") -> Plant:
    def plant(root: Path, settings: NatsSettings | None) -> None:
        path = root / ".teams_runtime" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return plant


def _folder(relative: str) -> Plant:
    def plant(root: Path, settings: NatsSettings | None) -> None:
        (root / ".teams_runtime" / relative).mkdir(parents=True)

    return plant


def _link(relative: str) -> Plant:
    def plant(root: Path, settings: NatsSettings | None) -> None:
        path = root / ".teams_runtime" / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        os.symlink("/etc/hostname", path)

    return plant


# (plant, where status names it: `{p}` is the team's prefix, `{r}` the runtime folder; the
# envelopes it counts)
NATS_STRAYS = [
    pytest.param(_kv_put("records", "=ZZ", b"{}"), "nats:{p}_records/=ZZ", 0, id="records-key"),
    pytest.param(_kv_put("records", "req.1", b"{}"), "nats:{p}_records/req.1", 0, id="records-dot"),
    pytest.param(_kv_put("workers", "=ZZ", b"{}"), "nats:{p}_workers/=ZZ", 0, id="workers-key"),
    pytest.param(_kv_put("workers", "w-1", b"[1]"), "nats:{p}_workers/w-1", 0, id="workers-value"),
    pytest.param(_publish("q.nobody.req-1"), "nats:{p}_queue {p}.q.nobody.req-1", 1, id="role"),
    pytest.param(_publish("q.qa"), "nats:{p}_queue {p}.q.qa", 1, id="shallow-subject"),
    pytest.param(_publish("q.qa.req-1.x"), "nats:{p}_queue {p}.q.qa.req-1.x", 1, id="deep"),
    pytest.param(_publish("deferred.qa"), "nats:{p}_queue {p}.deferred.qa", 1, id="deferred"),
    pytest.param(
        _publish("deferred.qa.=ZZ"), "nats:{p}_queue {p}.deferred.qa.=ZZ", 1, id="deferred-token"
    ),
    pytest.param(
        _publish("deferred.nobody.req-1"),
        "nats:{p}_queue {p}.deferred.nobody.req-1",
        1,
        id="deferred-role",
    ),
]
FILE_STRAYS = [
    pytest.param(_file("requests/bad id.json"), "{r}/requests/bad id.json", 0, id="record-name"),
    pytest.param(_file("requests/notes.txt"), "{r}/requests/notes.txt", 0, id="records-file"),
    pytest.param(_file("queue/nobody/1-a-req-1.json"), "{r}/queue/nobody/", 1, id="role"),
    pytest.param(_file("queue/qa/notes.txt"), "{r}/queue/qa/notes.txt", 0, id="not-envelope"),
    pytest.param(_folder("queue/qa/d.json"), "{r}/queue/qa/d.json", 0, id="envelope-folder"),
    pytest.param(_file("queue/notes"), "{r}/queue/notes", 0, id="queue-file"),
    pytest.param(_file("queue/deferred/nobody/x.json"), "{r}/queue/deferred/nobody/", 1, id="dfr"),
    pytest.param(
        _file("queue/deferred/qa/garbage.json", _ENVELOPE),
        "{r}/queue/deferred/qa/garbage.json",
        0,
        id="deferred-name",
    ),
    pytest.param(
        _file("queue/deferred/qa/zz-bin.json", _ENVELOPE),
        "{r}/queue/deferred/qa/zz-bin.json",
        0,
        id="deferred-no-time",
    ),
    pytest.param(
        _file("queue/claimed/w-1/nobody/x.json"), "{r}/queue/claimed/w-1/nobody/", 1, id="claim"
    ),
    pytest.param(_file("queue/claimed/loose"), "{r}/queue/claimed/loose", 0, id="claimed-file"),
    pytest.param(_file("queue/workers/=.lease"), "{r}/queue/workers/=.lease", 0, id="lease-name"),
    pytest.param(_folder("queue/workers/d.lease"), "{r}/queue/workers/d.lease", 0, id="lease-dir"),
    pytest.param(_link("queue/workers/l.lease"), "{r}/queue/workers/l.lease", 0, id="lease-link"),
    pytest.param(_file("queue/workers/notes"), "{r}/queue/workers/notes", 0, id="leases-file"),
    pytest.param(_file("servers/junk.json", b"[]"), "{r}/servers/junk.json", 0, id="server"),
    pytest.param(_folder("servers/d.json"), "{r}/servers/d.json", 0, id="server-folder"),
]


def _workspace(root: Path, backend: str, request: pytest.FixtureRequest) -> NatsSettings | None:
    """A new workspace (dry-run model) on ``backend``; its NATS settings, if any."""
    if backend == "file":
        assert run_cli(request.getfixturevalue("capsys"), "init", str(root))[0] == 0
        return None
    settings: NatsSettings = request.getfixturevalue("nats_server").settings()
    init_nats_workspace(root, settings)
    return settings


def _status(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[dict[str, Any], str]:
    """``status --json`` and ``status`` (each must exit 0 without a word on stderr)."""
    code, out, err = run_cli(capsys, "status", "--json", "--workspace", str(root))
    assert (code, err) == (0, ""), err
    report = json.loads(out)
    code, text, err = run_cli(capsys, "status", "--workspace", str(root))
    assert (code, err) == (0, ""), err
    return report, text


def _shown(where: str, root: Path, settings: NatsSettings | None) -> str:
    prefix = settings.prefix if settings is not None else ""
    return where.format(p=prefix, r=root / ".teams_runtime")


def _check_named(
    capsys: pytest.CaptureFixture[str], root: Path, shown: str, envelopes: int
) -> dict[str, Any]:
    report, text = _status(capsys, root)
    found = [stray for stray in report["strays"] if stray["where"] == shown]
    assert len(found) == 1, report["strays"]
    assert found[0]["envelopes"] == envelopes and found[0]["reason"]
    assert f"stray {shown}" in text
    assert report["workers"] == []  # nothing planted passes for a worker
    assert [row["request_id"] for row in report["requests"]] == ["req-1"]
    assert report["requests"][0]["status"] == "queued"
    return report


@pytest.mark.parametrize(("plant", "where", "envelopes"), NATS_STRAYS)
def test_status_names_a_nats_stray_and_exits_0(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    plant: Plant,
    where: str,
    envelopes: int,
) -> None:
    settings = _workspace(tmp_path, "nats", request)
    _submit(capsys, tmp_path, "req-1")
    plant(tmp_path, settings)
    report = _check_named(capsys, tmp_path, _shown(where, tmp_path, settings), envelopes)
    assert report["roles"]["qa"] == {"waiting": 1, "claimed": 0, "deferred": 0}  # only ours
    assert report["deferred"] == []


@pytest.mark.parametrize(("plant", "where", "envelopes"), FILE_STRAYS)
def test_status_names_a_file_stray_and_exits_0(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    plant: Plant,
    where: str,
    envelopes: int,
) -> None:
    _workspace(tmp_path, "file", request)
    _submit(capsys, tmp_path, "req-1")
    plant(tmp_path, None)
    report = _check_named(capsys, tmp_path, _shown(where, tmp_path, None), envelopes)
    assert report["roles"]["qa"]["deferred"] == 0  # nothing planted passes for deferred work
    assert report["deferred"] == []


def test_the_empty_folders_of_a_role_that_left_the_team_are_no_strays(
    tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    # A role removed from team.roles leaves its folders; empty, they hold nothing to lose.
    _workspace(tmp_path, "file", request)
    _submit(capsys, tmp_path, "req-1")
    for relative in ("queue/approver", "queue/deferred/approver", "queue/claimed/w-1/approver"):
        _folder(relative)(tmp_path, None)
    report, text = _status(capsys, tmp_path)
    assert report["strays"] == [] and "stray" not in text
    _file("queue/approver/notes.txt")(tmp_path, None)  # not empty: named, as before
    report, _ = _status(capsys, tmp_path)
    assert [stray["where"] for stray in report["strays"]] == [
        f"{tmp_path / '.teams_runtime'}/queue/approver/"
    ]


def _submit(capsys: pytest.CaptureFixture[str], root: Path, request_id: str) -> None:
    argv = ["submit", "--role", "qa", "--scope", "check", "--request-id", request_id]
    code, _, err = run_cli(capsys, *argv, "--workspace", str(root))
    assert code == 0, err


def _run_once(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "teams_runtime", "run", "--once", "--workspace", str(root)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("backend", ["file", "nats"])
def test_workers_keep_serving_beside_every_kind_of_stray(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    backend: str,
) -> None:
    settings = _workspace(tmp_path, backend, request)
    strays = NATS_STRAYS if backend == "nats" else FILE_STRAYS
    for request_id in ("req-1", "req-2"):
        _submit(capsys, tmp_path, request_id)
    for stray in strays:
        stray.values[0](tmp_path, settings)  # type: ignore[operator]
    done = _run_once(tmp_path)  # a real worker process beside them
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert ": 2 done, 0 failed" in done.stdout
    report, _ = _status(capsys, tmp_path)
    assert [(row["request_id"], row["status"]) for row in report["requests"]] == [
        ("req-1", "completed"),
        ("req-2", "completed"),
    ]
    shown = {stray["where"] for stray in report["strays"]}
    for stray in strays:  # all still there, named: none deleted, none taken for work
        where = stray.values[1]
        if where != "{r}/queue/qa/d.json":  # but a folder posing as an envelope: rejected
            assert _shown(str(where), tmp_path, settings) in shown


@pytest.mark.parametrize("backend", ["file", "nats"])
def test_purge_strays_sets_aside_only_envelopes_no_role_reads(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    backend: str,
) -> None:
    settings = _workspace(tmp_path, backend, request)
    _submit(capsys, tmp_path, "req-1")  # real work, waiting for qa
    if settings is not None:
        for subject in ("q.nobody.req-1", "q.nobody.req-1", "q.qa.req-1.x"):
            _publish(subject)(tmp_path, settings)
        unread = {
            f"nats:{settings.prefix}_queue {settings.prefix}.q.nobody.req-1": 2,
            f"nats:{settings.prefix}_queue {settings.prefix}.q.qa.req-1.x": 1,
        }
    else:
        for name in ("1-a-req-1.json", "2-b-req-1.json"):
            _file(f"queue/nobody/{name}", _ENVELOPE)(tmp_path, None)
        _file("queue/claimed/w-1/nobody/1-a-req-1.json", _ENVELOPE)(tmp_path, None)
        runtime = tmp_path / ".teams_runtime"
        unread = {f"{runtime}/queue/nobody/": 2, f"{runtime}/queue/claimed/w-1/nobody/": 1}
    report, text = _status(capsys, tmp_path)
    assert {s["where"]: s["envelopes"] for s in report["strays"]} == unread
    assert "`teams-runtime purge-strays` sets them aside" in text

    code, out, err = run_cli(capsys, "purge-strays", "--workspace", str(tmp_path))
    assert (code, err) == (0, "")
    assert out.startswith("Set aside 3 stray envelopes (no role reads them) in ")
    report, _ = _status(capsys, tmp_path)
    assert [s for s in report["strays"] if s["envelopes"]] == []
    assert report["roles"]["qa"] == {"waiting": 1, "claimed": 0, "deferred": 0}  # ours stays
    assert _set_aside(tmp_path, settings) == 3  # kept for a person, each with its reason
    code, out, _ = run_cli(capsys, "purge-strays", "--json", "--workspace", str(tmp_path))
    assert (code, json.loads(out)["set_aside"]) == (0, 0)

    done = _run_once(tmp_path)  # workers are unaffected
    assert done.returncode == 0, done.stderr
    assert ": 1 done, 0 failed" in done.stdout


def _set_aside(root: Path, settings: NatsSettings | None) -> int:
    """How many set-aside envelopes carry a reason (the rejected stream, or folder)."""
    if settings is None:
        rejected = root / ".teams_runtime" / "queue" / "rejected"
        envelopes = [path for path in rejected.iterdir() if path.suffix == ".json"]
        assert all(path.with_name(path.name + ".reason").read_text() for path in envelopes)
        return len(envelopes)

    async def count(client: Any) -> int:
        js = client.jetstream()
        assert settings is not None
        stream = f"{settings.prefix}_rejected"
        total = (await js.stream_info(stream)).state.messages
        for seq in range(1, total + 1):
            message = await js.get_msg(stream, seq)
            assert "no role reads it" in message.headers["Tr-Reason"]
        return int(total)

    return int(_nats(settings, count))


@pytest.mark.parametrize("backend", ["file", "nats"])
def test_set_aside_strays_are_listed_alike_and_retry_leaves_them(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    backend: str,
) -> None:
    # Once set aside, a stray is shown as one on both storages, with its reason and without a
    # `retry --rejected` hint: putting it back would put it again where no role reads.
    settings = _workspace(tmp_path, backend, request)
    _submit(capsys, tmp_path, "req-1")  # real work, waiting for qa
    envelope = _ENVELOPE.replace(b"req-9", b"req-1")
    if settings is not None:
        _nats(settings, lambda client: client.jetstream().publish(
            f"{settings.prefix}.q.nobody.req-1", envelope))  # fmt: skip
    else:
        _file("queue/nobody/00000000000000000001-abcdef-req-1.json", envelope)(tmp_path, None)
    code, _, err = run_cli(capsys, "purge-strays", "--workspace", str(tmp_path))
    assert (code, err) == (0, "")
    _check_set_aside_stray(capsys, tmp_path)
    for retry in (["retry", "--rejected", "req-1"], ["retry", "--rejected"]):
        code, out, err = run_cli(capsys, *retry, "--json", "--workspace", str(tmp_path))
        assert (code, json.loads(out)["requeued"], err) == (0, 0, "")
        _check_set_aside_stray(capsys, tmp_path)  # left where it was: not put back
    assert _set_aside(tmp_path, settings) == 1  # with its reason


def _check_set_aside_stray(capsys: pytest.CaptureFixture[str], root: Path) -> None:
    """``status`` lists the one stray set aside as such, offers no retry for it, and nothing
    waits for no role."""
    report, text = _status(capsys, root)
    (rejected,) = report["rejected"]
    assert rejected.pop("name")  # its file in queue/rejected/, or its stream sequence
    assert "nobody" in rejected.pop("reason")  # why no role read it, as purge-strays said
    assert rejected == {"role": "", "request_id": "req-1", "stray": True}
    assert "set aside stray of req-1 (" in text
    assert "puts it back" not in text
    assert [stray for stray in report["strays"] if stray["envelopes"]] == []
    assert report["roles"]["qa"] == {"waiting": 1, "claimed": 0, "deferred": 0}  # only ours


def test_cancel_beside_a_stray_subject_of_its_request(
    tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _workspace(tmp_path, "nats", request)
    _submit(capsys, tmp_path, "req-1")
    _publish("q.nobody.req-1")(tmp_path, settings)  # a role no consumer reads, this request
    code, out, err = run_cli(capsys, "cancel", "req-1", "--json", "--workspace", str(tmp_path))
    assert (code, err) == (0, "")
    assert json.loads(out)["dropped"] == 1  # its own envelope; the stray is left to purge
    report, _ = _status(capsys, tmp_path)
    assert [s["envelopes"] for s in report["strays"]] == [1]


# --- a next attempt that is no sane time --------------------------------------------------------


def _defer_with_header(settings: NatsSettings | None, request_id: str, header: str) -> None:
    """Move ``request_id``'s waiting qa envelope to its deferred subject, as another program
    would, with ``header`` for its next attempt: the worker can only finish the request by
    restoring it."""
    assert settings is not None
    prefix = settings.prefix

    async def move(client: Any) -> None:
        js = client.jetstream()
        waiting = await js.get_last_msg(f"{prefix}_queue", f"{prefix}.q.qa.{request_id}")
        await js.delete_msg(f"{prefix}_queue", waiting.seq)
        subject = f"{prefix}.deferred.qa.{request_id}"
        await js.publish(subject, waiting.data, headers={"Tr-Next-Attempt": header})

    _nats(settings, move)


@pytest.mark.parametrize(
    "header", ["9999999999999999999999", "inf", "1e20", "-1e20", "253402300800", "nan", ""]
)
def test_a_next_attempt_that_is_no_time_is_due_now(
    tmp_path: Path,
    request: pytest.FixtureRequest,
    capsys: pytest.CaptureFixture[str],
    header: str,
) -> None:
    settings = _workspace(tmp_path, "nats", request)
    _submit(capsys, tmp_path, "req-zz3")
    _defer_with_header(settings, "req-zz3", header)
    report, text = _status(capsys, tmp_path)  # exit 0, not a traceback
    assert [(d["request_id"], d["due_in_seconds"]) for d in report["deferred"]] == [
        ("req-zz3", 0.0)
    ]
    assert "due now" in text
    done = _run_once(tmp_path)  # a worker restores it at once and serves it
    assert done.returncode == 0, done.stderr
    assert ": 1 done, 0 failed" in done.stdout
    report, _ = _status(capsys, tmp_path)
    assert report["deferred"] == []
    assert [(r["request_id"], r["status"]) for r in report["requests"]] == [
        ("req-zz3", "completed")
    ]


# --- temp files: ours are exactly the names our writer makes -------------------------------------

_NOT_OURS = [".req-c02.json~my-notes.tmp", ".req-c02.json~1.2.3.tmp",
             ".req-c02.json~12345.cafe.tmp", ".req-c02.json~backup"]  # fmt: skip
_OURS = ".req-c02.json~4242.0badcafe.tmp"  # a writer killed mid-write left it


def test_a_writer_removes_only_its_own_stale_temps_and_status_names_the_rest(
    tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    _workspace(tmp_path, "file", request)
    _submit(capsys, tmp_path, "req-c02")
    folder = tmp_path / ".teams_runtime" / "requests"
    old = time.time() - 120  # past the minute a live writer's temp may live
    for name in [*_NOT_OURS, _OURS]:
        (folder / name).write_bytes(b"a person's notes\n")
        os.utime(folder / name, (old, old))
    report, _ = _status(capsys, tmp_path)
    strays = {stray["where"]: stray["reason"] for stray in report["strays"]}
    assert set(strays) == {str(folder / name) for name in _NOT_OURS}  # ours is no stray
    assert all(reason.startswith("not a record file") for reason in strays.values())
    argv = ["append", "req-c02", "--type", "note", "--actor", "qa", "--summary", "s"]
    code, _, err = run_cli(capsys, *argv, "--workspace", str(tmp_path))
    assert code == 0, err
    assert not (folder / _OURS).exists()  # the stale temp of a killed writer: removed
    assert all((folder / name).read_bytes() == b"a person's notes\n" for name in _NOT_OURS)


def test_a_records_key_with_an_empty_value_is_unreadable_not_missing(
    tmp_path: Path, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = _workspace(tmp_path, "nats", request)
    _submit(capsys, tmp_path, "req-1")
    _kv_put("records", "odd_key-", b"")(tmp_path, settings)
    report, _ = _status(capsys, tmp_path)
    rows = {row["request_id"]: row for row in report["requests"]}
    assert rows["req-1"]["status"] == "queued"
    assert rows["odd_key-"]["status"] == "unreadable"
    error = rows["odd_key-"]["error"]  # true: the key is there, its value is no head
    assert "the record head is empty" in error and "no request" not in error
    done = _run_once(tmp_path)  # workers serve beside it
    assert done.returncode == 0, done.stderr
    assert ": 1 done, 0 failed" in done.stdout
