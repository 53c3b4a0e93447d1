"""The ``team`` section: limits on how a request travels between roles."""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.config.setting_checks import MOST_HOPS, check_at_most
from teams_runtime.exceptions import ConfigError

__all__ = ["TeamSection"]


class TeamSection(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``team`` section: limits on how a request travels between roles."""

    max_hops: int = 40  # hand-offs a request may take before it is failed with `hop_limit`

    def __post_init__(self) -> None:
        if self.max_hops < 1:
            raise ConfigError("team_runtime.yaml team.max_hops must be at least 1.")
        check_at_most("team.max_hops", self.max_hops, MOST_HOPS)
