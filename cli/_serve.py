"""``teams-runtime serve``: the web console (``cli.console``) on this host, for a browser.

What is checked before anything starts: the workspace's config, and where it listens. Only a
loopback address goes without a token; any other needs one, read from an environment variable
(never a flag, which ``ps`` shows). Starlette and uvicorn (the ``web`` extra) are imported only
once this command runs.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Mapping

from teams_runtime.cli._flags import add_workspace
from teams_runtime.cli._output import UserError
from teams_runtime.storage import Workspace, load_team_config

__all__ = ["DEFAULT_PORT", "TOKEN_ENV", "cmd_serve", "console_token", "declare_serve"]

TOKEN_ENV = "TEAMS_RUNTIME_CONSOLE_TOKEN"
DEFAULT_PORT = 8765
MIN_TOKEN_CHARS = 16  # a token a person can guess in a few thousand tries protects nothing


def declare_serve(serve: argparse.ArgumentParser) -> None:
    """Declare ``serve``: its description, flags and handler."""
    serve.description = (
        "Serve the web console of the workspace: the team live, the requests with their "
        "timelines, any role's prompt with its receipt, the inbox with a form that answers, "
        "and the metrics. It listens on 127.0.0.1 unless --host names another address, which "
        f"needs a token in ${TOKEN_ENV} (or the variable --token-env names). See docs/console.md."
    )
    add_workspace(serve)
    serve.add_argument(
        "--host",
        default="127.0.0.1",
        metavar="H",
        help="the address to listen on (default: 127.0.0.1); another than loopback needs a token",
    )
    serve.add_argument(
        "--port",
        type=_port,
        default=DEFAULT_PORT,
        metavar="P",
        help=f"the port (default: {DEFAULT_PORT}; 0: any free one, printed once it listens)",
    )
    serve.add_argument(
        "--token-env",
        metavar="NAME",
        help=f"the environment variable holding the login token (default: {TOKEN_ENV})",
    )
    serve.set_defaults(handler=cmd_serve)


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port (0 to 65535)")
    return port


def cmd_serve(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    load_team_config(workspace.root)  # a broken config is an error before anything listens
    token = console_token(args.host, args.token_env, os.environ)
    try:
        from teams_runtime.cli.console import serve
    except ModuleNotFoundError as exc:
        if exc.name not in ("starlette", "uvicorn"):
            raise
        raise UserError(
            f"serve needs {exc.name}, which the web extra installs: "
            "pip install 'teams-runtime[web]'."
        ) from None
    serve(workspace, host=args.host, port=args.port, token=token)
    return 0


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``): reached from this host only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: wherever it resolves, it is not taken as loopback
        return False


def console_token(host: str, token_env: str | None, environ: Mapping[str, str]) -> str | None:
    """The login token the console asks for, from ``environ``'s ``token_env`` (``TOKEN_ENV``
    unless given), or ``None``: no login, allowed on a loopback ``host`` only."""
    name = token_env if token_env is not None else TOKEN_ENV
    token = environ.get(name) or None
    if token_env is not None and token is None:
        raise UserError(f"--token-env {name}: ${name} is not set (or empty); set it to the token.")
    try:
        wildcard = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        wildcard = False
    if wildcard:
        raise UserError(
            f"--host {host} listens on every address, so the Host header could not be checked; "
            "give the one address browsers reach this host at. Nothing was started."
        )
    if token is None and not is_loopback(host):
        raise UserError(
            f"--host {host} is not a loopback address: the console needs a token there. Set "
            f"${TOKEN_ENV} (or the variable --token-env NAME names) to a long random string, "
            "e.g. `export TEAMS_RUNTIME_CONSOLE_TOKEN=$(python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')`. Nothing was started."
        )
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise UserError(
            f"${name} holds {len(token)} characters: a console token needs at least "
            f"{MIN_TOKEN_CHARS}. Nothing was started."
        )
    return token
