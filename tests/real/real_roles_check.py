"""The real roles check of issue 33 (its must-show on a real server): a team of three roles
(the issue's writer, reviewer and editor, a draft in ``output``) on three requests against
llama-cpp-python's server started with its default flags (``--interrupt_requests`` on), the
runtime's defaults otherwise (no ``max_concurrent``, no ``context_tokens``: its pace is what
it finds); and the same run with ``model.tools.read_events: true``.

    just real-model-check --roles [--python PY] [--requests 3] [--tools off|on|both]
                                  [--max-tokens N]
    just real-model-check --roles --chat-format chatml-function-calling --tools on

``real_model_check.py`` starts the server (the AMX workaround included) and hands it here. The
requests are submitted as a user would (``submit``), all to the writer; the writer hands to
the reviewer, the reviewer back to the writer or on to the editor, the editor ends the request.
``team.max_hops: 6`` bounds a writer and reviewer who never agree (a ``hop_limit`` failure is
an honest outcome). Each run prints, per request, its outcome and why (the ``model_failed``
reasons, content-free), then its figures: model calls, outcomes of the prompt records, tool
rounds and calls, the tokens the server says it read and wrote (its own log: llama-cpp-python
reports no usage in a stream), the streams it cut (its log's ``disconnected``), the calls the
pace sent again, and the most calls that ran at once. Checked:

1. every request reached an outcome (completed, or failed with a reason; nothing queued);
2. no call failed for a stream the server cut: no ``model_failed`` reason of a cut or empty
   stream, and every stream the server cut was sent again by the pace;
3. at most one call ran at once (the default pace of a local server that reports no slots);
4. with tools on: whether the model called a tool at all, and what its rounds returned, is
   printed as it came (a tiny model may not call one: that is said, not failed).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import yaml
from real_model_check import Checks

from teams_runtime import Team, submit
from teams_runtime._logs import logger
from teams_runtime.cli._request_status import request_status
from teams_runtime.storage import FileWorkQueue, Workspace, load_team_config

ROLES = ["writer", "reviewer", "editor"]
SCOPES = [
    "A launch note for the CSV export: what it does and how to turn it on.",
    "A short changelog entry for the fixed date format in reports.",
    "Two sentences for the API page on how to page through results.",
]
# What the server's log says per completion (llama.cpp's perf lines): tokens read, and
# tokens written; and a stream it ended because another request came ("disconnected").
_PROMPT_EVAL = re.compile(r"prompt eval time =.*?/\s*(\d+) tokens")
_EVAL = re.compile(r"^\s*llama_perf_context_print:\s+eval time =.*?/\s*(\d+) runs", re.M)
_CUT_REASONS = ("answered nothing", "stream", "cut")


@dataclass
class RunFigures:
    """One run's figures, for the comparison of tools off and on."""

    label: str
    seconds: float = 0.0
    states: dict[str, str] = field(default_factory=dict)
    hops: dict[str, int] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    calls: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    tool_rounds: int = 0
    tool_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    server_cut: int = 0
    busy_resends: int = 0
    most_running: int = 0
    tools_seen: list[str] = field(default_factory=list)


def _workspace(
    folder: Path, root: str, model: str, read_events: bool, max_tokens: int | None
) -> Workspace:
    workspace = Workspace(folder)
    workspace.requests_dir.mkdir(parents=True)
    rules = {
        "writer": ["Write the draft the scope asks for, in plain words.",
                   "Hand every draft to the reviewer."],
        "reviewer": ["Check the draft against the scope; send it back to the writer with what "
                     "to change.", "Pass it to the editor once it says what the scope asks."],
        "editor": ["Fix spelling, grammar and tone; change no meaning.",
                   "End the request with the edited draft."],
    }  # fmt: skip
    hands = {"writer": ["reviewer"], "reviewer": ["writer", "editor"], "editor": [""]}
    model_section: dict[str, Any] = {
        "backend": "openai",
        "openai": {"base_url": f"{root}/v1", "model": model},
    }
    if max_tokens is not None:  # bounds a rambling model (the default: none, the window's)
        model_section["openai"]["max_tokens"] = max_tokens
    if read_events:
        model_section["tools"] = {"read_events": True}
    config = {
        "team": {"roles": ROLES, "max_hops": 6},
        "model": model_section,
        "roles": {
            role: {"rules": rules[role], "hands_to": hands[role], "output": True} for role in ROLES
        },
    }
    workspace.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return workspace


def _server_figures(log_text: str, figures: RunFigures) -> None:
    figures.prompt_tokens = sum(int(n) for n in _PROMPT_EVAL.findall(log_text))
    figures.completion_tokens = sum(int(n) for n in _EVAL.findall(log_text))
    figures.server_cut = log_text.count("\ndisconnected")


def _attempt_reasons(workspace: Workspace) -> dict[str, int]:
    """Why calls failed or answers were rejected, and the contract's issues, counted (the
    attempts files: reasons and issues are content-free, the answers are not printed)."""
    counted: dict[str, int] = {}
    for path in sorted(workspace.runtime_dir.glob("attempts/*/*.json")):
        kept = json.loads(path.read_text())
        if "reason" not in kept:
            continue  # a tools file
        for what in [kept["reason"], *(f"  issue: {i}" for i in kept.get("issues") or [])]:
            counted[what] = counted.get(what, 0) + 1
    return counted


def _tools_seen(workspace: Workspace) -> list[str]:
    """What each tool round asked and what it got back, in short (the attempts' tools files)."""
    seen = []
    for path in sorted(workspace.runtime_dir.glob("attempts/*/*-tools.json")):
        kept = json.loads(path.read_text())
        for call in kept.get("tool_calls", []):
            seen.append(json.dumps(call)[:300])
    return seen


async def _run(workspace: Workspace, requests: int) -> tuple[Team, list[str], int]:
    ids = []
    for number in range(requests):
        scope = SCOPES[number % len(SCOPES)]
        ids.append((await submit(workspace.root, role="writer", scope=scope)).request_id)
    team = Team(workspace.root, load_team_config(workspace.root), keep_prompt_records=True)
    busy: list[str] = []
    # The package's lines are off until a program turns them on: only the pace's are kept.
    logger.remove()
    logger.enable("teams_runtime")
    sink = logger.add(lambda line: busy.append(line), filter=lambda r: "was busy" in r["message"])
    try:
        await team.run(once=True)
    finally:
        logger.remove(sink)
        logger.disable("teams_runtime")
    return team, ids, len(busy)


def run_roles_check(
    checks: Checks, root: str, model: str, folder: Path, server_log: Path, requests: int,
    read_events: bool, max_tokens: int | None = None,
) -> RunFigures:  # fmt: skip
    """One run of the team and its checks (the module's docstring); its figures."""
    label = "read_events on" if read_events else "read_events off"
    workspace = _workspace(folder / label.replace(" ", "-"), root, model, read_events, max_tokens)
    figures = RunFigures(label)
    before = server_log.stat().st_size
    started = time.monotonic()
    team, ids, figures.busy_resends = anyio.run(_run, workspace, requests)
    figures.seconds = time.monotonic() - started
    with server_log.open("rb") as log:
        log.seek(before)
        _server_figures(log.read().decode("utf-8", "replace"), figures)
    for request_id in ids:
        record = json.loads(workspace.request_path(request_id).read_bytes())
        figures.states[request_id] = record.get("status")
        figures.hops[request_id] = record.get("hops", 0)
        failure = request_status(workspace, request_id)["failure"]
        why = [failure["reason"]] if failure else []
        figures.reasons += why
        print(f"     {label}: {request_id} {record.get('status')} after "
              f"{record.get('hops', 0)} hops{': ' + why[0] if why else ''}")  # fmt: skip
    for reason, count in _attempt_reasons(workspace).items():
        print(f"     {label}: {count} x {reason}")
    prompts = team.summary.prompts
    figures.calls = len(prompts)
    for prompt in prompts:
        outcome = str(prompt.outcome)
        figures.outcomes[outcome] = figures.outcomes.get(outcome, 0) + 1
        figures.tool_rounds += prompt.tool_rounds or 0
        figures.tool_calls += prompt.tool_calls or 0
    figures.most_running = team.servers.server(f"{root}/v1").pace.most_running
    figures.tools_seen = _tools_seen(workspace)
    print(f"     {label}: {figures.seconds:.0f} s, {figures.calls} calls {figures.outcomes}, "
          f"tool rounds {figures.tool_rounds}, tool calls {figures.tool_calls}, server tokens "
          f"read {figures.prompt_tokens} written {figures.completion_tokens}, streams the "
          f"server cut {figures.server_cut}, calls the pace sent again {figures.busy_resends}, "
          f"most calls at once {figures.most_running}")  # fmt: skip
    for seen in figures.tools_seen:
        print(f"     {label}: tool call {seen}")
    left = FileWorkQueue(workspace, roles=ROLES).counts()
    checks.check(f"{label}: every request reached an outcome, nothing left queued",
                 all(s in ("completed", "failed") for s in figures.states.values())
                 and not sum(left.values()), f"{figures.states}, queued {left}")  # fmt: skip
    cut = [r for r in figures.reasons if any(word in r for word in _CUT_REASONS)]
    checks.check(f"{label}: no call failed for a stream the server cut", not cut,
                 f"{len(cut)} failed so: {cut[:2]}")  # fmt: skip
    checks.check(f"{label}: every stream the server cut was sent again",
                 figures.server_cut <= figures.busy_resends,
                 f"cut {figures.server_cut}, sent again {figures.busy_resends}")  # fmt: skip
    checks.check(f"{label}: at most one call at once", figures.most_running <= 1,
                 f"{figures.most_running}")  # fmt: skip
    if read_events:
        print(f"     {label}: the model called a tool: "
              f"{'yes' if figures.tool_calls else 'no'} ({figures.tool_calls} calls)")  # fmt: skip
    return figures
