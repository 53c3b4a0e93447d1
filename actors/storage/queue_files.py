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

from teams_runtime.actors.storage.files import write_atomic
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
        """Queue an envelope for ``envelope.target`` (written atomically and fsynced)."""
        check_request_id(envelope.request_id)
        folder = self.workspace.role_queue(envelope.target)
        folder.mkdir(parents=True, exist_ok=True)
        # Names sort in arrival order: nanoseconds, then a random tie-breaker.
        name = f"{time.time_ns():020d}-{secrets.token_hex(3)}-{envelope.request_id}.json"
        path = folder / name
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
        """Read one envelope; ``EnvelopeError`` names the file and what is wrong."""
        try:
            envelope = _DECODER.decode(path.read_bytes())
        except OSError as exc:
            raise EnvelopeError(f"{path}: cannot be read ({exc.strerror}).") from None
        except msgspec.ValidationError as exc:
            raise EnvelopeError(f"{path}: not a valid envelope ({exc}).") from None
        except msgspec.DecodeError as exc:
            raise EnvelopeError(f"{path}: not valid JSON ({exc}).") from None
        if envelope.target != role:
            raise EnvelopeError(f"{path}: target is {envelope.target!r}, not {role!r}.")
        try:
            check_request_id(envelope.request_id)
        except TeamsRuntimeError as exc:
            raise EnvelopeError(f"{path}: {exc}") from None
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
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{path.parent.name}-{path.name}"
        os.replace(path, target)
        target.with_name(target.name + ".reason").write_text(reason + "\n", encoding="utf-8")
        self._taken.discard(claim.ticket)

    def counts(self) -> dict[str, int]:
        return {role: len(self._waiting(role)) for role in ROLES}
