"""The ``queue`` section: how workers share the envelopes of a workspace."""

from __future__ import annotations

import msgspec

from teams_runtime.exceptions import ConfigError

__all__ = ["QueueConfig"]


class QueueConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``queue`` section: how workers share the envelopes of a workspace."""

    lease_seconds: float = 60.0  # a dead worker's claims return to the queue after this

    def __post_init__(self) -> None:
        if not 1 <= self.lease_seconds <= 86_400:
            raise ConfigError("team_runtime.yaml queue.lease_seconds must be between 1 and 86400.")
