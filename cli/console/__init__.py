"""The web console (``teams-runtime serve``): the team live, the requests, any role's prompt
with its receipt, the inbox with a form that answers, the metrics; and under ``/api/...`` the
``--json`` of the commands, made by their own code. Starlette on anyio, served by uvicorn (the
``web`` extra); plain HTML, CSS and a little JavaScript, shipped in ``static/``.

``_app`` puts it together: ``_guard`` (Host, login, CSRF), ``_reads`` (what it reads, through
the commands' code), ``_api`` (the JSON), the pages (``_team``, ``_request_pages``,
``_inbox_pages``, ``_metrics_page``) drawn with ``_html``.
"""

from __future__ import annotations

from teams_runtime.cli.console._app import console_app
from teams_runtime.storage import Workspace

__all__ = ["console_app", "serve"]


def serve(workspace: Workspace, *, host: str, port: int, token: str | None) -> None:
    """Serve ``workspace``'s console on ``host``:``port`` until Ctrl-C or SIGTERM."""
    import uvicorn

    app = console_app(workspace, host=host, token=token)
    # The access log names paths only (ids and roles; a token never travels in a URL), and no
    # request body or prompt is logged. Open live pages are closed after a second at the end.
    config = uvicorn.Config(
        app, host=host, port=port, server_header=False, timeout_graceful_shutdown=1
    )
    uvicorn.Server(config).run()
