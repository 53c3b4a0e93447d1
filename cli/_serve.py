"""``teams-runtime serve``: the web console (``cli.console``) on this host, for a browser.

What is checked before anything starts: the workspace's config, and where it listens. Only a
loopback address goes without a token; any other needs one, read from an environment variable
(never a flag, which ``ps`` shows). Starlette and uvicorn (the ``web`` extra) are imported only
once this command runs.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import os
import socket
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from teams_runtime.cli._flags import add_workspace
from teams_runtime.cli._output import UserError
from teams_runtime.storage import Workspace, load_team_config

__all__ = [
    "DEFAULT_PORT",
    "TOKEN_ENV",
    "cmd_serve",
    "console_token",
    "declare_serve",
    "listen",
    "public_url",
]

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
        "--public-url",
        action="append",
        type=public_url,
        default=[],
        metavar="URL",
        help="an address browsers reach the console at through a proxy or a published port "
        "(e.g. https://console.example.com): taken in the Host and Origin headers; repeat for "
        "several. One off loopback needs a token",
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


def public_url(text: str) -> str:
    """--public-url: an origin (``http(s)://name[:port]``, nothing after it), as a browser's
    Origin header says it."""
    try:
        parts = urlsplit(text.strip())
        port = parts.port
    except ValueError:
        parts, port = urlsplit(""), None
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.username is not None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an origin: give the scheme and name browsers use, and a port if "
            "not the scheme's own, nothing after it (e.g. https://console.example.com)"
        )
    return (
        f"{parts.scheme}://{parts.netloc.lower()}"
        if port is not None
        else (f"{parts.scheme}://{parts.hostname}")
    )


def cmd_serve(args: argparse.Namespace) -> int:
    workspace = Workspace(args.workspace)
    load_team_config(workspace.root)  # a broken config is an error before anything listens
    token = console_token(args.host, args.token_env, os.environ, args.public_url)
    listening = listen(args.host, args.port)
    try:
        from teams_runtime.cli.console import serve
    except ModuleNotFoundError as exc:
        if exc.name not in ("starlette", "uvicorn"):
            raise
        raise UserError(
            f"serve needs {exc.name}, which the web extra installs: "
            "pip install 'teams-runtime[web]'."
        ) from None
    with listening:
        serve(workspace, host=args.host, listening=listening, token=token,
              public_urls=args.public_url)  # fmt: skip
    return 0


def listen(host: str, port: int) -> socket.socket:
    """A socket bound to ``host``:``port``, before the server starts: a port in use, or an
    address not of this host, is said plainly (exit 2), not as the server's traceback."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
    except OSError as exc:
        listening.close()
        raise UserError(_bind_refused(host, port, exc)) from None
    return listening


def _bind_refused(host: str, port: int, exc: OSError) -> str:
    nothing = "Nothing was started."
    if exc.errno == errno.EADDRINUSE:
        return (
            f"port {port} on {host} is in use: pick another with --port (or --port 0 for any "
            f"free one). {nothing}"
        )
    if exc.errno == errno.EACCES:
        return (
            f"port {port} on {host} needs privileges this user lacks: pick one from 1024. {nothing}"
        )
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return (
            f"--host {host} is not an address of this host: give one of its own (`ip -brief "
            f"address` lists them), or 127.0.0.1 (the default). {nothing}"
        )
    return f"cannot listen on {host} port {port}: {exc.strerror or exc}. {nothing}"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is a loopback address (or ``localhost``): reached from this host only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: wherever it resolves, it is not taken as loopback
        return False


def console_token(
    host: str, token_env: str | None, environ: Mapping[str, str], public_urls: Sequence[str] = ()
) -> str | None:
    """The login token the console asks for, from ``environ``'s ``token_env`` (``TOKEN_ENV``
    unless given), or ``None``: no login, allowed when ``host`` and every one of the
    ``public_urls`` are loopback only."""
    name = token_env if token_env is not None else TOKEN_ENV
    token = environ.get(name) or None
    if token_env is not None and token is None:
        raise UserError(f"--token-env {name}: ${name} is not set (or empty); set it to the token.")
    try:
        wildcard = ipaddress.ip_address(host).is_unspecified
    except ValueError:
        wildcard = False
    # Everything missing is said at once: mended one refusal at a time, a start takes three.
    missing = []
    if wildcard and not public_urls:
        missing.append(
            f"--host {host} listens on every address, so the Host header could not be checked "
            "against it: name the address browsers use with --public-url URL (in a container: "
            "--public-url http://localhost:8765 for its published port, say), or give the one "
            "address browsers reach this host at."
        )
    away = [url for url in public_urls if not is_loopback(urlsplit(url).hostname or "")]
    if token is None and away:
        missing.append(
            f"--public-url {away[0]} is reached from other hosts: the console needs a token "
            f"there. Set ${TOKEN_ENV} (or the variable --token-env NAME names) to a long random "
            "string."
        )
    elif token is None and not is_loopback(host):
        missing.append(
            f"--host {host} is not a loopback address: the console needs a token there. Set "
            f"${TOKEN_ENV} (or the variable --token-env NAME names) to a long random string, "
            "e.g. `export TEAMS_RUNTIME_CONSOLE_TOKEN=$(python3 -c 'import secrets; "
            "print(secrets.token_urlsafe(32))')`."
        )
    if missing:
        raise UserError(" Also: ".join(missing) + " Nothing was started.")
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise UserError(
            f"${name} holds {len(token)} characters: a console token needs at least "
            f"{MIN_TOKEN_CHARS}. Nothing was started."
        )
    return token
