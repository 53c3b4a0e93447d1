"""The web console (``teams-runtime serve``): the team live, the requests, any role's prompt
with its receipt, the inbox with a form that answers, the metrics; and under ``/api/...`` the
``--json`` of the commands, made by their own code. Starlette on anyio, served by uvicorn (the
``web`` extra); plain HTML, CSS and a little JavaScript, shipped in ``static/``.

``_app`` puts it together: ``_guard`` (Host, login, CSRF), ``_reads`` (what it reads, through
the commands' code), ``_api`` (the JSON), the pages (``_team``, ``_request_pages``,
``_inbox_pages``, ``_metrics_page``) drawn with ``_html``.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence

from teams_runtime.cli.console._app import console_app
from teams_runtime.cli.console._guard import WILDCARDS
from teams_runtime.storage import Workspace

__all__ = ["console_app", "serve"]


def serve(
    workspace: Workspace,
    *,
    host: str,
    listening: socket.socket,
    token: str | None,
    public_urls: Sequence[str] = (),
) -> None:
    """Serve ``workspace``'s console on ``listening`` (a socket bound to ``host``, so a port
    in use was said before anything started) until Ctrl-C or SIGTERM."""
    import uvicorn

    app = console_app(workspace, host=host, token=token, public_urls=public_urls)
    # The access log names paths only (ids and roles; a token never travels in a URL), and no
    # request body or prompt is logged. Open live pages are closed after a second at the end.
    port = listening.getsockname()[1]
    config = uvicorn.Config(
        app, host=host, port=port, server_header=False, timeout_graceful_shutdown=1
    )
    # Given its socket, uvicorn does not say where it listens: said here as it says it (the
    # socket listens already, so a browser's connection waits for the server, never refused).
    listening.listen(2048)
    said = logging.getLogger("uvicorn.error")
    if host in WILDCARDS:  # http://0.0.0.0 is no address to open: the Host check refuses it
        said.info("Listening on every address (%s), port %d (Press CTRL+C to quit)", host, port)
    else:
        shown = f"[{host}]" if ":" in host else host
        said.info("Uvicorn running on http://%s:%d (Press CTRL+C to quit)", shown, port)
    for url in public_urls:  # the addresses browsers open it at
        said.info("Open the console at %s", url)
    uvicorn.Server(config).run(sockets=[listening])
