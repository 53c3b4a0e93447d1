"""What the nats storage needs on the server, made when missing: the team's streams, KV
buckets and role consumers (``ensure_layout``). What exists is never changed (but for letting
the workers bucket's entries expire): a host whose config differs (``queue.lease_seconds``,
``replicas``) reads the settings the team's queue was made with instead of imposing its own.
The names are in ``NatsNames`` and in docs/scaling.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import nats.js.errors
from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)

from teams_runtime.codecs.config import NatsSettings
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.exceptions import StorageError
from teams_runtime.storage.nats._names import NatsNames
from teams_runtime.storage.nats._server_errors import (
    CONSUMER_EXISTS,
    CONSUMER_NOT_FOUND,
    REPLICAS_NEED_A_CLUSTER,
    STREAM_NAME_IN_USE,
    STREAM_NOT_FOUND,
)

__all__ = ["ApiRequest", "ensure_layout"]

ApiRequest = Callable[[str, JsonObject], Awaitable[JsonObject]]


async def ensure_layout(
    js: JetStreamContext,
    api: ApiRequest,
    settings: NatsSettings,
    wanted_ack_seconds: float,
    roles: Sequence[str],
) -> float:
    """Create the streams, buckets and consumers that are missing (a consumer for each of
    ``roles``); never change one that exists (another host made it, maybe with other
    settings: they stay the team's). Returns the ack wait of the role consumers: the team's
    lease.

    ``api`` sends one JetStream API request. Raises ``StorageError`` when the server refuses
    the layout, and the ``APIError`` itself when JetStream is busy (503: retried by the
    caller)."""
    return await _Layout(js, api, settings, wanted_ack_seconds, roles).ensure()


class _Layout:
    def __init__(
        self,
        js: JetStreamContext,
        api: ApiRequest,
        settings: NatsSettings,
        wanted_ack_seconds: float,
        roles: Sequence[str],
    ) -> None:
        self.js = js
        self.roles = tuple(roles)
        self.api = api
        self.settings = settings
        self.names = NatsNames(settings.prefix)
        self.wanted_ack_seconds = wanted_ack_seconds

    async def ensure(self) -> float:
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
            for bucket in (names.heads, names.workers, names.inbox, names.queued):
                await self._ensure_bucket(bucket)
            await self._expiring_entries(names.workers)
            await self._expiring_entries(names.queued)
            ack_waits = await asyncio.gather(
                *(
                    self._ensure_consumer(names.role_consumer(role), names.waiting_subject(role))
                    for role in self.roles
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
        # logging is set up: actors/team/_reports.py.)
        return min(ack_waits[: len(self.roles)])

    def _refused(self, exc: nats.js.errors.APIError) -> StorageError:
        """The one line for the server refusing to create the layout (never a traceback)."""
        if exc.err_code == REPLICAS_NEED_A_CLUSTER:
            return StorageError(
                f"team_runtime.yaml backend.nats.replicas is {self.settings.replicas}, but the "
                f"NATS server at {self.settings.shown_url} is not part of a cluster "
                f"({exc.description}); set replicas: 1, or run a cluster of at least "
                f"{self.settings.replicas} servers (docs/scaling.md)."
            )
        return StorageError(
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
            if exc.err_code != STREAM_NOT_FOUND:
                raise
        try:
            await self.js.add_stream(config)
        except nats.js.errors.APIError as exc:
            if exc.err_code != STREAM_NAME_IN_USE:  # made by another host meanwhile
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
                if exc.err_code != STREAM_NAME_IN_USE:  # made by another host meanwhile
                    raise

    async def _expiring_entries(self, bucket: str) -> None:
        """Let the bucket's entries carry a TTL (``Nats-TTL``: the leases expire by
        themselves). The one change made to what exists: a bucket made by an older client
        lacks it, and turning it on changes nothing else (it cannot be turned off again)."""
        info = await self.js.stream_info(f"KV_{bucket}")
        if not info.config.allow_msg_ttl:
            info.config.allow_msg_ttl = True
            try:
                await self.js.update_stream(info.config)
            except nats.js.errors.APIError as exc:
                if exc.code == 503:
                    raise
                # A server before 2.11, or one that refuses: the entries stay until their
                # workers retire, and `status` shows a dead one's lease expired.

    async def _ensure_consumer(self, name: str, subject: str) -> float:
        """Create the durable pull consumer ``name`` unless it exists; its ack wait."""
        try:
            info = await self.js.consumer_info(self.names.queue, name)
            return float(info.config.ack_wait or 0) or self.wanted_ack_seconds
        except nats.js.errors.NotFoundError as exc:
            if exc.err_code != CONSUMER_NOT_FOUND:
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
            if exc.err_code != CONSUMER_EXISTS:  # made by another host meanwhile
                raise
            info = await self.js.consumer_info(self.names.queue, name)
            return float(info.config.ack_wait or 0) or self.wanted_ack_seconds
        return self.wanted_ack_seconds
