"""Envelopes waiting for roles, one file each under ``.teams_runtime/queue/<role>/``.

``FileWorkQueue`` is the ``WorkQueue`` of the file backend. The queue is what makes work
durable: an envelope file is written atomically (``files.write_atomic``) before anyone is told
about it, and removed only after its outcome is persisted in the request record. A crash in
between means the envelope is handled again on the next run (at least once, never lost).
Envelopes that cannot be read are moved to ``queue/rejected/`` with a reason, never deleted.

Claims are this queue object's own: it does not hand out an envelope it has handed out
already (until ``done``, ``release`` or ``reject``), and one it released stays queued for the
next run. Several processes on one workspace each see every envelope.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path

import msgspec

from teams_runtime.actors.storage.files import ensure_folder, write_atomic
from teams_runtime.actors.storage.protocols import Claim
from teams_runtime.actors.storage.workspace import Workspace
from teams_runtime.codecs.formats import pretty_json_bytes
from teams_runtime.codecs.messages import MessageEnvelope
from teams_runtime.codecs.request_ids import check_request_id
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import EnvelopeError, TeamsRuntimeError

__all__ = ["FileWorkQueue"]

_DECODER = msgspec.json.Decoder(MessageEnvelope)
_REJECTED = "rejected"


class FileWorkQueue:
    """The envelope folders of one workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace
        self._taken: set[str] = set()  # claimed, or released for a later run

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

    def _waiting(self, role: str) -> list[Path]:
        folder = self.workspace.role_queue(role)
        try:
            names = sorted(name for name in os.listdir(folder) if not name.startswith("."))
        except FileNotFoundError:
            return []
        return [folder / name for name in names if name.endswith(".json")]

    def claim(self, role: str, limit: int) -> list[Claim]:
        claims: list[Claim] = []
        for path in self._waiting(role):
            if len(claims) >= limit:
                break
            ticket = str(path)
            if ticket in self._taken:
                continue
            self._taken.add(ticket)
            try:
                claims.append(Claim(ticket, role, self._load(path, role)))
            except EnvelopeError as exc:
                claims.append(Claim(ticket, role, None, str(exc)))
        return claims

    def _load(self, path: Path, role: str) -> MessageEnvelope:
        """Read one envelope; ``EnvelopeError`` names the file and the kind of problem, never
        a value from it (the text goes to logs)."""
        try:
            envelope = _DECODER.decode(_read_no_follow(path))
        except OSError as exc:
            raise EnvelopeError(f"{path}: cannot be read ({exc.strerror}).") from None
        except msgspec.ValidationError as exc:
            # msgspec names the field and the expected type, never the value.
            raise EnvelopeError(f"{path}: not a valid envelope ({exc}).") from None
        except (msgspec.DecodeError, RecursionError):
            raise EnvelopeError(f"{path}: not valid JSON.") from None
        if envelope.target != role:
            raise EnvelopeError(f"{path}: its target is not the {role} role of this folder.")
        try:
            check_request_id(envelope.request_id)
        except TeamsRuntimeError:
            raise EnvelopeError(f"{path}: its request id is not a safe file name.") from None
        if not envelope.envelope_id:  # queued before envelopes had ids: its file name is one
            envelope = msgspec.structs.replace(envelope, envelope_id=f"env-{path.stem}")
        return envelope

    def done(self, claim: Claim) -> None:
        Path(claim.ticket).unlink(missing_ok=True)
        self._taken.discard(claim.ticket)

    def release(self, claim: Claim) -> None:
        # Stays in _taken: this worker leaves it for the next run instead of retrying now.
        return None

    def reject(self, claim: Claim, reason: str) -> None:
        path = Path(claim.ticket)
        folder = self.workspace.queue_dir / _REJECTED
        ensure_folder(folder, self.workspace.runtime_dir)
        target = folder / f"{path.parent.name}-{path.name}"
        os.replace(path, target)  # a planted link at `target` is replaced, never followed
        write_atomic(target.with_name(target.name + ".reason"), reason.encode() + b"\n")
        self._taken.discard(claim.ticket)

    def counts(self) -> dict[str, int]:
        return {role: len(self._waiting(role)) for role in ROLES}


def _read_no_follow(path: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    with open(fd, "rb") as handle:
        return handle.read()
