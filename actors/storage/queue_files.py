"""Envelopes waiting for roles, one file each, shared by every worker of a workspace.

``FileWorkQueue`` is the ``WorkQueue`` of the file backend. Layout under ``.teams_runtime/``:

    queue/<role>/<name>.json                      waiting
    queue/claimed/<worker>/<role>/<name>.json     claimed by a worker (its lease below)
    queue/deferred/<role>/<name>.json             released: waits for the next run
    queue/rejected/<role>-<name>.json (+.reason)  set aside for a person
    queue/workers/<worker>.lease                  a worker's lease: renewed while it lives

An envelope is written atomically before anyone is told about it and removed only after its
outcome is persisted (at least once, never lost). A claim is an atomic rename into the
worker's claim folder, so exactly one worker gets each envelope, on one machine or several
sharing the folder. A worker renews its lease (the lease file's mtime) while it works; the
claims of a worker whose lease is older than ``lease_seconds`` go back to the waiting folders,
where any worker takes them. Blocking code: callers in coroutines use a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import msgspec

from teams_runtime.actors.storage.files import ensure_folder, write_atomic
from teams_runtime.actors.storage.protocols import Claim, QueueSnapshot, WorkerLease
from teams_runtime.actors.storage.workspace import Workspace
from teams_runtime.codecs.formats import pretty_json_bytes
from teams_runtime.codecs.messages import MessageEnvelope
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import EnvelopeError, TeamsRuntimeError

__all__ = ["FileWorkQueue", "new_worker_id"]

_DECODER = msgspec.json.Decoder(MessageEnvelope)
_NOT_ID = re.compile(r"[^A-Za-z0-9_.-]+")


def new_worker_id() -> str:
    """A worker name unique across hosts and restarts: host, pid and a random part."""
    host = _NOT_ID.sub("-", socket.gethostname())[:40] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(3)}"


def _request_of(name: str) -> str:
    # <20 digits>-<6 hex>-<request id>.json
    return name.split("-", 2)[-1].removesuffix(".json")


class FileWorkQueue:
    """The envelope folders of one workspace, as seen by one worker."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        worker_id: str | None = None,
        lease_seconds: float = 60.0,
    ) -> None:
        self.workspace = workspace
        self.worker_id = worker_id or new_worker_id()
        self.lease_seconds = lease_seconds
        self._root = workspace.queue_dir
        self._claimed = self._root / "claimed"
        self._workers = self._root / "workers"
        self._mine = self._claimed / self.worker_id
        self._lease = self._workers / f"{self.worker_id}.lease"
        self._last_recovery = 0.0

    # --- putting and taking ----------------------------------------------------------------

    def put(self, envelope: MessageEnvelope) -> str:
        """Queue an envelope for ``envelope.target`` (written atomically and fsynced); one
        without an ``envelope_id`` gets one."""
        check_request_id(envelope.request_id)
        folder = self.workspace.role_queue(envelope.target)
        ensure_folder(folder, self.workspace.runtime_dir)
        # Names sort in arrival order: nanoseconds, then a random tie-breaker.
        stem = f"{time.time_ns():020d}-{secrets.token_hex(3)}"
        if not envelope.envelope_id:
            envelope = msgspec.structs.replace(envelope, envelope_id=f"env-{stem}")
        path = folder / f"{stem}-{envelope.request_id}.json"
        write_atomic(path, pretty_json_bytes(envelope) + b"\n")
        return str(path)

    def claim(self, role: str, limit: int) -> list[Claim]:
        if limit < 1:
            return []
        self.renew()
        self._recover_expired()
        folder = self._mine / role
        claims: list[Claim] = []
        for path in _envelopes(self.workspace.role_queue(role)):
            if len(claims) >= limit:
                break
            ensure_folder(folder, self.workspace.runtime_dir)
            target = folder / path.name
            try:
                os.rename(path, target)  # atomic: exactly one worker wins it
            except FileNotFoundError:
                continue  # another worker was faster
            try:
                claims.append(Claim(str(target), role, _load(target, role, shown=path)))
            except EnvelopeError as exc:
                claims.append(Claim(str(target), role, None, str(exc)))
        return claims

    def done(self, claim: Claim) -> None:
        Path(claim.ticket).unlink(missing_ok=True)

    def release(self, claim: Claim) -> None:
        folder = self._root / "deferred" / claim.role
        ensure_folder(folder, self.workspace.runtime_dir)
        with contextlib.suppress(FileNotFoundError):  # recovered meanwhile: waiting again
            os.rename(claim.ticket, folder / Path(claim.ticket).name)

    def reject(self, claim: Claim, reason: str) -> None:
        path = Path(claim.ticket)
        folder = self._root / "rejected"
        ensure_folder(folder, self.workspace.runtime_dir)
        target = folder / f"{claim.role}-{path.name}"
        os.replace(path, target)  # a planted link at `target` is replaced, never followed
        write_atomic(target.with_name(target.name + ".reason"), reason.encode() + b"\n")

    def drop(self, request_id: str) -> int:
        """Remove the waiting and deferred envelopes of ``request_id``; returns how many."""
        dropped = 0
        for role in ROLES:
            for folder in (self.workspace.role_queue(role), self._root / "deferred" / role):
                for path in _envelopes(folder):
                    if _request_of(path.name) == request_id:
                        with contextlib.suppress(FileNotFoundError):
                            path.unlink()
                            dropped += 1
        return dropped

    # --- the worker's lease ---------------------------------------------------------------

    def renew(self) -> None:
        """Renew this worker's lease (creating it the first time)."""
        try:
            os.utime(self._lease)
        except FileNotFoundError:
            ensure_folder(self._workers, self.workspace.runtime_dir)
            info = {"worker": self.worker_id, "host": socket.gethostname(), "pid": os.getpid()}
            write_atomic(self._lease, pretty_json_bytes(info) + b"\n", durable=False)

    def restore_deferred(self) -> int:
        """Put released envelopes back in the waiting folders (a run starts); how many."""
        restored = 0
        for role in ROLES:
            for path in _envelopes(self._root / "deferred" / role):
                restored += _move_back(path, self.workspace.role_queue(role), self.workspace)
        return restored

    def retire(self) -> None:
        """Stop working: this worker's claims wait again, its lease goes."""
        self._return_claims(self._mine)
        with contextlib.suppress(FileNotFoundError):
            self._lease.unlink()

    def _recover_expired(self) -> None:
        now = time.time()
        if now - self._last_recovery < min(self.lease_seconds / 4, 5.0):
            return
        self._last_recovery = now
        for worker in _children(self._claimed):
            if worker.name != self.worker_id and self._expired(worker.name, now):
                self._return_claims(worker)
                with contextlib.suppress(FileNotFoundError):
                    (self._workers / f"{worker.name}.lease").unlink()

    def _expired(self, worker: str, now: float) -> bool:
        try:
            renewed = os.stat(self._workers / f"{worker}.lease").st_mtime
        except FileNotFoundError:
            return True  # claims without a lease: a worker that died before its first renewal
        return now - renewed > self.lease_seconds

    def _return_claims(self, worker_folder: Path) -> None:
        for role_folder in _children(worker_folder):
            if role_folder.name in ROLES:
                for path in _envelopes(role_folder):
                    _move_back(path, self.workspace.role_queue(role_folder.name), self.workspace)
            with contextlib.suppress(OSError):
                role_folder.rmdir()
        with contextlib.suppress(OSError):
            worker_folder.rmdir()

    # --- what is where --------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        snapshot = self.snapshot()
        return {
            role: snapshot.waiting[role] + snapshot.claimed[role] + snapshot.deferred[role]
            for role in ROLES
        }

    def snapshot(self) -> QueueSnapshot:
        """Waiting, claimed and deferred envelopes per role, and every worker's lease."""
        now = time.time()
        waiting = {role: len(_envelopes(self.workspace.role_queue(role))) for role in ROLES}
        deferred = {role: len(_envelopes(self._root / "deferred" / role)) for role in ROLES}
        claimed = dict.fromkeys(ROLES, 0)
        workers = []
        names = {p.name for p in _children(self._claimed)}
        names |= {p.name.removesuffix(".lease") for p in _children(self._workers)}
        for name in sorted(names):
            holds = []
            for role in ROLES:
                for path in _envelopes(self._claimed / name / role):
                    claimed[role] += 1
                    holds.append(f"{role}:{_request_of(path.name)}")
            try:
                age = now - os.stat(self._workers / f"{name}.lease").st_mtime
            except FileNotFoundError:
                age = None
            alive = age is not None and age <= self.lease_seconds
            workers.append(WorkerLease(worker=name, alive=alive, lease_age=age, holds=holds))
        return QueueSnapshot(waiting=waiting, claimed=claimed, deferred=deferred, workers=workers)


def _children(folder: Path) -> Iterator[Path]:
    try:
        entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
    except FileNotFoundError:
        return iter(())
    return (Path(entry.path) for entry in entries if not entry.name.startswith("."))


def _envelopes(folder: Path) -> list[Path]:
    """The envelope files of a folder, oldest first."""
    try:
        names = sorted(name for name in os.listdir(folder) if not name.startswith("."))
    except FileNotFoundError:
        return []
    return [folder / name for name in names if name.endswith(".json")]


def _move_back(path: Path, folder: Path, workspace: Workspace) -> int:
    ensure_folder(folder, workspace.runtime_dir)
    try:
        os.rename(path, folder / path.name)
    except FileNotFoundError:
        return 0  # someone else moved it first
    return 1


def _load(path: Path, role: str, shown: Path) -> MessageEnvelope:
    """Read one envelope; ``EnvelopeError`` names the file (as ``shown``, where it was queued)
    and the kind of problem, never a value from it (the text goes to logs)."""
    try:
        envelope = _DECODER.decode(_read_no_follow(path))
    except OSError as exc:
        raise EnvelopeError(f"{shown}: cannot be read ({exc.strerror}).") from None
    except msgspec.ValidationError as exc:
        # msgspec names the field and the expected type, never the value.
        raise EnvelopeError(f"{shown}: not a valid envelope ({exc}).") from None
    except (msgspec.DecodeError, RecursionError):
        raise EnvelopeError(f"{shown}: not valid JSON.") from None
    if envelope.target != role:
        raise EnvelopeError(f"{shown}: its target is not the {role} role of this folder.")
    try:
        check_request_id(envelope.request_id)
    except TeamsRuntimeError:
        raise EnvelopeError(f"{shown}: its request id is not a safe file name.") from None
    if not envelope.envelope_id:  # queued before envelopes had ids: its file name is one
        envelope = msgspec.structs.replace(envelope, envelope_id=f"env-{path.stem}")
    return envelope


def _read_no_follow(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with open(fd, "rb") as handle:
        return handle.read()
