"""A workspace for the console's tests: the writer/reviewer/approver team of docs/roles.md
(the fake model for the two models, a person for ``approver``), one request run to the
approver's inbox, and one whose scope holds a script tag."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import yaml

from teams_runtime.cli import main

TEAM: dict[str, Any] = {
    "writer": {"rules": ["Write the draft the scope asks for."], "hands_to": ["reviewer"]},
    "reviewer": {"hands_to": ["writer", "approver", ""]},
    "approver": {"rules": ["Approve the reviewed draft, or send it back to the writer."],
                 "hands_to": ["writer", ""], "model": {"backend": "human"}},
}  # fmt: skip
SCRIPT = {"writer": ["reviewer"], "reviewer": ["approver"]}  # who each model hands to
SCRIPT_TAG = "<script>alert(1)</script>"


def cli(root: Path, *argv: str) -> str:
    """Run a command in this process on ``root``; its standard output (exit 0 asserted)."""
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # `export` writes bytes to .buffer
    err = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main([*argv, "--workspace", str(root)])
    assert status == 0, err.getvalue()
    out.flush()
    return out.buffer.getvalue().decode()


def console_team(root: Path, fake_model: Path, *, answer_within: float | None = None) -> Path:
    """The team's workspace at ``root``: ``req-1`` waits for the approver (``answer_within``
    seconds, if given), ``req-2`` (a scope with a script tag) for the writer."""
    assert main(["init", str(root)]) == 0
    config = yaml.safe_load((root / "team_runtime.yaml").read_text())
    (root / "script.json").write_text(json.dumps(SCRIPT))
    config["team"] = {"roles": list(TEAM)}
    config["roles"] = copy.deepcopy(TEAM)
    if answer_within is not None:
        config["roles"]["approver"]["model"]["answer_within"] = answer_within
    config["model"] = {
        "backend": "command",
        "command": [sys.executable, str(fake_model), f"script:{root / 'script.json'}",
                    str(root / "model-state")],
        "timeout_seconds": 20,
    }  # fmt: skip
    (root / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    cli(root, "submit", "--role", "writer", "--scope", "Write the launch note",
        "--request-id", "req-1")  # fmt: skip
    cli(root, "run", "--once")
    cli(root, "submit", "--role", "writer", "--scope", f"Quote {SCRIPT_TAG} as text",
        "--request-id", "req-2")  # fmt: skip
    return root


def compacted_request(root: Path, request_id: str = "req-3", events: int = 24) -> str:
    """A request of ``events`` notes (past ``max_events``: its prompts are compacted), the
    last one's payload holding a script tag; its id."""
    cli(root, "submit", "--role", "writer", "--scope", "Draft the long history",
        "--request-id", request_id)  # fmt: skip
    notes = root / f"{request_id}-notes.jsonl"
    lines = [
        {"type": "note", "actor": "reviewer", "summary": f"Review round {number}",
         "payload": {"round": number, "quote": SCRIPT_TAG if number == events else "fine"}}
        for number in range(1, events + 1)
    ]  # fmt: skip
    notes.write_text("".join(json.dumps(line) + "\n" for line in lines))
    cli(root, "append", request_id, "--from", str(notes))
    return request_id


CONSOLE_BASE = "http://127.0.0.1:8765"  # where a console serves by default


def asgi_client(
    app: object, base: str = CONSOLE_BASE, client: str = "192.0.2.1"
) -> httpx.AsyncClient:
    """A client of ``app`` in this process, as a browser at ``client`` reaching it at
    ``base`` (its Host header) would be."""
    transport = httpx.ASGITransport(app=app, client=(client, 50000))  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url=base)
