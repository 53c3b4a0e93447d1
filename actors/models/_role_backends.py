"""Each served role's model backend, made from its own model (``TeamConfig.model_for``) once
the start checks have found what it needs on this host."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec

from teams_runtime.actors.models._backends import ModelBackend, make_backend
from teams_runtime.actors.models._checks import start_problem
from teams_runtime.actors.models._servers import ModelServers
from teams_runtime.actors.models.spawn import ModelStarter
from teams_runtime.codecs.config import TeamConfig
from teams_runtime.exceptions import ConfigError

__all__ = ["role_backends"]


def role_backends(
    config: TeamConfig,
    served: Sequence[str],
    root: Path,
    servers: ModelServers,
    starter: ModelStarter,
    backend: ModelBackend | None = None,
) -> dict[str, ModelBackend]:
    """Each served role's backend: ``backend`` for all, or one made from each role's model
    (roles whose models are the same share one). Raises ``ConfigError`` if a role's model
    cannot answer on this host (its command missing, its key's variable unset)."""
    if backend is not None:
        return dict.fromkeys(served, backend)
    models = [(role, config.model_for(role)) for role in served]
    problem = start_problem(models, root)
    if problem is not None:
        raise ConfigError(problem)
    made: dict[bytes, ModelBackend] = {}
    backends = {}
    for role, model in models:
        same = msgspec.json.encode(model)
        if same not in made:
            made[same] = make_backend(model, root, servers=servers, starter=starter)
        backends[role] = made[same]
    return backends
