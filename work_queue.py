"""Envelopes waiting for roles, one file each under ``.teams_runtime/queue/<role>/``.

The queue is what makes work durable: an envelope file is written atomically before anyone is
told about it, and removed only after its outcome is persisted in the request record. A crash
in between means the envelope is handled again on the next run (at least once, never lost).
Envelopes that cannot be read are moved to ``queue/rejected/`` with a reason, never deleted.
Blocking functions: callers in coroutines run them in a worker thread.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from pathlib import Path

import msgspec

from teams_runtime.codecs.messages import MessageEnvelope
from teams_runtime.exceptions import EnvelopeError, TeamsRuntimeError
from teams_runtime.roles import ROLES
from teams_runtime.workspace import Workspace, check_request_id

__all__ = ["WorkQueue"]

_DECODER = msgspec.json.Decoder(MessageEnvelope)
_ENCODER = msgspec.json.Encoder()


class WorkQueue:
    """The envelope folders of one workspace."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def put(self, envelope: MessageEnvelope) -> Path:
        """Queue an envelope for ``envelope.target`` (written atomically and fsynced)."""
        check_request_id(envelope.request_id)
        folder = self.workspace.role_queue(envelope.target)
        folder.mkdir(parents=True, exist_ok=True)
        # Names sort in arrival order: nanoseconds, then a random tie-breaker.
        name = f"{time.time_ns():020d}-{secrets.token_hex(3)}-{envelope.request_id}.json"
        temp = folder / f".{name}.tmp"
        with open(temp, "wb") as handle:
            handle.write(msgspec.json.format(_ENCODER.encode(envelope), indent=2) + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
        path = folder / name
        os.replace(temp, path)
        return path

    def pending(self, role: str) -> list[Path]:
        """The envelopes waiting for ``role``, oldest first."""
        folder = self.workspace.role_queue(role)
        try:
            names = sorted(name for name in os.listdir(folder) if not name.startswith("."))
        except FileNotFoundError:
            return []
        return [folder / name for name in names if name.endswith(".json")]

    def pending_count(self) -> int:
        """How many envelopes wait for any role."""
        return sum(len(self.pending(role)) for role in ROLES)

    def load(self, path: Path, role: str) -> MessageEnvelope:
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

    def done(self, path: Path) -> None:
        """Remove a handled envelope (its outcome is already persisted)."""
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def reject(self, path: Path, reason: str) -> Path:
        """Move an unusable envelope aside with its reason; it is kept for a person to look at."""
        folder = self.workspace.queue_dir / "rejected"
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / f"{path.parent.name}-{path.name}"
        os.replace(path, target)
        target.with_name(target.name + ".reason").write_text(reason + "\n", encoding="utf-8")
        return target
