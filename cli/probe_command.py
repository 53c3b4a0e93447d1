"""``teams-runtime config --probe``: what each model server the roles use answers to one tiny
request for each model the roles ask it for (``actors.models._probe``), one line a server and
model, or JSON with ``--json``."""

from __future__ import annotations

import anyio
import msgspec

from teams_runtime.actors.models import ServerProbe, probe_all
from teams_runtime.cli._output import write_json
from teams_runtime.codecs.config import OpenAIConfig, TeamConfig

__all__ = ["probe_servers", "servers_of"]


def servers_of(config: TeamConfig) -> list[tuple[OpenAIConfig, list[str]]]:
    """Each distinct server (``base_url``) and model the roles' models call, with the roles
    that call it so: a server may serve one role's model and not another's (a name it does
    not know, one it has to load). The first of the roles says which key the probe uses."""
    servers: dict[tuple[str, str], tuple[OpenAIConfig, list[str]]] = {}
    for role in config.cast.names:
        model = config.model_for(role)
        if model.backend == "openai" and model.openai is not None:
            pair = (model.openai.base_url.rstrip("/"), model.openai.model)
            servers.setdefault(pair, (model.openai, []))[1].append(role)
    return list(servers.values())


def _line(result: ServerProbe) -> str:
    asked = f"{result.base_url} ({', '.join(result.roles)}; asked for {result.model})"
    if result.problem is not None:
        return f"{asked}: {result.problem}"
    name = result.answered_as
    named = f"answered as model {name}" if name else "answered, naming no model"
    usage = "usage reported in the stream" if result.usage else "no usage in the stream"
    match result.response_format:
        case "json_schema":
            form = "response_format json_schema accepted"
        case "json_object":
            form = "response_format json_schema refused, json_object accepted"
        case _:
            form = "response_format refused (json_schema and json_object)"
    return f"{asked}: {named}; {usage}; {form}."


def probe_servers(config: TeamConfig, *, as_json: bool) -> int:
    """Probe the servers of ``config``'s roles, once per model each is asked for, and print
    what they answered; exit status 1 when one gave no answer."""
    servers = servers_of(config)
    results = anyio.run(probe_all, servers) if servers else []
    if as_json:
        write_json([msgspec.to_builtins(result) for result in results])
    elif not results:
        print("No role uses an OpenAI-compatible server (model.backend openai): nothing to probe.")
    for result in [] if as_json else results:
        print(_line(result))
    return 1 if any(result.problem is not None for result in results) else 0
