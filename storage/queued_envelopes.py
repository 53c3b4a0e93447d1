"""Queued envelopes, whatever keeps them: decoding one a worker claimed, naming a worker."""

from __future__ import annotations

import os
import platform
import re

import msgspec

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.request_ids import with_checked_request_id
from teams_runtime.exceptions import EnvelopeError, TeamsRuntimeError

__all__ = ["decode_envelope", "new_worker_id"]


_DECODER = msgspec.json.Decoder(MessageEnvelope)


_NOT_ID = re.compile(r"[^A-Za-z0-9_.-]+")


def new_worker_id() -> str:
    """A worker name unique across hosts and restarts: host, pid and a random part."""
    host = _NOT_ID.sub("-", platform.node())[:40] or "host"
    return f"{host}-{os.getpid()}-{os.urandom(3).hex()}"


def decode_envelope(data: bytes, role: str, shown: str, default_id: str) -> MessageEnvelope:
    """Decode queued envelope bytes for ``role``; ``EnvelopeError`` names the envelope (as
    ``shown``) and the kind of problem, never a value from it (the text goes to logs). An
    envelope without an id gets ``default_id``."""
    try:
        envelope = _DECODER.decode(data)
    except msgspec.ValidationError as exc:
        # msgspec names the field and the expected type, never the value.
        raise EnvelopeError(f"{shown}: not a valid envelope ({exc}).") from None
    except (msgspec.DecodeError, RecursionError):
        raise EnvelopeError(f"{shown}: not valid JSON.") from None
    if envelope.target != role:
        raise EnvelopeError(f"{shown}: its target is not the {role} role of this folder.")
    try:
        envelope = with_checked_request_id(envelope)  # written by hand in NFD: records are NFC
    except TeamsRuntimeError:
        raise EnvelopeError(f"{shown}: its request id is not a safe file name.") from None
    if not envelope.envelope_id:  # queued before envelopes had ids: its name is one
        envelope = msgspec.structs.replace(envelope, envelope_id=default_id)
    return envelope
