"""``teams-runtime config``: check ``team_runtime.yaml`` and this host's part of it, print the
configuration in force (each role's model as it runs), with ``--probe`` ask each model server
once what it can do, and with ``--graph`` say who may hand a request to whom."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import msgspec

from teams_runtime.actors.models import start_problem
from teams_runtime.actors.telemetry import check_otel
from teams_runtime.cli._output import UserError, write_json
from teams_runtime.cli._parser import PROG
from teams_runtime.codecs.config import TeamConfig, section_notes
from teams_runtime.exceptions import ConfigError
from teams_runtime.policy.pricing import rate_card_notes
from teams_runtime.storage import Workspace, load_team_config

__all__ = ["cmd_config", "shown_config"]


def shown_config(config: TeamConfig) -> dict[str, Any]:
    """``config`` as ``config`` prints it: every default filled in, each role's model as the
    role runs with it, and nothing secret (a NATS URL's user and password are ``***``)."""
    shown: dict[str, Any] = msgspec.to_builtins(config)
    shown["backend"]["nats"]["url"] = config.backend.nats.shown_url
    cast = config.cast
    shown["team"]["roles"] = list(cast.names)  # the team in force, written or not
    # Every role, also in a config built in code without them (model_for's fallback).
    shown["roles"] = {
        role: {
            **msgspec.to_builtins(cast.role(role)),
            "concurrency": cast.concurrency_of(role),  # the run's default when not written
            "model": msgspec.to_builtins(config.model_for(role)),
        }
        for role in cast.names
    }
    return shown


def cmd_config(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    config = load_team_config(workspace.root)
    if args.graph:  # the config's own view: no model needs to be on this host for it
        if args.probe:
            raise UserError("--graph and --probe are two views: give one of them.")
        from teams_runtime.cli.cast_graph import graph_lines, hand_off_graph

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
    from teams_runtime.cli.cast_graph import graph_warnings

    notes = [*section_notes(config), *rate_card_notes(config, roles), *graph_warnings(config.cast)]
    for note in notes:  # on stderr: stdout stays the JSON alone
        print(f"{PROG}: note: {note}", file=sys.stderr)
    if args.probe:
        from teams_runtime.cli.probe_command import probe_servers  # only --probe needs httpx

        return probe_servers(config, as_json=args.json)
    write_json(shown_config(config))
    return 0
