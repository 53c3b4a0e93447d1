"""``teams-runtime init`` and ``config``: the workspace's ``team_runtime.yaml`` written, then
checked and printed as in force.

``init`` makes a workspace: the default ``team_runtime.yaml`` and the folder its requests go in.
``config`` checks the file and this host's part of it (each role's model found), prints the
configuration in force (each role's model as it runs), with ``--probe`` asks each model server
once what it can do, and with ``--graph`` says who may hand a request to whom.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import anyio
import msgspec

from teams_runtime.actors.models import ServerProbe, probe_all, start_problem
from teams_runtime.actors.roles import is_person
from teams_runtime.actors.telemetry import check_otel
from teams_runtime.cli._flags import add_json, add_workspace
from teams_runtime.cli._output import UserError, write_json
from teams_runtime.cli._parser import PROG
from teams_runtime.cli._probe_budgets import budget_lines, probe_budgets
from teams_runtime.codecs.config import (
    BACKEND_KINDS,
    CONFIG_FILE_NAME,
    DEFAULT_CONFIG_TEXT,
    Cast,
    ModelConfig,
    NatsSettings,
    OpenAIConfig,
    TeamConfig,
    backend_block_text,
    section_notes,
)
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.exceptions import ConfigError
from teams_runtime.policy.pricing import rate_card_notes, unusable_card_warnings
from teams_runtime.storage import Workspace, load_team_config

__all__ = ["cmd_config", "cmd_init", "declare_config", "declare_init"]


def declare_init(init: argparse.ArgumentParser) -> None:
    """Declare ``init``: its description, flags and handler."""
    init.description = (
        "Create a workspace in DIR: a team_runtime.yaml with the default "
        "prompt_context block and the .teams_runtime/requests/ folder (with --backend nats, a "
        "backend block naming the server instead of the folder). An existing "
        "team_runtime.yaml is never overwritten. Then `teams-runtime submit` and "
        "`teams-runtime run`; see docs/cli.md."
    )
    init.add_argument(
        "directory",
        nargs="?",
        type=Path,
        default=Path("."),
        metavar="DIR",
        help="the workspace folder (created if missing; default: current folder)",
    )
    init.add_argument(
        "--backend",
        choices=BACKEND_KINDS,
        default="file",
        help="where requests and the queue live: file (this folder, the default) or nats "
        "(a NATS JetStream server shared by hosts; see docs/scaling.md)",
    )
    init.add_argument(
        "--nats-url",
        metavar="URL",
        help="the NATS server for --backend nats (default: nats://127.0.0.1:4222)",
    )
    init.set_defaults(handler=cmd_init)


def cmd_init(args: argparse.Namespace) -> int:
    workspace = Workspace(args.directory)
    if args.nats_url is not None and args.backend != "nats":
        raise UserError("--nats-url needs --backend nats.")
    text = DEFAULT_CONFIG_TEXT
    # Built (so checked) once, before anything is written.
    settings = NatsSettings(url=args.nats_url) if args.nats_url else NatsSettings()
    if args.backend == "nats":
        text += backend_block_text(settings)
    if workspace.config_path.exists():
        raise UserError(
            f"{workspace.config_path} already exists; not overwriting it "
            "(edit it, or remove it first to start over)."
        )
    # With nats the folder keeps only what is local to this host (logs, attempts).
    folder = workspace.requests_dir if args.backend == "file" else workspace.runtime_dir
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with workspace.config_path.open("x", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise UserError(f"cannot create the workspace in {workspace.root}: {exc}") from exc
    load_team_config(workspace.root, remember=True)  # cached for the commands that follow
    where = ".teams_runtime/requests/"
    if args.backend == "nats":
        where = f"requests and the queue on NATS at {settings.shown_url}"
    print(f"Initialised workspace {workspace.root} ({CONFIG_FILE_NAME}, {where}).")
    return 0


def declare_config(check: argparse.ArgumentParser) -> None:
    """Declare ``config``: its description, flags and handler."""
    check.description = (
        "Check team_runtime.yaml and what each role's model needs on this host "
        "(its command, its key's variable), then print the configuration in force as JSON, "
        "each role's model as it runs under roles."
    )
    add_workspace(check)
    check.add_argument(
        "--probe",
        action="store_true",
        help="send one tiny request to each model server the roles use and say what it "
        "answered (its model name, usage, response_format), and its window, slots and "
        "tokenizer, instead",
    )
    check.add_argument(
        "--graph",
        action="store_true",
        help="instead, print who may hand a request to whom (team.roles, roles.<role>.hands_to)",
    )
    add_json(
        check,
        "JSON output (the configuration always is; with --probe or --graph, theirs too)",
    )
    check.set_defaults(handler=cmd_config)


def cmd_config(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    # Checked after an edit: later commands read it back from its cache (no YAML parse).
    config = load_team_config(workspace.root, remember=True)
    if args.graph:  # the config's own view: no model needs to be on this host for it
        if args.probe:
            raise UserError("--graph and --probe are two views: give one of them.")
        if args.json:
            write_json(hand_off_graph(config.cast))
        else:
            print("\n".join(graph_lines(config.cast)))
        return 0
    roles = config.cast.names
    problem = start_problem(((role, config.model_for(role)) for role in roles), workspace.root)
    if problem is not None:
        raise ConfigError(problem)
    check_otel(config)  # the refusal `run` would give, said before it has to
    notes = [*section_notes(config), *rate_card_notes(config, roles), *graph_warnings(config.cast)]
    for note in notes:  # on stderr: stdout stays the JSON alone
        print(f"{PROG}: note: {note}", file=sys.stderr)
    if not args.probe:  # (which says it with what each server reported)
        _warn(unusable_card_warnings(config, roles))  # a model command never reports usage
    if args.probe:
        return probe_servers(config, as_json=args.json)
    write_json(shown_config(config))
    return 0


def _warn(warnings: list[str]) -> None:
    for warning in warnings:  # on stderr: stdout stays the JSON alone
        print(f"{PROG}: warning: {warning}", file=sys.stderr)


def shown_config(config: TeamConfig) -> dict[str, Any]:
    """``config`` as ``config`` prints it: every default filled in, each role's model as the
    role runs with it, and nothing secret (a NATS URL's user and password are ``***``)."""
    shown: dict[str, Any] = msgspec.to_builtins(config)
    shown["model"] = _model_shown(config.model)
    shown["backend"]["nats"]["url"] = config.backend.nats.shown_url
    cast = config.cast
    shown["team"]["roles"] = list(cast.names)  # the team in force, written or not
    # Every role, also in a config built in code without them (model_for's fallback).
    shown["roles"] = {
        role: {
            **msgspec.to_builtins(cast.role(role)),
            "concurrency": cast.concurrency_of(role),  # the run's default when not written
            "model": _model_shown(config.model_for(role)),
            "prompt_context": _budget_shown(config, role),
        }
        for role in cast.names
    }
    return shown


def _model_shown(model: ModelConfig) -> JsonObject:
    """A model section as shown: ``tools`` only for the ``openai`` backend, the one that
    takes them."""
    shown: JsonObject = msgspec.to_builtins(model)
    if model.backend != "openai":
        del shown["tools"]
    return shown


def _budget_shown(config: TeamConfig, role: str) -> dict[str, Any]:
    """The role's budget in force and where it is written (``role``, ``global`` or ``none``);
    ``auto`` is resolved from the role's model server when a run starts."""
    budget = config.prompt_budget(role)
    return {"max_prompt_tokens": budget.max_prompt_tokens, "from": budget.source}


# --- --graph: who may hand a request to whom ------------------------------------------------------


_DONE = "done"  # what the text calls finishing the request (next_role "")


def hand_off_graph(cast: Cast) -> dict[str, Any]:
    """Each role of the team, in its order: its prompt kind, whether a person answers for it,
    whether ``submit`` may queue work for it, the roles it may hand to (``hands_to``, or every
    role of the team), whether it may finish the request, and whether its ``hands_to`` narrows
    the team; then the ``graph_warnings``."""
    new_work = set(cast.takes_new_work)
    roles = {}
    for name in cast.names:
        next_roles = cast.next_roles(name)
        roles[name] = {
            "prompt_kind": cast.role(name).prompt_kind,
            "person": is_person(cast.role(name).model),
            "takes_new_work": name in new_work,
            "hands_to": list(next_roles.roles),
            "may_finish": next_roles.finish,
            "limited": next_roles.limited,
        }
    return {"roles": roles, "warnings": graph_warnings(cast)}


def graph_warnings(cast: Cast) -> list[str]:
    """What the hand-off rules make impossible, worth saying before a request runs into it:
    roles from which no chain of hand-offs reaches one that may finish the request (it can
    then only fail, or stop at the hop limit), and roles that never get work."""
    next_roles = {name: cast.next_roles(name) for name in cast.names}
    may_end = {name for name, allowed in next_roles.items() if allowed.finish}
    grown = True
    while grown:  # every role with a hand-off to one that may end the request, and so on
        more = {n for n, a in next_roles.items() if n not in may_end and may_end & set(a.roles)}
        may_end |= more
        grown = bool(more)
    warnings = []
    stuck = [name for name in cast.names if name not in may_end]
    if len(stuck) == len(cast.names):
        warnings.append(
            'no role may finish a request (none has "" in its hands_to): every request ends '
            "failed, by a role's failed result or at the hop limit"
        )
    elif stuck:
        warnings.append(
            f"a request at {', '.join(stuck)} can never finish: no chain of hand-offs from "
            'there reaches a role with "" in its hands_to (it ends failed, at the latest at '
            "the hop limit)"
        )
    handed_to = {target for allowed in next_roles.values() for target in allowed.roles}
    idle = [n for n in cast.names if n not in handed_to and n not in cast.takes_new_work]
    if idle:
        them = "it" if len(idle) == 1 else "them"
        warnings.append(
            f"{', '.join(idle)} never {'gets' if len(idle) == 1 else 'get'} work: no role hands "
            f"to {them}, and submit queues only for roles whose prompt_kind is not "
            "version_control"
        )
    return warnings


def graph_lines(cast: Cast) -> list[str]:
    """The graph as text: the team, then a line per role, ``writer -> reviewer`` (``(a
    person)`` after a person's), then a ``warning:`` line per ``graph_warnings``."""
    width = max(len(name) for name in cast.names)
    lines = [
        f"team: {', '.join(cast.names)} (new work: {', '.join(cast.takes_new_work) or 'none'})"
    ]
    for name in cast.names:
        next_roles = cast.next_roles(name)
        if not next_roles.limited:
            targets = "any role, or done"
        elif not next_roles.roles:
            targets = _DONE
        else:
            targets = ", ".join(next_roles.roles) + (f", or {_DONE}" if next_roles.finish else "")
        person = " (a person)" if is_person(cast.role(name).model) else ""
        lines.append(f"{name:<{width}} -> {targets}{person}")
    return lines + [f"warning: {warning}" for warning in graph_warnings(cast)]


# --- --probe: what each model server answers ------------------------------------------------------


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
    return f"{asked}: {named}; {usage}; {form}; {_window_words(result)}."


def _window_words(result: ServerProbe) -> str:
    """The server's window, slots and tokenizer, and where they came from."""
    if result.context_tokens is None:
        window = f"window {result.window_source}"  # unknown: ... (what to set)
    else:
        window = f"window {result.context_tokens} tokens ({result.window_source})"
    if result.slots is not None:
        window += f", {result.slots} slot{'s' if result.slots != 1 else ''}"
    tokenizer = result.tokenizer
    return f"{window}; " + (f"tokenizer {tokenizer}" if tokenizer else "no tokenizer endpoint")


def probe_servers(config: TeamConfig, *, as_json: bool) -> int:
    """Probe the servers of ``config``'s roles, once per model each is asked for, and print
    what they answered, with each role's budget as a run would resolve it; exit status 1
    when one gave no reply."""
    servers = servers_of(config)
    results = anyio.run(probe_all, servers) if servers else []
    silent = [role for result in results if result.usage is False for role in result.roles]
    _warn(unusable_card_warnings(config, config.cast.names, silent))
    budgets = [probe_budgets(config, result) for result in results]
    if as_json:  # `budgets` only where a role has one: other configs' output stays as it was
        shown = [msgspec.to_builtins(result) for result in results]
        pairs = zip(shown, budgets, strict=True)
        write_json([item | ({"budgets": msgspec.to_builtins(b)} if b else {}) for item, b in pairs])
    elif not results:
        print("No role uses an OpenAI-compatible server (model.backend openai): nothing to probe.")
    for result, budget in [] if as_json else zip(results, budgets, strict=True):
        print("\n".join([_line(result), *budget_lines(budget)]))
    return 1 if any(result.problem is not None for result in results) else 0
