"""A workspace for the console's tests: the writer/reviewer/approver team of docs/roles.md
(the fake model for the two models, a person for ``approver``), one request run to the
approver's inbox, and one whose scope holds a script tag."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path
from typing import Any

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


def console_team(root: Path, fake_model: Path) -> Path:
    """The team's workspace at ``root``: ``req-1`` waits for the approver, ``req-2`` (a scope
    with a script tag) for the writer."""
    assert main(["init", str(root)]) == 0
    config = yaml.safe_load((root / "team_runtime.yaml").read_text())
    (root / "script.json").write_text(json.dumps(SCRIPT))
    config["team"] = {"roles": list(TEAM)}
    config["roles"] = TEAM
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
