"""The ``team`` section: its roles (``roles``, the cast: ``cast_section``), limits on how a
request travels between them, and on how many requests one worker's ContextActor works on at
once."""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.config._setting_checks import MOST_HOPS, MOST_IN_FLIGHT, check_at_most
from teams_runtime.exceptions import ConfigError

__all__ = ["DEFAULT_REQUESTS_IN_FLIGHT", "TeamSection"]

DEFAULT_REQUESTS_IN_FLIGHT = 64


class TeamSection(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``team`` section: who is in the team, and limits on how a request travels between
    its roles."""

    # The team's roles (the cast), as written; None: the eight built-in roles. Checked, with
    # the names `roles.<name>` may use, by `cast_section.cast_names`.
    roles: list[str] | None = None
    max_hops: int = 40  # hand-offs a request may take before it is failed with `hop_limit`
    # Requests whose asks a worker's ContextActor answers at once (each may hold a thread).
    requests_in_flight: int = DEFAULT_REQUESTS_IN_FLIGHT

    def __post_init__(self) -> None:
        if self.max_hops < 1:
            raise ConfigError("team_runtime.yaml team.max_hops must be at least 1.")
        check_at_most("team.max_hops", self.max_hops, MOST_HOPS)
        if self.requests_in_flight < 1:
            raise ConfigError("team_runtime.yaml team.requests_in_flight must be at least 1.")
        check_at_most("team.requests_in_flight", self.requests_in_flight, MOST_IN_FLIGHT)
