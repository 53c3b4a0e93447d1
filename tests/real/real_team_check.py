"""The real team check of issue 32 (its must-show): a team run against a real llama.cpp-based
server with a 4,096-token context, on requests whose 40 events carry 2-6 KB payloads, with
``prompt_context.max_prompt_tokens: auto`` and ``model.openai.context_tokens: 4096``.

    just real-model-check --team [--python PY] [--requests 3]

``real_model_check.py`` starts the server (the AMX workaround included) and hands it here. The
team is two roles (``team.roles: [planner, qa]``), each finishing a request itself
(``hands_to: [""]``), one call at a time each, one attempt a prompt; the requests are seeded as
the tests seed them (a record created, an envelope queued), the first for the planner, the rest
for qa. Each prompt the roles send is kept as it goes to the backend, then checked:

1. no call is refused for its context ("context exceeded", or an empty stream), and every
   request reaches an outcome (completed or failed, nothing left queued);
2. each prompt, by the server's own count of the whole of it (``/extras/tokenize`` of the
   prompt, plus the tokens the chat template adds, measured on an empty message), fits the
   auto budget (the window less the answer's reserve, sent as ``max_tokens``);
3. each prompt's estimate (its prompt record's ``prompt_tokens_estimate``, counted as
   ``token_count_method`` says) is within 5% of that count.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import yaml
from real_model_check import Checks, _chat, _payload

from teams_runtime.actors.models import ModelBackend, ModelReply, auto_budget
from teams_runtime.actors.team import Team
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.demo import sample_record
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.storage import FileWorkQueue, Workspace, load_team_config
from teams_runtime.storage.files.file_store import create_record

ROLES = ["planner", "qa"]
EVENTS = 40
WITHIN = 0.05  # the estimates' distance from the server's count, at most


class _Sent:
    """A prompt as it went to the backend."""

    def __init__(self, bundle: PromptBundle) -> None:
        self.role, self.request_id, self.purpose = bundle.role, bundle.request_id, bundle.purpose
        self.text = bundle.text()
        self.max_tokens = bundle.max_tokens
        self.seconds = 0.0


class _Recording:
    """A role's backend, keeping each prompt it is given."""

    def __init__(self, inner: ModelBackend, sent: list[_Sent]) -> None:
        self.inner, self.sent, self.name = inner, sent, inner.name

    async def complete(self, bundle: PromptBundle) -> ModelReply:
        sent = _Sent(bundle)
        self.sent.append(sent)
        started = time.monotonic()
        try:
            return await self.inner.complete(bundle)
        finally:
            sent.seconds = time.monotonic() - started


def _record(request_id: str) -> dict[str, Any]:
    """A request of ``EVENTS`` events, each carrying a payload of 2-6 KB (a report with a diff
    and prose), the sizes spread over the range."""
    record = sample_record(EVENTS, request_id, ROLES)
    for index, event in enumerate(record["events"]):
        size = 2000 + (index * 1637) % 4001
        event["payload"] = {**event.get("payload", {}), "report": _payload(index, size)}
    return record


def _workspace(folder: Path, root: str, model: str, n_ctx: int, requests: int) -> Workspace:
    workspace = Workspace(folder / "team")
    workspace.requests_dir.mkdir(parents=True)
    openai = {"base_url": f"{root}/v1", "model": model, "context_tokens": n_ctx,
              "timeout_seconds": 1800, "temperature": 0}  # fmt: skip
    config = {
        "team": {"roles": ROLES},
        "prompt_context": {"max_prompt_tokens": "auto"},
        "model": {"backend": "openai", "attempts": 1, "openai": openai},
        "roles": {role: {"hands_to": [""], "concurrency": 1} for role in ROLES},
    }
    workspace.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    queue = FileWorkQueue(workspace, roles=ROLES)
    for number in range(1, requests + 1):
        request_id = f"req-{number}"
        create_record(workspace.record_paths(request_id), _record(request_id))
        role = ROLES[0] if number == 1 else ROLES[1]
        queue.put(MessageEnvelope(request_id=request_id, sender="user", target=role,
                                  intent="review", scope="Review the latest report"))  # fmt: skip
    return workspace


def _whole_count(root: str, text: str, template: int) -> int:
    listed = httpx.post(f"{root}/extras/tokenize", json={"input": text}, timeout=120)
    return len(listed.json()["tokens"]) + template


def _matched(prompts: list[Any], sent: list[_Sent]) -> Iterator[tuple[Any, _Sent]]:
    """Each prompt record with the prompt it records (the same role, request and purpose, in
    the order they were sent)."""
    waiting = list(sent)
    for record in prompts:
        same = next(s for s in waiting if (s.role, s.request_id, s.purpose) ==
                    (record.role, record.request_id, record.purpose))  # fmt: skip
        waiting.remove(same)
        yield record, same


def run_team_check(
    checks: Checks, root: str, model: str, n_ctx: int, folder: Path, requests: int
) -> None:
    """The team run and its checks (the module's docstring)."""
    workspace = _workspace(folder, root, model, n_ctx, requests)
    budget = auto_budget(n_ctx, None)
    print(f"     auto budget: {budget.prompt_tokens} prompt tokens, max_tokens {budget.max_tokens}")
    team = Team(workspace.root, load_team_config(workspace.root), keep_prompt_records=True)
    sent: list[_Sent] = []
    for role, backend in team.backends.items():
        team.backends[role] = _Recording(backend, sent)
    started = time.monotonic()
    summary = anyio.run(lambda: team.run(once=True))
    print(f"     the run: {time.monotonic() - started:.0f} s, {summary.model_calls} calls, "
          f"{summary.done} done, {summary.failed} failed")  # fmt: skip
    states = {}
    reasons = []
    for number in range(1, requests + 1):
        record = json.loads(workspace.request_path(f"req-{number}").read_bytes())
        states[f"req-{number}"] = record.get("status")
        reasons += [event["payload"]["reason"] for event in record["events"]
                    if event["type"] == "model_failed"]  # fmt: skip
    for reason in reasons:  # content-free: why a call failed
        print(f"     model_failed: {reason[:300]}")
    refused = [reason for reason in reasons if "context" in reason.lower()]
    left = FileWorkQueue(workspace, roles=ROLES).counts()
    checks.check("every request reached an outcome, nothing left queued",
                 all(state in ("completed", "failed") for state in states.values())
                 and not sum(left.values()), f"{states}, queued {left}")  # fmt: skip
    checks.check("no call was refused for its context", not refused,
                 f"{len(refused)} model_failed events naming the context")  # fmt: skip
    template = _chat(root, model, "", 1, stream=False).json()["usage"]["prompt_tokens"]
    print(f"     the chat template adds {template} tokens to a user message")
    errors = []
    for record, prompt in _matched(team.summary.prompts, sent):
        whole = _whole_count(root, prompt.text, template)
        estimate = record.prompt_tokens_estimate or 0
        error = (estimate - whole) / whole
        errors.append(error)
        checks.check(
            f"{record.role} {record.request_id} ({record.purpose}): the whole prompt fits",
            whole <= budget.prompt_tokens and prompt.max_tokens == budget.max_tokens,
            f"{whole} tokens by the server's count <= {budget.prompt_tokens}, max_tokens "
            f"{prompt.max_tokens}; {record.included_events} of {record.total_events} events, "
            f"{len(prompt.text)} characters; outcome {record.outcome}, {prompt.seconds:.0f} s",
        )
        checks.check(
            f"{record.role} {record.request_id}: the estimate within 5%",
            abs(error) <= WITHIN,
            f"estimate {estimate} ({record.token_count_method}) against {whole}: {error:+.1%}; "
            f"the server reported prompt_tokens {record.prompt_tokens}",
        )
    checks.check("every prompt was recorded and checked",
                 len(errors) == len(sent) == summary.model_calls > 0,
                 f"{len(errors)} records, {len(sent)} prompts sent")  # fmt: skip
