"""One connection to a NATS JetStream server, usable from blocking code.

The stores are blocking (the actors call them from worker threads), and ``nats-py`` is an
asyncio client. A ``NatsConnection`` runs the client on an event loop of its own, in a daemon
thread, and blocking callers hand it coroutines (``call``). Calls that fail because the server
is away (restarting, a network blip) are retried until ``retry_seconds`` pass: the client
reconnects by itself meanwhile, so a worker rides out a server restart. Connecting, it makes
what the backend needs on the server when it is missing (``layout``).
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

import nats
import nats.errors
import nats.js.errors
from loguru import logger
from nats.aio.client import Client
from nats.js import JetStreamContext
from nats.js.kv import KeyValue

from teams_runtime.codecs.config import NatsSettings
from teams_runtime.exceptions import BackendError
from teams_runtime.storage.nats.layout import ensure_layout
from teams_runtime.storage.nats.names import NatsNames
from teams_runtime.storage.nats.server_errors import (
    JETSTREAM_NOT_ENABLED,
    TRANSIENT,
    busy,
    is_auth_refusal,
    reason_of,
)

__all__ = ["NatsConnection", "close_shared_connections", "shared_connection"]

_T = TypeVar("_T")

_LISTING_TRIES = 5  # listings of a KV bucket before an empty one is believed


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
            except TRANSIENT as exc:
                if isinstance(exc, nats.js.errors.APIError) and not busy(exc):
                    raise self._refusal(exc, what) from None
                if self._closed or time.monotonic() > deadline:
                    raise BackendError(
                        f"the NATS server at {self.settings.shown_url} did not answer {what} "
                        f"for {patience:g} s ({reason_of(exc)}); is it running?"
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
            if exc.err_code in JETSTREAM_NOT_ENABLED:
                raise BackendError(
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
            self.js, self.api, self.settings, self.wanted_ack_seconds
        )

    def _unreachable(self, exc: Exception) -> BackendError:
        """The one line for a connect that failed: refused credentials, or no server."""
        if any(is_auth_refusal(error) for error in (exc, *self._connect_errors)):
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
            f"cannot reach the NATS server at {self.settings.shown_url} ({reason_of(exc)}); start "
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
