"""Envelopes waiting for roles, one file each, shared by every worker of a workspace.

``FileWorkQueue`` is the ``WorkQueue`` of the file storage. Layout under ``.teams_runtime/``:

    queue/<role>/<name>.json                      waiting
    queue/claimed/<worker>/<role>/<name>.json     claimed by a worker (its lease below)
    queue/deferred/<role>/<name>.json             released: waits until its mtime (its next
                                                  attempt; ``storage._deferrals``)
    queue/rejected/<role>-<name>.json (+.reason)  set aside for a person
    queue/workers/<worker>.lease                  a worker's lease: renewed while it lives

An envelope is written atomically before anyone is told about it and removed only after its
outcome is persisted (at least once, never lost). A claim is an atomic rename into the
worker's claim folder, so exactly one worker gets each envelope, on one machine or several
sharing the folder. A worker renews its lease (the lease file's mtime) while it works; the
claims of a worker whose lease is older than ``lease_seconds`` go back to the waiting folders,
where any worker takes them, and a lease ``STALE_LEASES`` times older than that (a worker
long dead) is removed. Every folder is opened without following links and every file is
moved relative to its folder's descriptor (``files.folder``): nothing is ever read, moved or
removed outside the workspace through a planted link. Blocking code: coroutines await it
through ``files.threaded`` (a worker thread per call).
"""

from __future__ import annotations

import contextlib
import os
import platform
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import msgspec

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.formats import pretty_json_bytes
from teams_runtime.codecs.request_ids import with_checked_request_id
from teams_runtime.codecs.roles import ROLES, check_role
from teams_runtime.exceptions import EnvelopeError, TeamsRuntimeError
from teams_runtime.storage._deferrals import RetrySchedule, deferral_view, with_deferrals
from teams_runtime.storage.files._envelope_names import queued_request_id
from teams_runtime.storage.files._lease_files import LeaseFiles
from teams_runtime.storage.files._queued_ids import QueuedIds
from teams_runtime.storage.files._stray_files import (
    marker_strays,
    queue_strays,
    set_aside_unread,
)
from teams_runtime.storage.local_files import folder, read_file, write_atomic
from teams_runtime.storage.protocols import (
    Claim,
    DeferredEnvelope,
    QueueSnapshot,
    Stray,
    WorkerLease,
)
from teams_runtime.storage.queued_envelopes import decode_envelope, new_worker_id
from teams_runtime.storage.workspace import Workspace

__all__ = ["STALE_LEASES", "FileWorkQueue"]

# A lease file this many `lease_seconds` old belongs to a worker long dead: it is removed (a
# worker that was only paused writes its lease again at its next renewal).
STALE_LEASES = 3


def _request_of(name: str) -> str:
    # <20 digits>-<6 hex>-<request id>.json
    return name.split("-", 2)[-1].removesuffix(".json")


class FileWorkQueue:
    """The envelope folders of one workspace, as seen by one worker."""

    def __init__(
        self,
        workspace: Workspace,
        *,
        roles: Sequence[str] = ROLES,
        worker_id: str | None = None,
        lease_seconds: float = 60.0,
        retry: RetrySchedule | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.workspace = workspace
        self.roles = tuple(roles)  # the team's (``TeamConfig.cast``): a folder each
        self.worker_id = worker_id or new_worker_id()
        self.lease_seconds = lease_seconds
        self.renew_trouble = "its lease file could not be written: a full disk?"
        self._retry = retry or RetrySchedule()
        self._clock = clock  # when deferred envelopes are due (file times are Unix times)
        self._runtime = workspace.runtime_dir
        self._root = workspace.queue_dir
        self._claimed = self._root / "claimed"
        self._workers = self._root / "workers"
        self._mine = self._claimed / self.worker_id
        self._leases = LeaseFiles(self._workers, self._runtime)
        self._lease = self._leases.path(self.worker_id)
        self._last_recovery = 0.0
        self._ids = QueuedIds(self._root, self._runtime, self.roles)

    def _deferred(self, role: str) -> Path:
        return self._root / "deferred" / role

    # --- putting and taking ----------------------------------------------------------------

    def put(self, envelope: MessageEnvelope) -> str:
        """Queue an envelope for ``envelope.target`` (written atomically and fsynced); one
        without an ``envelope_id`` gets one."""
        envelope = with_checked_request_id(envelope)  # files and records use the NFC form
        waiting = self.workspace.role_queue(check_role(envelope.target, self.roles))
        # Names sort in arrival order: nanoseconds, then a random tie-breaker.
        stem = f"{time.time_ns():020d}-{os.urandom(3).hex()}"
        if not envelope.envelope_id:
            envelope = msgspec.structs.replace(envelope, envelope_id=f"env-{stem}")
        name = f"{stem}-{envelope.request_id}.json"
        with self._ids.first(envelope.envelope_id, envelope.target, name) as first:
            if first is not None:
                return str(first)  # one envelope per id: this one is queued already
            write_atomic(waiting / name, pretty_json_bytes(envelope) + b"\n",
                         runtime=self._runtime)  # fmt: skip
        return str(waiting / name)

    def claim(self, role: str, limit: int) -> list[Claim]:
        if limit < 1:
            return []
        check_role(role, self.roles)
        self.renew()
        self._recover_expired()
        waiting = self.workspace.role_queue(role)
        mine = self._mine / role
        claims: list[Claim] = []
        for name in self._names(waiting):
            if len(claims) >= limit:
                break
            if not self._move(waiting, name, mine):  # atomic: exactly one worker wins it
                continue  # another worker was faster
            target = mine / name
            try:
                envelope = _load(target, role, self._runtime, shown=waiting / name)
                claims.append(Claim(str(target), role, envelope))
            except EnvelopeError as exc:
                claims.append(Claim(str(target), role, None, str(exc)))
        return claims

    def done(self, claim: Claim) -> None:
        ticket = Path(claim.ticket)
        with (
            contextlib.suppress(FileNotFoundError),
            folder(ticket.parent, self._runtime, create=False) as dfd,
        ):
            os.unlink(ticket.name, dir_fd=dfd)
        if claim.envelope is not None:
            self._ids.forget(claim.envelope.envelope_id, claim.role, ticket.name)

    def release(self, claim: Claim) -> float:
        """Defer the envelope: its bytes count the deferral, its mtime is set to its next
        attempt, then it moves to ``deferred/`` (rewritten in the claim folder first, so a
        crash at any point leaves one copy)."""
        ticket = Path(claim.ticket)
        now = self._clock()
        try:
            data = read_file(ticket, self._runtime)
        except FileNotFoundError:
            return now  # recovered meanwhile: it waits again, nothing to move
        _, deferrals = deferral_view(data)
        next_attempt = now + self._retry.delay(deferrals + 1)
        write_atomic(ticket, with_deferrals(data, deferrals + 1), runtime=self._runtime)
        with folder(ticket.parent, self._runtime, create=False) as dfd:
            os.utime(ticket.name, (next_attempt, next_attempt), dir_fd=dfd, follow_symlinks=False)
        self._move(ticket.parent, ticket.name, self._deferred(claim.role))
        return next_attempt

    def reject(self, claim: Claim, reason: str) -> None:
        ticket = Path(claim.ticket)
        rejected = self._root / "rejected"
        name = f"{claim.role}-{ticket.name}"
        if self._move(ticket.parent, ticket.name, rejected, name):
            write_atomic(rejected / f"{name}.reason", reason.encode() + b"\n",
                         runtime=self._runtime)  # fmt: skip

    def drop(self, request_id: str) -> int:
        """Remove the waiting and deferred envelopes of ``request_id``; returns how many."""
        dropped = 0
        for role in self.roles:
            for place in (self.workspace.role_queue(role), self._deferred(role)):
                names = [n for n in self._names(place) if _request_of(n) == request_id]
                if not names:
                    continue
                with folder(place, self._runtime, create=False) as dfd:
                    for name in names:
                        with contextlib.suppress(FileNotFoundError):
                            envelope_id = self._ids.id_in(place / name)
                            os.unlink(name, dir_fd=dfd)
                            dropped += 1
                            if envelope_id:
                                self._ids.forget(envelope_id, role, name)
        return dropped

    # --- the worker's lease ---------------------------------------------------------------

    def renew(self) -> bool:
        """Renew this worker's lease (creating it the first time). ``False`` when it cannot
        be written (a full disk, say): the worker goes on and tries again next time."""
        try:
            with folder(self._workers, self._runtime) as dfd:
                try:
                    os.utime(self._lease.name, dir_fd=dfd, follow_symlinks=False)
                    return True
                except FileNotFoundError:
                    pass
            info = {"worker": self.worker_id, "host": platform.node(), "pid": os.getpid()}
            write_atomic(self._lease, pretty_json_bytes(info) + b"\n", runtime=self._runtime,
                         durable=False)  # fmt: skip
        except (OSError, TeamsRuntimeError):
            return False
        return True

    def restore_deferred(self) -> int:
        """Move the deferred envelopes whose next attempt (their mtime) has come back to the
        waiting folders; how many. A rename keeps the mtime, which is past by then."""
        restored = 0
        now = self._clock()
        for role in self.roles:
            deferred = self._deferred(role)
            for name in self._deferred_names(deferred):
                due = self._mtime(deferred, name)
                if due is not None and due <= now:
                    restored += self._move(deferred, name, self.workspace.role_queue(role))
        return restored

    def _mtime(self, place: Path, name: str) -> float | None:
        try:
            with folder(place, self._runtime, create=False) as dfd:
                return os.stat(name, dir_fd=dfd, follow_symlinks=False).st_mtime
        except FileNotFoundError:
            return None  # taken meanwhile

    def retire(self) -> None:
        """Stop working: this worker's claims wait again, its lease goes."""
        self._return_claims(self._mine)
        self._leases.remove(self.worker_id)

    def _recover_expired(self) -> None:
        now = time.time()
        if now - self._last_recovery < min(self.lease_seconds / 4, 5.0):
            return
        self._last_recovery = now
        for worker in self._subfolders(self._claimed):
            if worker != self.worker_id and self._expired(worker, now):
                self._return_claims(self._claimed / worker)
                self._leases.remove(worker)
        for worker in self._leases.workers():  # dead workers that held nothing
            age = self._leases.age(worker, now)
            if worker != self.worker_id and (age or 0) > STALE_LEASES * self.lease_seconds:
                self._leases.remove(worker)

    def _expired(self, worker: str, now: float) -> bool:
        try:
            renewed = self._leases.renewed(worker)
        except FileNotFoundError:
            return True  # claims without a lease: a worker that died before its first renewal
        except TeamsRuntimeError:
            return False  # the leases cannot be read: never take a live worker's claims
        return now - renewed > self.lease_seconds

    def _return_claims(self, worker_folder: Path) -> None:
        for role in self._subfolders(worker_folder):
            if role in self.roles:
                held = worker_folder / role
                for name in self._names(held):
                    self._move(held, name, self.workspace.role_queue(role))
        with contextlib.suppress(OSError, TeamsRuntimeError):
            for role in self._subfolders(worker_folder):
                with folder(worker_folder, self._runtime, create=False) as dfd:
                    os.rmdir(role, dir_fd=dfd)
            with folder(self._claimed, self._runtime, create=False) as dfd:
                os.rmdir(worker_folder.name, dir_fd=dfd)

    # --- folders, read without following links ---------------------------------------------

    def _deferred_names(self, place: Path) -> list[str]:
        """The deferred envelopes of a folder: only names the queue gives (another program's
        file there is a stray, which ``status`` names and no worker restores)."""
        return [name for name in self._names(place) if queued_request_id(name) is not None]

    def _names(self, place: Path) -> list[str]:
        """The envelope files of a folder, oldest first (none if it does not exist)."""
        try:
            with folder(place, self._runtime, create=False) as dfd:
                names = os.listdir(dfd)
        except FileNotFoundError:
            return []
        return sorted(n for n in names if n.endswith(".json") and not n.startswith("."))

    def _subfolders(self, place: Path) -> list[str]:
        """The real folders in ``place`` (a stray file or a link there is passed over)."""
        try:
            with folder(place, self._runtime, create=False) as dfd, os.scandir(dfd) as entries:
                return sorted(
                    entry.name
                    for entry in entries
                    if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")
                )
        except FileNotFoundError:
            return []

    def _move(self, source: Path, name: str, target: Path, new_name: str | None = None) -> int:
        """Move one envelope between queue folders; 0 if someone else moved it first."""
        try:
            with (
                folder(source, self._runtime, create=False) as src,
                folder(target, self._runtime) as dst,
            ):
                # A planted link at the target name is replaced, never followed.
                os.rename(name, new_name or name, src_dir_fd=src, dst_dir_fd=dst)
        except FileNotFoundError:
            return 0
        return 1

    # --- what is where --------------------------------------------------------------------

    def counts(self) -> dict[str, int]:
        snapshot = self.snapshot()
        return {
            role: snapshot.waiting[role] + snapshot.claimed[role] + snapshot.deferred[role]
            for role in self.roles
        }

    def snapshot(self) -> QueueSnapshot:
        """Waiting, claimed and deferred envelopes per role, each deferred envelope, and the
        workers: every live one, and a dead one while its claims wait to be returned."""
        now = time.time()
        waiting = self.waiting()
        deferred = {role: len(self._deferred_names(self._deferred(role))) for role in self.roles}
        claimed = dict.fromkeys(self.roles, 0)
        leases = set(self._leases.workers())
        workers = []
        for name in sorted(set(self._subfolders(self._claimed)) | leases):
            holds = []
            for role in self.roles:
                for envelope in self._names(self._claimed / name / role):
                    claimed[role] += 1
                    holds.append(f"{role}:{_request_of(envelope)}")
            age = self._leases.age(name, now)
            alive = age is not None and age <= self.lease_seconds
            # A dead worker is shown only while its claims wait to be returned (by the next
            # worker that looks for work): a lease that is only a leftover is not a worker.
            if alive or holds:
                workers.append(WorkerLease(worker=name, alive=alive, lease_age=age, holds=holds))
        return QueueSnapshot(
            waiting=waiting,
            claimed=claimed,
            deferred=deferred,
            workers=workers,
            deferred_envelopes=self._deferred_envelopes(),
        )

    def _deferred_envelopes(self) -> list[DeferredEnvelope]:
        found = []
        for role in self.roles:
            place = self._deferred(role)
            for name in self._deferred_names(place):
                due = self._mtime(place, name)
                try:
                    envelope_id, deferrals = deferral_view(read_file(place / name, self._runtime))
                except OSError:
                    continue  # taken meanwhile, or not a file a worker can read
                if due is None:
                    continue
                found.append(
                    DeferredEnvelope(
                        role=role,
                        request_id=_request_of(name),
                        envelope_id=envelope_id or f"env-{name.removesuffix('.json')}",
                        deferrals=deferrals,
                        next_attempt=due,
                    )
                )
        return sorted(found, key=lambda envelope: envelope.next_attempt)

    def waiting(self) -> dict[str, int]:
        """A listing of each role's queue folder."""
        return {role: len(self._names(self.workspace.role_queue(role))) for role in self.roles}

    def strays(self) -> list[Stray]:
        return queue_strays(self.workspace, self.roles) + marker_strays(self.workspace)

    def set_aside_strays(self) -> int:
        return set_aside_unread(self.workspace, self.roles)


def _load(path: Path, role: str, runtime: Path, shown: Path) -> MessageEnvelope:
    """Read one envelope file; ``EnvelopeError`` names it as ``shown`` (where it was queued)."""
    try:
        data = read_file(path, runtime)
    except OSError as exc:
        raise EnvelopeError(f"{shown}: cannot be read ({exc.strerror}).") from None
    return decode_envelope(data, role, str(shown), f"env-{path.stem}")
