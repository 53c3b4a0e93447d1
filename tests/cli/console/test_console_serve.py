"""``teams-runtime serve`` as a real process: it listens on loopback, and the live pages' events
come as server-sent events, each the team's (``status --watch`` in a browser) or the inbox's
state."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from ...support.console_team import console_team
from ...support.processes import stderr_until


def test_serve_streams_the_team_live_on_loopback(tmp_path: Path, fake_model: Path) -> None:
    root = console_team(tmp_path / "ws", fake_model)
    server = subprocess.Popen(
        [sys.executable, "-m", "teams_runtime", "serve", "--workspace", str(root), "--port", "0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        said = stderr_until(server, "Uvicorn running on http://127.0.0.1:", 30)
        found = re.search(r"http://127\.0\.0\.1:(\d+)", said)
        assert found is not None
        url = f"http://127.0.0.1:{found.group(1)}"
        with httpx.stream("GET", f"{url}/events/team", timeout=30) as events:
            assert events.headers["content-type"].startswith("text/event-stream")
            lines = events.iter_lines()
            assert next(lines) == "event: team"
            data = next(lines)
        assert data.startswith("data: ") and "<h2>Roles</h2>" in data
        assert "<td>approver</td><td>human: a person answers (inbox)</td>" in data
        with httpx.stream("GET", f"{url}/events/inbox", timeout=30) as events:  # the inbox too
            lines = events.iter_lines()
            assert next(lines) == "event: inbox"
            assert 'href="/inbox/req-1?role=approver"' in next(lines)
    finally:
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=30)
    # Ctrl-C ends it as it ends every command: a note and 130, no traceback.
    assert server.returncode == 130, err
    assert "Traceback" not in err and err.endswith("teams-runtime: interrupted\n")


def test_serve_on_every_address_prints_the_addresses_to_open(
    tmp_path: Path, fake_model: Path
) -> None:
    """``--host 0.0.0.0`` names no host to open (the Host check refuses it): the
    ``--public-url`` addresses are printed instead."""
    import os
    import socket

    root = console_team(tmp_path / "ws", fake_model)
    with socket.socket() as probe:  # a free port, for the public URL to name
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    public = f"http://localhost:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "teams_runtime", "serve", "--workspace", str(root),
         "--host", "0.0.0.0", "--port", str(port), "--public-url", public],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
        env={**os.environ, "TEAMS_RUNTIME_CONSOLE_TOKEN": "a-console-token-long-enough"},
    )  # fmt: skip
    try:
        said = stderr_until(server, f"Open the console at {public}", 30)
        assert "http://0.0.0.0" not in said
        assert f"Listening on every address (0.0.0.0), port {port}" in said
    finally:
        server.send_signal(signal.SIGINT)
        server.communicate(timeout=30)
