"""The ``backend`` section: where requests and the queue live (files, or a NATS server)."""

from __future__ import annotations

import re

import msgspec

from teams_runtime.codecs.config._setting_checks import HIGHEST_PORT, is_port
from teams_runtime.codecs.config._value_messages import nearest
from teams_runtime.exceptions import ConfigError

__all__ = ["BACKEND_KINDS", "NatsSettings", "StorageConfig"]

BACKEND_KINDS = ("file", "nats")
_NATS_URL = re.compile(
    r"(nats|tls)://(?:[^@/\s]+@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?/?"
)
_NATS_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")


def _is_nats_host(host: str) -> bool:
    """A name or IPv4 address, or a bracketed IPv6 address that is one (``[abc]`` is not)."""
    if not host.startswith("["):
        return True
    import ipaddress  # only for a bracketed host: most configs name none

    try:
        return ipaddress.ip_address(host[1:-1]).version == 6
    except ValueError:
        return False


def _shown(url: str) -> str:
    """``url`` for messages, logs and output: the user and password of each of its URLs (a
    cluster's are comma-separated) replaced by ``***``."""
    return ",".join(_shown_one(part) for part in url.split(","))


def _shown_one(url: str) -> str:
    if "@" not in url:
        return url
    scheme, separator, _ = url.partition("://")
    return (scheme + separator if separator else "") + "***@" + url.rsplit("@", 1)[1]


class NatsSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``backend.nats`` section: which server, and the names this team uses on it."""

    url: str = "nats://127.0.0.1:4222"  # a cluster: several, comma-separated
    prefix: str = "teams"  # streams, buckets and subjects start with it (one team per prefix)
    replicas: int = 1  # JetStream replicas of every stream and bucket (3 in a 3-node cluster)
    connect_seconds: float = 2.0  # how long starting waits for the server before giving up
    retry_seconds: float = 60.0  # how long a call retries while the server is away

    @property
    def shown_url(self) -> str:
        """The URL for messages and logs: a user or password in it is never shown."""
        return _shown(self.url)

    def __post_init__(self) -> None:
        for part in self.url.split(","):
            match = _NATS_URL.fullmatch(part.strip())
            if match is None or not _is_nats_host(match.group(2)):
                raise ConfigError(
                    f"team_runtime.yaml backend.nats.url {_shown(self.url)!r} is not a NATS "
                    "URL; write it as nats://HOST:PORT (or tls://HOST:PORT; several, "
                    "comma-separated, for a cluster)."
                )
            port = int(match.group(3)[1:]) if match.group(3) else None
            if port is not None and not is_port(port):
                raise ConfigError(
                    f"team_runtime.yaml backend.nats.url {_shown(self.url)!r} names port "
                    f"{port}, which no server can listen on; a port is between 1 and "
                    f"{HIGHEST_PORT}."
                )
        if _NATS_PREFIX.fullmatch(self.prefix) is None:
            raise ConfigError(
                "team_runtime.yaml backend.nats.prefix must start with a letter and hold only "
                "letters, digits, '_' and '-' (at most 32 characters)."
            )
        if type(self.replicas) is not int or not 1 <= self.replicas <= 5:
            raise ConfigError("team_runtime.yaml backend.nats.replicas must be between 1 and 5.")
        if not 0 < self.connect_seconds <= 60 or not 0 < self.retry_seconds <= 3600:
            raise ConfigError(
                "team_runtime.yaml backend.nats.connect_seconds must be in (0, 60] and "
                "retry_seconds in (0, 3600]."
            )


class StorageConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``backend`` section: where requests and the queue live (docs/scaling.md)."""

    kind: str = "file"
    nats: NatsSettings = NatsSettings()

    def __post_init__(self) -> None:
        if self.kind not in BACKEND_KINDS:
            # The house style of a mistyped choice (value_messages), as for `model.backend`.
            close = nearest(self.kind, list(BACKEND_KINDS))
            guess = f"; did you mean {close}?" if close else "."
            shown = self.kind if len(self.kind) <= 40 else self.kind[:37] + "..."
            raise ConfigError(
                f"team_runtime.yaml backend.kind {shown!r} is not one of "
                f"{', '.join(BACKEND_KINDS)}{guess}"
            )
