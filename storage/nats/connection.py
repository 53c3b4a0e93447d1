"""One connection to a NATS JetStream server, usable from blocking code.

The stores are blocking (the actors call them from worker threads), and ``nats-py`` is an
asyncio client. A ``NatsConnection`` runs the client on an event loop of its own, in a daemon
thread, and blocking callers hand it coroutines (``call``). Calls that fail because the server
is away (restarting, a network blip) are retried until ``retry_seconds`` pass: the client
reconnects by itself meanwhile, so a worker rides out a server restart.

It also creates what the backend needs on the server (``ensure_layout``) when it is missing, and
never changes what exists: a host whose config differs (``queue.lease_seconds``, ``replicas``)
reads the settings the team's queue was made with instead of imposing its own. The names are in
``NatsNames`` and in docs/scaling.md.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, cast

import msgspec
import nats
import nats.errors
import nats.js.errors
from loguru import logger
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.kv import KeyValue

from teams_runtime.codecs.config import NatsSettings
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import BackendError

__all__ = [
    "NatsConnection",
    "NatsNames",
    "busy",
    "close_shared_connections",
    "id_of_token",
    "shared_connection",
    "token_of",
    "wrong_last_sequence",
]

_T = TypeVar("_T")

# Errors that mean "the server is not answering right now", not "the request was wrong".
_TRANSIENT: tuple[type[BaseException], ...] = (
    nats.errors.TimeoutError,
    asyncio.TimeoutError,
    nats.errors.NoRespondersError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.js.errors.NoStreamResponseError,
    nats.js.errors.ServiceUnavailableError,
)
_WRONG_LAST_SEQUENCE = 10071  # JetStream: a publish's expected last sequence did not hold
# JetStream could not store a message: a limit of the stream (max_bytes, max_msgs) was reached
# or the server's disk failed. Sent with code 503 like "unavailable", but retrying will not help.
_STORE_FAILED = 10077
_STREAM_NAME_IN_USE = 10058  # the stream exists (with another config): keep it as it is
_CONSUMER_EXISTS = 10148  # the consumer exists with another config: keep it as it is
_STREAM_NOT_FOUND = 10059
_CONSUMER_NOT_FOUND = 10014
_REPLICAS_NEED_A_CLUSTER = 10074  # "replicas > 1 not supported in non-clustered mode"
_JETSTREAM_NOT_ENABLED = (10039, 10076)  # for the account; on the server
_LISTING_TRIES = 5  # listings of a KV bucket before an empty one is believed


_TOKEN_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def token_of(value: str) -> str:
    """A request id, role or worker id as one subject token and KV key, reversibly: ASCII
    letters, digits, ``_`` and ``-`` stay as they are; every other character becomes ``=`` and
    two hex digits per byte of its UTF-8 (``.`` is ``=2E``, ``요`` is ``=EC=9A=94``). KV keys
    allow only ``[-/_=.A-Za-z0-9]`` and subject tokens no ``.``, ``*``, ``>`` or whitespace."""
    return "".join(
        char
        if char in _TOKEN_SAFE
        else "".join(f"={byte:02X}" for byte in char.encode("utf-8", "surrogatepass"))
        for char in value
    )


def id_of_token(token: str) -> str:
    """The id a ``token_of`` token stands for."""
    parts = token.split("=")
    data = bytearray(parts[0].encode())
    for part in parts[1:]:
        data.append(int(part[:2], 16))
        data += part[2:].encode()
    return data.decode("utf-8", "surrogatepass")


class NatsNames(msgspec.Struct, frozen=True):
    """The streams, buckets, consumers and subjects of one team on the server (by prefix).

    Envelopes stand on ``<prefix>.<kind>.<role>.<request token>`` (kind ``q``: waiting,
    ``deferred``, ``rejected``): the builders take the role and a ``token_of`` token, ``*`` (the
    default) for any; ``role_of`` and ``request_token_of`` read them back from a subject."""

    prefix: str

    @property
    def events(self) -> str:
        return f"{self.prefix}_events"

    @property
    def heads(self) -> str:
        return f"{self.prefix}_records"

    @property
    def queue(self) -> str:
        return f"{self.prefix}_queue"

    @property
    def rejected(self) -> str:
        return f"{self.prefix}_rejected"

    @property
    def workers(self) -> str:
        return f"{self.prefix}_workers"

    def event_subject(self, request_id: str, role: str | None) -> str:
        return f"{self.prefix}.req.{token_of(request_id)}.ev.{token_of(role) if role else '_'}"

    def request_events(self, request_id: str) -> str:
        return f"{self.prefix}.req.{token_of(request_id)}.ev.*"

    @property
    def every_event(self) -> str:
        return f"{self.prefix}.req.*.ev.*"

    def waiting_subject(self, role: str = "*", token: str = "*") -> str:
        return f"{self.prefix}.q.{role}.{token}"

    def deferred_subject(self, role: str = "*", token: str = "*") -> str:
        return f"{self.prefix}.deferred.{role}.{token}"

    def rejected_subject(self, role: str = "*", token: str = "*") -> str:
        return f"{self.prefix}.rejected.{role}.{token}"

    @property
    def every_waiting(self) -> str:
        return f"{self.prefix}.q.>"

    @property
    def every_deferred(self) -> str:
        return f"{self.prefix}.deferred.>"

    @property
    def every_rejected(self) -> str:
        return f"{self.prefix}.rejected.>"

    def role_of(self, subject: str) -> str:
        """The role of an envelope's subject (``waiting``, ``deferred``, ``rejected``)."""
        return subject.split(".", 3)[2]

    def request_token_of(self, subject: str) -> str:
        """The request token of an envelope's subject."""
        return subject.split(".", 3)[3]

    def role_consumer(self, role: str) -> str:
        return f"{self.prefix}_q_{role}"

    @property
    def deferred_consumer(self) -> str:
        return f"{self.prefix}_deferred"


class NatsConnection:
    """A connected NATS client on its own event loop thread; ``call`` runs a coroutine there."""

    def __init__(self, settings: NatsSettings, *, queue_ack_seconds: float = 60.0) -> None:
        """Connect and make sure the team's streams, buckets and consumers exist.

        ``queue_ack_seconds`` (``queue.lease_seconds``) is the ack wait of role consumers this
        connection creates; when they exist, ``queue_ack_seconds`` becomes the one they have.
        Raises ``BackendError`` (one line, the URL without credentials) when the server cannot
        be reached, refuses the credentials, has no JetStream, or refuses the layout.
        """
        self.settings = settings
        self.names = NatsNames(settings.prefix)
        self.wanted_ack_seconds = queue_ack_seconds
        self.queue_ack_seconds = queue_ack_seconds
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=f"nats {settings.shown_url}", daemon=True
        )
        self._thread.start()
        self._reconnected: list[Callable[[], None]] = []
        self._connect_errors: list[Exception] = []
        self._closed = False
        self._attached: dict[Callable[..., Any], Any] = {}
        self._attached_lock = threading.Lock()
        try:
            self.client: Client = self._submit(
                self._connect(), timeout=settings.connect_seconds + 5
            )
        except Exception as exc:
            self._stop_loop()
            raise self._unreachable(exc) from None
        self.js: JetStreamContext = self.client.jetstream(timeout=5.0)
        try:
            self._submit(self._check_jetstream(), timeout=settings.connect_seconds + 10)
            self.call(self._ensure_layout)
        except BaseException:
            self.close()
            raise

    # --- running coroutines from blocking code -----------------------------------------------

    def _submit(self, coro: Coroutine[Any, Any, _T], timeout: float) -> _T:
        future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise

    def call(
        self,
        make: Callable[[], Awaitable[_T]],
        *,
        what: str = "a request",
        patience: float | None = None,
    ) -> _T:
        """Run ``make()`` on the connection's loop and wait for it; retry while the server is
        away, for up to ``patience`` seconds (``retry_seconds`` unless given). Raises
        ``BackendError`` naming ``what`` when it stays away, and when the server refuses (an
        ``APIError`` or another client error escaping ``make()``: one a coroutine catches
        itself is its own business). ``make`` must be safe to run again."""
        patience = self.settings.retry_seconds if patience is None else patience
        deadline = time.monotonic() + patience
        delay = 0.05
        while True:

            async def run() -> _T:
                return await make()

            try:
                return self._submit(run(), timeout=self.settings.retry_seconds + 10)
            except _TRANSIENT as exc:
                if isinstance(exc, nats.js.errors.APIError) and not busy(exc):
                    raise self._refusal(exc, what) from None
                if self._closed or time.monotonic() > deadline:
                    raise BackendError(
                        f"the NATS server at {self.settings.shown_url} did not answer {what} "
                        f"for {patience:g} s ({_reason(exc)}); is it running?"
                    ) from None
                logger.debug("NATS {} failed ({}); retrying", what, type(exc).__name__)
            except nats.js.errors.APIError as exc:  # a refusal, not the server being away
                raise self._refusal(exc, what) from None
            except nats.errors.ConnectionClosedError:
                raise BackendError(
                    f"the connection to the NATS server at {self.settings.shown_url} is closed."
                ) from None
            except nats.errors.Error as exc:
                raise BackendError(
                    f"{what} on the NATS server at {self.settings.shown_url} failed "
                    f"({type(exc).__name__}: {str(exc).strip() or 'no reason given'})."
                ) from None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)

    def _refusal(self, exc: nats.js.errors.APIError, what: str) -> BackendError:
        return BackendError(
            f"the NATS server at {self.settings.shown_url} refused {what} "
            f"({exc.description or 'no reason given'}, err_code {exc.err_code})."
        )

    def attached(self, kind: Callable[[NatsConnection], _T]) -> _T:
        """The connection's one ``kind(self)``, made on first use: every record store of a
        process shares one (one watch of the heads), and a new connection (after this one
        closed) makes its own."""
        with self._attached_lock:
            if kind not in self._attached:
                self._attached[kind] = kind(self)
            return cast(_T, self._attached[kind])

    async def bucket_keys(self, kv: KeyValue, bucket: str) -> list[str]:
        """Every key of the KV ``bucket``. nats-py's ``keys()`` watches the bucket and can end
        its listing before the first entry arrives (seen under load): an empty answer for a
        bucket that holds messages is asked again before it is believed."""
        for _ in range(_LISTING_TRIES):
            try:
                return await kv.keys()
            except nats.js.errors.NoKeysError:
                info = await self.js.stream_info(f"KV_{bucket}")
                if not info.state.messages:
                    return []
        return []

    def on_reconnect(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the loop thread) whenever the client reconnects."""
        self._reconnected.append(callback)

    # --- connecting -----------------------------------------------------------------------

    async def _connect(self) -> Client:
        async def disconnected() -> None:
            logger.warning("NATS connection to {} lost; reconnecting", self.settings.shown_url)

        async def reconnected() -> None:
            logger.info("NATS connection to {} back", self.settings.shown_url)
            for callback in self._reconnected:
                callback()

        async def error(exc: Exception) -> None:
            # Kept while connecting: "Authorization Violation" arrives here, and the connect
            # itself then fails with a bare NoServersError.
            if len(self._connect_errors) < 16:
                self._connect_errors.append(exc)
            logger.debug("NATS client error: {}", type(exc).__name__)

        client = await nats.connect(
            servers=[part.strip() for part in self.settings.url.split(",")],
            name="teams-runtime",
            connect_timeout=self.settings.connect_seconds,
            allow_reconnect=True,
            max_reconnect_attempts=1,  # starting: a server that is not there is an error now
            reconnect_time_wait=0.5,
            disconnected_cb=disconnected,
            reconnected_cb=reconnected,
            error_cb=error,
        )
        client.options["max_reconnect_attempts"] = -1  # running: outlive a server restart
        return client

    async def _check_jetstream(self) -> None:
        """Refuse at once a server (or account) without JetStream: every later call would
        otherwise find no responder and be retried for ``retry_seconds``."""
        try:
            await self.api("INFO", {})
        except nats.errors.NoRespondersError:
            raise BackendError(
                f"the NATS server at {self.settings.shown_url} answers, but JetStream is not "
                "enabled on it; start it with -js (or a jetstream block in its config file): "
                "the nats backend keeps requests and the queue in JetStream."
            ) from None
        except nats.js.errors.APIError as exc:
            if exc.err_code in _JETSTREAM_NOT_ENABLED:
                raise BackendError(
                    f"the NATS server at {self.settings.shown_url} does not enable JetStream "
                    f"for this account ({exc.description}); enable it for the account the "
                    "credentials in backend.nats.url log in to."
                ) from None
        except _TRANSIENT:
            pass  # slow to answer: the layout's calls retry it for retry_seconds

    async def _ensure_layout(self) -> None:
        """Create the streams, buckets and consumers that are missing; never change one that
        exists (another host made it, maybe with other settings: they stay the team's), and
        read the ack wait of the role consumers into ``queue_ack_seconds``."""
        names, replicas = self.names, self.settings.replicas
        try:
            await self._ensure_stream(
                StreamConfig(
                    name=names.events,
                    subjects=[names.every_event],
                    storage=StorageType.FILE,
                    num_replicas=replicas,
                    allow_direct=True,
                )
            )
            await self._ensure_stream(
                StreamConfig(
                    name=names.queue,
                    subjects=[names.every_waiting, names.every_deferred],
                    retention=RetentionPolicy.WORK_QUEUE,
                    storage=StorageType.FILE,
                    num_replicas=replicas,
                )
            )
            await self._ensure_stream(
                StreamConfig(
                    name=names.rejected,
                    subjects=[names.every_rejected],
                    storage=StorageType.FILE,
                    num_replicas=replicas,
                )
            )
            for bucket in (names.heads, names.workers):
                await self._ensure_bucket(bucket)
            ack_waits = await asyncio.gather(
                *(
                    self._ensure_consumer(names.role_consumer(role), names.waiting_subject(role))
                    for role in ROLES
                ),
                self._ensure_consumer(names.deferred_consumer, names.every_deferred),
            )
        except nats.js.errors.APIError as exc:
            if exc.code == 503:
                raise  # JetStream busy (a cluster electing a leader): `call` retries
            raise self._refused(exc) from None
        # The shortest, should a person have edited one role's consumer: renewing within it
        # keeps every claim.
        # (A worker whose queue.lease_seconds differs says so when its team starts, once
        # logging is set up: actors/team.py.)
        self.queue_ack_seconds = min(ack_waits[: len(ROLES)])

    def _refused(self, exc: nats.js.errors.APIError) -> BackendError:
        """The one line for the server refusing to create the layout (never a traceback)."""
        if exc.err_code == _REPLICAS_NEED_A_CLUSTER:
            return BackendError(
                f"team_runtime.yaml backend.nats.replicas is {self.settings.replicas}, but the "
                f"NATS server at {self.settings.shown_url} is not part of a cluster "
                f"({exc.description}); set replicas: 1, or run a cluster of at least "
                f"{self.settings.replicas} servers (docs/scaling.md)."
            )
        return BackendError(
            f"the NATS server at {self.settings.shown_url} refused to set up the team's streams "
            f"(prefix {self.names.prefix}): {exc.description} (JetStream error {exc.err_code}); "
            "see docs/scaling.md."
        )

    async def _ensure_stream(self, config: StreamConfig) -> None:
        assert config.name is not None
        try:
            await self.js.stream_info(config.name)
            return
        except nats.js.errors.NotFoundError as exc:
            if exc.err_code != _STREAM_NOT_FOUND:
                raise
        try:
            await self.js.add_stream(config)
        except nats.js.errors.APIError as exc:
            if exc.err_code != _STREAM_NAME_IN_USE:  # made by another host meanwhile
                raise

    async def _ensure_bucket(self, bucket: str) -> None:
        try:
            await self.js.key_value(bucket)
        except nats.js.errors.BucketNotFoundError:
            try:
                await self.js.create_key_value(
                    bucket=bucket, history=1, replicas=self.settings.replicas
                )
            except nats.js.errors.APIError as exc:
                if exc.err_code != _STREAM_NAME_IN_USE:  # made by another host meanwhile
                    raise

    async def _ensure_consumer(self, name: str, subject: str) -> float:
        """Create the durable pull consumer ``name`` unless it exists; its ack wait."""
        try:
            info = await self.js.consumer_info(self.names.queue, name)
            return float(info.config.ack_wait or 0) or self.wanted_ack_seconds
        except nats.js.errors.NotFoundError as exc:
            if exc.err_code != _CONSUMER_NOT_FOUND:
                raise
        config = ConsumerConfig(
            durable_name=name,
            filter_subject=subject,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=self.wanted_ack_seconds,
            max_deliver=-1,
            max_ack_pending=-1,
        )
        # `action: create`: made only if missing. Without it the server updates an existing
        # consumer to this config, and the last host to connect would set everyone's ack wait.
        request = {"stream_name": self.names.queue, "config": config.as_dict(), "action": "create"}
        try:
            await self.api(f"CONSUMER.CREATE.{self.names.queue}.{name}", request)
        except nats.js.errors.APIError as exc:
            if exc.err_code != _CONSUMER_EXISTS:  # made by another host meanwhile
                raise
            info = await self.js.consumer_info(self.names.queue, name)
            return float(info.config.ack_wait or 0) or self.wanted_ack_seconds
        return self.wanted_ack_seconds

    def _unreachable(self, exc: Exception) -> BackendError:
        """The one line for a connect that failed: refused credentials, or no server."""
        if any(_is_auth_refusal(error) for error in (exc, *self._connect_errors)):
            if "@" in self.settings.url:
                return BackendError(
                    f"the NATS server at {self.settings.shown_url} refused the credentials in "
                    "backend.nats.url (authorization violation); check the user and password "
                    "(or token) there in team_runtime.yaml."
                )
            return BackendError(
                f"the NATS server at {self.settings.shown_url} requires credentials "
                "(authorization violation); write them in backend.nats.url in "
                "team_runtime.yaml as nats://USER:PASSWORD@HOST:PORT."
            )
        return BackendError(
            f"cannot reach the NATS server at {self.settings.shown_url} ({_reason(exc)}); start "
            "it, or check backend.nats.url in team_runtime.yaml."
        )

    # --- JetStream calls the stores share ----------------------------------------------------

    async def api(self, subject: str, request: dict[str, Any]) -> dict[str, Any]:
        """One JetStream API request (``$JS.API.<subject>``); ``APIError`` on an error reply."""
        reply = await self.client.request(
            f"$JS.API.{subject}", json.dumps(request).encode(), timeout=5.0
        )
        answer: dict[str, Any] = json.loads(reply.data)
        if "error" in answer:
            raise nats.js.errors.APIError.from_error(answer["error"])
        return answer

    # --- closing ---------------------------------------------------------------------------

    def close(self) -> None:
        """Drain and close the client, then stop the loop thread (idempotent)."""
        if self._closed:
            return
        self._closed = True
        with contextlib.suppress(Exception):
            self._submit(self.client.close(), timeout=5)
        with contextlib.suppress(Exception):
            self._submit(_cancel_leftover_tasks(), timeout=5)
        self._stop_loop()

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        if not self._thread.is_alive():
            self._loop.close()


async def _cancel_leftover_tasks() -> None:
    """End the client's own helper tasks (ordered consumers' checks) before the loop stops."""
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def busy(exc: nats.js.errors.APIError) -> bool:
    """Whether JetStream turned a request away for now (503: no leader yet, catching up), which
    ``call`` retries, rather than refused it (a limit reached, a bad request: 503 too for a
    full stream)."""
    return exc.code == 503 and exc.err_code != _STORE_FAILED


def wrong_last_sequence(exc: BaseException) -> bool:
    """Whether ``exc`` is JetStream refusing a publish whose expected last sequence moved."""
    return isinstance(exc, nats.js.errors.APIError) and exc.err_code == _WRONG_LAST_SEQUENCE


def _is_auth_refusal(exc: BaseException) -> bool:
    """Whether a connect error is the server refusing the credentials (nats-py reports
    "Authorization Violation" as a plain ``Error`` through the error callback)."""
    text = str(exc).lower()
    return isinstance(exc, nats.errors.AuthorizationError) or any(
        words in text for words in ("authorization violation", "authentication")
    )


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().strip(":").strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


_SHARED: dict[tuple[NatsSettings, float], NatsConnection] = {}
_SHARED_LOCK = threading.Lock()


def shared_connection(settings: NatsSettings, *, queue_ack_seconds: float = 60.0) -> NatsConnection:
    """The process's connection for ``settings`` (made on first use, closed at exit): every
    store and queue of a process share it."""
    key = (settings, queue_ack_seconds)
    with _SHARED_LOCK:
        connection = _SHARED.get(key)
        if connection is None or connection._closed:
            connection = _SHARED[key] = NatsConnection(
                settings, queue_ack_seconds=queue_ack_seconds
            )
        return connection


@atexit.register
def close_shared_connections() -> None:
    """Close the process's shared connections (at exit, or when a test is done with them)."""
    with _SHARED_LOCK:
        connections = list(_SHARED.values())
        _SHARED.clear()
    for connection in connections:
        connection.close()
