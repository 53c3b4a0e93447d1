"""A waiting answer: an envelope of a person's role (``model.backend: human``) that waits in
the team's inbox for ``teams-runtime answer``, instead of a model call.

Stored whole, as JSON, by each backend's inbox (``storage.protocols.AnswerInbox``); the
envelope is the one the worker claimed, so the person's result is recorded under the same key
a model's would be (its ``envelope_id``), and the prompt ``inbox show`` prints is the one a
model would get.
"""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.envelopes import MessageEnvelope

__all__ = ["WaitingAnswer", "decode_waiting", "encode_waiting", "waiting_name"]


class WaitingAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """One envelope waiting for a person: since when, and until when (``answer_within``)."""

    envelope: MessageEnvelope
    since: float  # when it began to wait (Unix time)
    due: float | None = None  # when answer_within runs out (Unix time); None: no limit
    # How many times answer_within ran out and `on_failure: requeue` let it wait again.
    renewals: int = 0

    @property
    def role(self) -> str:
        return self.envelope.target

    @property
    def request_id(self) -> str:
        return self.envelope.request_id

    @property
    def envelope_id(self) -> str:
        return self.envelope.envelope_id

    @property
    def from_role(self) -> str:
        """Who handed the request to the person (``user`` for a submit)."""
        return self.envelope.sender

    def overdue(self, now: float) -> bool:
        """Whether its ``answer_within`` has run out at ``now``."""
        return self.due is not None and self.due <= now


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(WaitingAnswer)


def encode_waiting(item: WaitingAnswer) -> bytes:
    """The stored bytes of a waiting answer."""
    return _ENCODER.encode(item)


def decode_waiting(data: bytes) -> WaitingAnswer | None:
    """A waiting answer from its stored bytes; ``None`` when they are not one (never raises:
    an inbox lists what it can read)."""
    try:
        return _DECODER.decode(data)
    except (msgspec.DecodeError, RecursionError):
        return None


def waiting_name(envelope_id: str) -> str:
    """A short, safe name for the waiting answer of an envelope (its id may hold anything):
    the same on every host, so one envelope waits once."""
    import hashlib  # here: a listing (`status`, start-up) names no new waiting answer

    return hashlib.blake2b(envelope_id.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
