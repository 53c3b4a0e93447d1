"""What a NATS server's errors mean to the storage: the server away for now (retried), a
request turned away for now (retried), or refused (one ``StorageError`` line at once)."""

from __future__ import annotations

import asyncio

import nats.errors
import nats.js.errors

__all__ = [
    "CONSUMER_EXISTS",
    "CONSUMER_NOT_FOUND",
    "JETSTREAM_NOT_ENABLED",
    "NO_MESSAGE_FOUND",
    "REPLICAS_NEED_A_CLUSTER",
    "STREAM_NAME_IN_USE",
    "STREAM_NOT_FOUND",
    "TRANSIENT",
    "TTL_DISABLED",
    "busy",
    "is_auth_refusal",
    "reason_of",
    "wrong_last_sequence",
]

# Errors that mean "the server is not answering right now", not "the request was wrong".
TRANSIENT: tuple[type[BaseException], ...] = (
    nats.errors.TimeoutError,
    asyncio.TimeoutError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
)
NO_MESSAGE_FOUND = 10037  # a message get found nothing (at or after that sequence)
TTL_DISABLED = 10166  # JetStream: "per-message TTL is disabled" (a stream made without it)
_WRONG_LAST_SEQUENCE = 10071  # JetStream: a publish's expected last sequence did not hold
# JetStream could not store a message: a limit of the stream (max_bytes, max_msgs) was reached
# or the server's disk failed. Sent with code 503 like "unavailable", but retrying will not help.
_STORE_FAILED = 10077
STREAM_NAME_IN_USE = 10058  # the stream exists (with another config): keep it as it is
CONSUMER_EXISTS = 10148  # the consumer exists with another config: keep it as it is
STREAM_NOT_FOUND = 10059
CONSUMER_NOT_FOUND = 10014
REPLICAS_NEED_A_CLUSTER = 10074  # "replicas > 1 not supported in non-clustered mode"
JETSTREAM_NOT_ENABLED = (10039, 10076)  # for the account; on the server


def busy(exc: nats.js.errors.APIError) -> bool:
    """Whether JetStream turned a request away for now (503: no leader yet, catching up), which
    ``call`` retries, rather than refused it (a limit reached, a bad request: 503 too for a
    full stream)."""
    return exc.code == 503 and exc.err_code != _STORE_FAILED


def wrong_last_sequence(exc: BaseException) -> bool:
    """Whether ``exc`` is JetStream refusing a publish whose expected last sequence moved."""
    return isinstance(exc, nats.js.errors.APIError) and exc.err_code == _WRONG_LAST_SEQUENCE


def is_auth_refusal(exc: BaseException) -> bool:
    """Whether a connect error is the server refusing the credentials (nats-py reports
    "Authorization Violation" as a plain ``Error`` through the error callback)."""
    text = str(exc).lower()
    return isinstance(exc, nats.errors.AuthorizationError) or any(
        words in text for words in ("authorization violation", "authentication")
    )


def reason_of(exc: BaseException) -> str:
    """An error as a message shows it: its type, and its text when it has one."""
    text = str(exc).strip().strip(":").strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
