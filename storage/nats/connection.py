"""One connection to a NATS JetStream server, owned by a scope on the runtime's event loop.

``open_connection`` connects on the event loop that enters it (anyio on asyncio), makes what the
backend needs on the server when it is missing (``layout``), and closes the client when the
scope ends: the Team's run, ``open_context``, a command (``storage.opening``). Nothing is
shared between scopes, and nothing outlives them.

The stores and queues are async, called on this loop (``run``): no thread between an actor
and the client. Calls that fail because the server is away (restarting, a network blip) are
retried until ``retry_seconds`` pass: the client reconnects by itself meanwhile, so a worker
rides out a server restart. Blocking code (a command, with the loop in anyio's blocking
portal) reaches them through ``call`` (``storage.blocking``'s views).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import anyio.lowlevel
import nats.errors
import nats.js.errors
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from teams_runtime._logs import logger
from teams_runtime.codecs.config import NatsSettings
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import StorageError
from teams_runtime.policy.backoff import backoff_delay
from teams_runtime.storage.nats._layout import ensure_layout
from teams_runtime.storage.nats._names import NatsNames
from teams_runtime.storage.nats._server_errors import (
    JETSTREAM_NOT_ENABLED,
    TRANSIENT,
    busy,
    is_auth_refusal,
    reason_of,
)

__all__ = ["GONE_AFTER_SECONDS", "NatsConnection", "open_connection"]

_T = TypeVar("_T")

_LISTING_TRIES = 5  # listings of a KV bucket before an empty one is believed
_CLOSING_SECONDS = 5.0  # how long closing waits for the client to say goodbye
_RETRY_FIRST = 0.05  # the first wait for a server away, doubled each time up to...
_RETRY_CAP = 1.0  # ...this (not jittered: the client reconnects by itself meanwhile)


@contextlib.asynccontextmanager
async def open_connection(
    settings: NatsSettings, *, queue_ack_seconds: float = 60.0, roles: Sequence[str] = ROLES
) -> AsyncIterator[NatsConnection]:
    """Connect to the server ``settings`` name, on the current event loop, for the block.

    Makes the team's streams, buckets and consumers that are missing (a consumer for each of
    ``roles``: the team's, ``TeamConfig.cast``). ``queue_ack_seconds``
    (``queue.lease_seconds``) is the ack wait of role consumers this connection creates; when
    they exist, ``queue_ack_seconds`` becomes the one they have. Raises ``StorageError`` (one
    line, the URL without credentials) when the server cannot be reached, refuses the
    credentials, has no JetStream, or refuses the layout. The client is closed when the block
    ends; a call after that raises ``StorageError``.
    """
    connection = NatsConnection(settings, queue_ack_seconds=queue_ack_seconds, roles=roles)
    await connection._open()
    try:
        yield connection
    finally:
        await connection._close()


class NatsConnection:
    """A NATS client on the event loop of the scope that opened it (``open_connection``)."""

    def __init__(
        self,
        settings: NatsSettings,
        *,
        queue_ack_seconds: float = 60.0,
        roles: Sequence[str] = ROLES,
    ) -> None:
        self.settings = settings
        self.names = NatsNames(settings.prefix)
        self.roles = tuple(roles)  # the team's: a role consumer each, its queue's roles
        self.wanted_ack_seconds = queue_ack_seconds
        self.queue_ack_seconds = queue_ack_seconds
        self._reconnected: list[Callable[[], None]] = []
        self._connect_errors: list[Exception] = []
        # JetStream subscriptions that live as long as the connection (a store's watch): ended
        # before the client closes, which ends their helper tasks too.
        self._subscriptions: list[Any] = []
        self._token: anyio.lowlevel.EventLoopToken | None = None
        self._loop_thread = 0
        self._open_now = False
        self._closed = False
        self.client = Client()
        self.js: JetStreamContext = self.client.jetstream(timeout=5.0)

    # --- opening and closing ---------------------------------------------------------------

    async def _open(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:  # trio: no asyncio loop to run the client on
            raise StorageError(
                "the nats backend runs on anyio's asyncio backend (nats-py is an asyncio "
                "client); run the team with anyio.run(..., backend='asyncio')."
            ) from None
        self._token = anyio.lowlevel.current_token()
        self._loop_thread = threading.get_ident()
        try:
            with anyio.fail_after(self.settings.connect_seconds + 5):
                await self._connect()
        except Exception as exc:
            await self._close()
            raise self._unreachable(exc) from None
        self._open_now = True
        try:
            with anyio.fail_after(self.settings.connect_seconds + 10):
                await self._check_jetstream()
            await self.run(self._ensure_layout)
        except BaseException:
            await self._close()
            raise

    async def _close(self) -> None:
        """End the connection's subscriptions and close the client (idempotent)."""
        if self._closed:
            return
        self._closed, self._open_now = True, False
        with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSING_SECONDS):
            for subscription in reversed(self._subscriptions):
                with contextlib.suppress(Exception):
                    await subscription.unsubscribe()
            with contextlib.suppress(Exception):
                await self.client.close()

    def keep(self, subscription: Any) -> None:
        """End ``subscription`` (a JetStream one, on this connection) when the connection
        closes."""
        self._subscriptions.append(subscription)

    # --- running coroutines, on the loop or from blocking code -------------------------------

    def call(self, make: Callable[[], Awaitable[_T]]) -> _T:
        """Run ``make()`` on the connection's loop from blocking code (a thread outside that
        loop: a command's, with the loop in anyio's blocking portal) and wait for it; the
        way ``storage.blocking``'s views reach the async stores. Raises ``RuntimeError`` on
        the loop's own thread, where waiting would hold up the loop the call needs, and
        ``StorageError`` once the connection's scope has ended."""
        if self._open_now and threading.get_ident() == self._loop_thread:
            raise RuntimeError(
                "a blocking NATS call on the event loop would wait for itself; await the "
                "store or queue (its async methods) instead."
            )
        self._check_open()

        async def made() -> _T:
            return await make()

        try:
            return anyio.from_thread.run(made, token=self._token)
        except anyio.RunFinishedError:
            raise self._closed_error() from None

    async def run(
        self,
        make: Callable[[], Awaitable[_T]],
        *,
        what: str = "a request",
        patience: float | None = None,
    ) -> _T:
        """Run ``make()`` on the connection's loop; retry while the server is away, for up to
        ``patience`` seconds (``retry_seconds`` unless given). Raises ``StorageError`` naming
        ``what`` when it stays away, when the server refuses (an ``APIError`` or another client
        error escaping ``make()``: one a coroutine catches itself is its own business), and
        when the connection's scope has ended. ``make`` must be safe to run again."""
        self._check_open()
        patience = self.settings.retry_seconds if patience is None else patience
        deadline = time.monotonic() + patience
        tries = 0
        while True:
            try:
                with anyio.fail_after(self.settings.retry_seconds + 10):
                    return await make()
            except TRANSIENT as exc:
                if isinstance(exc, nats.js.errors.APIError) and not busy(exc):
                    raise self._refusal(exc, what) from None
                if self._closed or time.monotonic() > deadline:
                    raise StorageError(
                        f"the NATS server at {self.settings.shown_url} did not answer {what} "
                        f"for {patience:g} s ({reason_of(exc)}); is it running?"
                    ) from None
                logger.debug("NATS {} failed ({}); retrying", what, type(exc).__name__)
            except nats.js.errors.APIError as exc:  # a refusal, not the server being away
                raise self._refusal(exc, what) from None
            except nats.errors.ConnectionClosedError:
                if self._closed:
                    raise self._closed_error() from None
                raise StorageError(
                    f"the connection to the NATS server at {self.settings.shown_url} is closed."
                ) from None
            except nats.errors.Error as exc:
                raise StorageError(
                    f"{what} on the NATS server at {self.settings.shown_url} failed "
                    f"({type(exc).__name__}: {str(exc).strip() or 'no reason given'})."
                ) from None
            await anyio.sleep(backoff_delay(tries, first=_RETRY_FIRST, cap=_RETRY_CAP))
            tries += 1

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()
        if self._token is None:
            raise RuntimeError("a NatsConnection is used before open_connection opened it.")

    def _closed_error(self) -> StorageError:
        return StorageError(
            f"the connection to the NATS server at {self.settings.shown_url} is closed: the "
            "scope that opened it (a Team's run, open_context, open_backend) has ended; use the "
            "store and queue inside it."
        )

    def _refusal(self, exc: nats.js.errors.APIError, what: str) -> StorageError:
        return StorageError(
            f"the NATS server at {self.settings.shown_url} refused {what} "
            f"({exc.description or 'no reason given'}, err_code {exc.err_code})."
        )

    async def bucket_keys(self, kv: KeyValue, bucket: str) -> list[str]:
        """Every key of the KV ``bucket``. nats-py's ``keys()`` watches the bucket and can end
        its listing before the first entry arrives (seen under load): an empty reply for a
        bucket that holds messages is asked again before it is believed."""
        for _ in range(_LISTING_TRIES):
            keys = await _listed_keys(kv)
            if keys:
                return keys
            info = await self.js.stream_info(f"KV_{bucket}")
            if not info.state.messages:
                return []
        return []

    async def stream_subjects(self, stream: str, subjects: str) -> dict[str, int]:
        """The messages per subject of ``stream`` on ``subjects`` (a filter): one request per
        100,000 subjects (the server's page), nothing else sent back."""
        found: dict[str, int] = {}
        while True:
            request = {"subjects_filter": subjects, "offset": len(found)}
            answer = await self.api(f"STREAM.INFO.{stream}", request)
            page = (answer.get("state") or {}).get("subjects") or {}
            found.update(page)
            if not page or len(found) >= int(answer.get("total") or 0):
                return found

    def on_reconnect(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` (on the loop) whenever the client reconnects."""
        self._reconnected.append(callback)

    # --- connecting -----------------------------------------------------------------------

    async def _connect(self) -> None:
        async def disconnected() -> None:
            if self._closed:
                return  # our own close (nats-py reports it as a disconnect): nothing lost
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

        # A client of our own (not nats.connect's): closing it ends its tasks if this fails.
        options: JsonObject = {  # seconds as floats, which nats-py's hints call int
            "connect_timeout": self.settings.connect_seconds,
            "reconnect_time_wait": 0.5,
        }
        await self.client.connect(
            servers=[part.strip() for part in self.settings.url.split(",")],
            name="teams-runtime",
            allow_reconnect=True,
            max_reconnect_attempts=1,  # starting: a server that is not there is an error now
            disconnected_cb=disconnected,
            reconnected_cb=reconnected,
            error_cb=error,
            **options,
        )
        self.client.options["max_reconnect_attempts"] = -1  # running: outlive a server restart

    async def _check_jetstream(self) -> None:
        """Refuse at once a server (or account) without JetStream: every later call would
        otherwise find no responder and be retried for ``retry_seconds``."""
        try:
            await self.api("INFO", {})
        except nats.errors.NoRespondersError:
            raise StorageError(
                f"the NATS server at {self.settings.shown_url} answers, but JetStream is not "
                "enabled on it; start it with -js (or a jetstream block in its config file): "
                "the nats backend keeps requests and the queue in JetStream."
            ) from None
        except nats.js.errors.APIError as exc:
            if exc.err_code in JETSTREAM_NOT_ENABLED:
                raise StorageError(
                    f"the NATS server at {self.settings.shown_url} does not enable JetStream "
                    f"for this account ({exc.description}); enable it for the account the "
                    "credentials in backend.nats.url log in to."
                ) from None
        except TRANSIENT:
            pass  # slow to answer: the layout's calls retry it for retry_seconds

    async def _ensure_layout(self) -> None:
        """Make what is missing on the server; read the team's lease into
        ``queue_ack_seconds``."""
        self.queue_ack_seconds = await ensure_layout(
            self.js, self.api, self.settings, self.wanted_ack_seconds, self.roles
        )

    def _unreachable(self, exc: Exception) -> StorageError:
        """The one line for a connect that failed: refused credentials, or no server."""
        if any(is_auth_refusal(error) for error in (exc, *self._connect_errors)):
            if "@" in self.settings.url:
                return StorageError(
                    f"the NATS server at {self.settings.shown_url} refused the credentials in "
                    "backend.nats.url (authorization violation); check the user and password "
                    "(or token) there in team_runtime.yaml."
                )
            return StorageError(
                f"the NATS server at {self.settings.shown_url} requires credentials "
                "(authorization violation); write them in backend.nats.url in "
                "team_runtime.yaml as nats://USER:PASSWORD@HOST:PORT."
            )
        return StorageError(
            f"cannot reach the NATS server at {self.settings.shown_url} ({reason_of(exc)}); start "
            "it, or check backend.nats.url in team_runtime.yaml."
        )

    # --- JetStream calls the stores share ----------------------------------------------------

    async def api(self, subject: str, request: JsonObject) -> JsonObject:
        """One JetStream API request (``$JS.API.<subject>``); ``APIError`` on an error reply."""
        reply = await self.client.request(
            f"$JS.API.{subject}", json.dumps(request).encode(), timeout=5.0
        )
        answer: JsonObject = json.loads(reply.data)
        if "error" in answer:
            raise nats.js.errors.APIError.from_error(answer["error"])
        return answer


# An ephemeral consumer a command made (a listing, a watch, a history read) is removed by the
# server this long after its subscription ends: nats-py's own default keeps a KV listing's for
# 5 minutes, and a command a second (a script polling `status`) piled up hundreds of them
# until the server refused more ("maximum consumers limit reached").
GONE_AFTER_SECONDS = 1.0


# How long a listing of a bucket's keys may wait for nats-py's "initial values are in" marker.
# The marker can be lost (its callback gives up waiting for the consumer's info after the
# client's timeout, under load): the listing would then wait for ever, and `status` for the
# whole command timeout. Past this it counts as empty, which `bucket_keys` asks again.
LISTING_SECONDS = 10.0


async def _listed_keys(kv: KeyValue) -> list[str]:
    """The keys of ``kv`` (``KeyValue.keys`` with a consumer that goes when it is done); an
    empty list when the listing does not end within ``LISTING_SECONDS``."""
    watcher = await kv.watch(
        ">", ignore_deletes=True, meta_only=True, inactive_threshold=GONE_AFTER_SECONDS
    )
    keys = []
    try:
        with anyio.move_on_after(LISTING_SECONDS) as waited:
            async for entry in watcher:
                if entry is None:  # the initial values are all in
                    break
                keys.append(entry.key)
    finally:
        # (nats-py leaves the watcher's stop untyped)
        await watcher.stop()  # type: ignore[no-untyped-call]
    return [] if waited.cancelled_caught else keys
