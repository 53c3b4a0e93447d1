"""A role's prompts under its token budget, as a running team sends them: fitted before they
are sent, never sent over it, one prompt made again when the server still says "context
exceeded", and what the prompt records say of it (``actors.roles._budget``, ``_calls``)."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
import yaml

from teams_runtime.actors.models import ServerFacts
from teams_runtime.actors.models.windows import ServerWindow
from teams_runtime.actors.roles._budget import PromptBudgeter
from teams_runtime.actors.team import RunSummary
from teams_runtime.codecs.config import ModelConfig, OpenAIConfig, PromptBudget
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.prompt_records import encode_prompt_record
from teams_runtime.demo import sample_record
from teams_runtime.policy.projection import project_request
from teams_runtime.policy.prompts import build_prompt
from teams_runtime.storage import FileWorkQueue, Workspace

from ...support.fake_openai_server import FakeOpenAIServer, Text

pytestmark = pytest.mark.anyio

RunOnce = Callable[..., Awaitable[RunSummary]]
Seed = Callable[..., None]
ReadRecord = Callable[[Workspace, str], dict[str, Any]]


def _with_budget(workspace: Workspace, budget: object, **model: Any) -> Workspace:
    config = yaml.safe_load(workspace.config_path.read_text())
    config["prompt_context"] = {"max_prompt_tokens": budget}
    config["model"].update(model)
    workspace.config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return workspace


def _failures(record: dict[str, Any]) -> list[dict[str, Any]]:
    return [event for event in record["events"] if event["type"] == "model_failed"]


def _notice(prompt: str) -> dict[str, Any]:
    block = prompt.split("Current request event-history projection:\n", 1)[1]
    found: dict[str, Any] = json.loads(block.split("\nThe `events` array", 1)[0])
    return found


async def test_a_prompt_over_its_budget_is_fitted_before_it_is_sent(
    openai_workspace: Callable[..., Workspace], seed: Seed, run_once: RunOnce,
    openai_server: FakeOpenAIServer,
) -> None:  # fmt: skip
    workspace = _with_budget(openai_workspace(), 2_000)
    seed(workspace, "req-1", "qa", events=40)
    summary = await run_once(workspace, roles=["qa"])
    assert summary.done == 1
    (request,) = openai_server.requests
    notice = _notice(request.prompt)
    assert notice["max_prompt_tokens"] == 2_000
    assert notice["included_events"] < 16 and notice["omitted_events"] == 40 - notice[
        "included_events"]  # fmt: skip
    (record,) = summary.prompts
    assert (record.max_prompt_tokens, record.token_count_method) == (2_000, "default")
    assert record.prompt_tokens is not None  # the server's count: chars / 4
    assert record.prompt_tokens <= record.prompt_tokens_estimate <= 2_000  # type: ignore[operator]
    assert record.included_events == notice["included_events"]


async def test_without_a_budget_records_and_prompts_are_as_before(
    openai_workspace: Callable[..., Workspace], seed: Seed, run_once: RunOnce,
    openai_server: FakeOpenAIServer,
) -> None:  # fmt: skip
    workspace = openai_workspace()
    seed(workspace, "req-1", "qa", events=40)
    summary = await run_once(workspace, roles=["qa"])
    (record,) = summary.prompts
    line = encode_prompt_record(record)
    assert "max_prompt_tokens" not in line and "token_count_method" not in line
    assert line.endswith(',"finish_reason":"stop"}')
    notice = _notice(openai_server.requests[0].prompt)
    assert list(notice)[-1] == "canonical_request"  # the spec's keys, nothing after them


async def test_a_prompt_that_cannot_fit_is_never_sent_and_fails_for_good(
    openai_workspace: Callable[..., Workspace], seed: Seed, run_once: RunOnce,
    openai_server: FakeOpenAIServer, read_record: ReadRecord,
) -> None:  # fmt: skip
    workspace = _with_budget(openai_workspace(), 200, on_failure="requeue")
    seed(workspace, "req-1", "qa", events=10)
    summary = await run_once(workspace, roles=["qa"])
    assert openai_server.requests == []  # nothing sent
    assert summary.failed == 1 and summary.prompts == []
    (failed,) = [
        e for e in read_record(workspace, "req-1")["events"] if e["type"] == "model_failed"
    ]
    assert failed["payload"]["reason"].startswith(
        "the prompt cannot fit its budget of 200 tokens (prompt_context.max_prompt_tokens) even "
        "without any event: its brief"
    )
    assert sum(FileWorkQueue(workspace).counts().values()) == 0  # not requeued: final
    assert failed["payload"]["cause"] == "prompt_too_large"  # status says so, not "retry"
    assert failed["payload"]["reason"].endswith(
        "What would help: a larger budget (prompt_context.max_prompt_tokens), or a shorter "
        "request (its result, scope or body)."
    )


async def test_a_server_still_over_gets_one_prompt_made_smaller_then_the_failure(
    openai_workspace: Callable[..., Workspace], seed: Seed, run_once: RunOnce,
    openai_server: FakeOpenAIServer, read_record: ReadRecord,
) -> None:  # fmt: skip
    # llama-cpp-python's server: an empty stream past its context, saying no figures.
    openai_server.flavour, openai_server.n_ctx_chars = "llama-cpp-python", 6_000
    workspace = _with_budget(openai_workspace(), 3_000, structured_output="json_object")
    seed(workspace, "req-1", "qa", events=40)
    summary = await run_once(workspace, roles=["qa"])
    chat = [r for r in openai_server.requests if r.path.endswith("/chat/completions")]
    first, second = chat  # the prompt, then once made smaller: no more
    assert len(second.prompt) < len(first.prompt)
    estimate = summary.prompts[0].prompt_tokens_estimate
    assert estimate is not None
    # Made again a tenth of the budget under its estimate (the server said no figures).
    assert _notice(second.prompt)["max_prompt_tokens"] == estimate - 300
    assert summary.failed == 1
    (failed,) = _failures(read_record(workspace, "req-1"))
    reason = failed["payload"]["reason"]
    assert reason.startswith("the prompt does not fit the model server's context: it answered")
    assert "at its budget of 3000 tokens (prompt_context.max_prompt_tokens;" in reason
    less = 3_000 - estimate + 300
    assert f"again when made {less} tokens smaller; lower prompt_context.max_prompt_tokens" in (
        reason
    )


async def test_the_second_prompt_goes_through_when_it_fits(
    openai_workspace: Callable[..., Workspace], seed: Seed, run_once: RunOnce,
    openai_server: FakeOpenAIServer, tmp_path: Any,
) -> None:  # fmt: skip
    measure = _with_budget(openai_workspace(root=tmp_path / "measure"), 3_000)
    seed(measure, "req-1", "qa", events=40)
    await run_once(measure, roles=["qa"])
    (measured,) = [r for r in openai_server.requests if r.path.endswith("/chat/completions")]
    size = len(measured.prompt)
    openai_server.requests.clear()
    openai_server.flavour, openai_server.n_ctx_chars = "llama.cpp", size - 40
    workspace = _with_budget(openai_workspace(root=tmp_path / "ws"), 3_000)
    seed(workspace, "req-1", "qa", events=40)
    summary = await run_once(workspace, roles=["qa"])
    chat = [r for r in openai_server.requests if r.path.endswith("/chat/completions")]
    assert len(chat) == 2 and summary.done == 1
    assert [r.outcome for r in summary.prompts] == ["failed", "completed"]


async def test_a_models_ratio_is_learned_from_its_calls(
    openai_workspace: Callable[..., Workspace], seed: Seed, run_once: RunOnce,
) -> None:  # fmt: skip
    workspace = _with_budget(openai_workspace(), 6_000)
    for number in range(5):
        seed(workspace, f"req-{number}", "qa", events=40)
    summary = await run_once(workspace, roles=["qa"], concurrency=1)
    methods = [record.token_count_method for record in summary.prompts]
    assert methods[:3] == ["default"] * 3 and methods[-1] == "learned"
    learned = summary.prompts[-1]
    assert learned.prompt_tokens is not None and learned.prompt_tokens_estimate is not None
    # The fake server counts 4 characters a token: the learned estimate is its count + 5%.
    assert 1.0 <= learned.prompt_tokens_estimate / learned.prompt_tokens <= 1.07


class _Tokenizer:
    def __init__(self) -> None:
        self.texts: list[str] = []

    async def count(self, text: str) -> int:
        self.texts.append(text)
        return len(text) // 4 + 1


async def test_a_servers_tokenizer_counts_each_event_once() -> None:
    tokenizer = _Tokenizer()
    budgeter = PromptBudgeter(
        "qa",
        PromptBudget(max_prompt_tokens=1_500, source="global"),
        ModelConfig(),
        "dry_run/dry_run",
        tokenizer=tokenizer,
    )
    envelope = MessageEnvelope(request_id="req-1", sender="planner", target="qa")
    projection = project_request(sample_record(40, "req-1"))
    bundle = build_prompt("task", role="qa", projection=projection, envelope=envelope)
    fitted, facts = await budgeter.fit(bundle)
    assert (facts.token_count_method, facts.max_prompt_tokens) == ("server", 1_500)
    assert fitted.projection.budget is not None
    counted = len(tokenizer.texts)
    # The brief, the record, the envelope, and each selected event.
    assert counted == 3 + len(projection.selected_indices)
    again, _ = await budgeter.fit(bundle)
    assert len(tokenizer.texts) == counted  # all cached: a warm prompt asks the server nothing
    assert again.text() == fitted.text()


async def test_auto_is_the_servers_window_less_the_reserve_it_asks_for(
    openai_workspace: Callable[..., Workspace], seed: Seed, run_once: RunOnce,
    openai_server: FakeOpenAIServer,
) -> None:  # fmt: skip
    openai_server.flavour = "llama.cpp"  # /props says its window (4,096), /tokenize counts
    workspace = _with_budget(openai_workspace(), "auto")
    seed(workspace, "req-1", "qa", events=40)
    summary = await run_once(workspace, roles=["qa"])
    assert summary.done == 1
    (record,) = summary.prompts
    reserve = 4096 // 4  # no max_tokens written: a quarter of the window
    assert (record.max_prompt_tokens, record.token_count_method) == (4096 - reserve, "server")
    chat = [request for request in openai_server.requests if request.path.endswith("/completions")]
    assert chat[0].json()["max_tokens"] == reserve  # so the answer stays inside the window
    assert record.prompt_tokens is not None and record.prompt_tokens_estimate is not None
    assert record.prompt_tokens <= record.prompt_tokens_estimate <= 4096 - reserve


class _SlowWindow(ServerFacts):
    """A server whose window takes a while to learn, and that has no tokenizer."""

    async def window(self, settings: OpenAIConfig) -> ServerWindow:
        await anyio.sleep(0.05)  # the first prompts' fits all arrive meanwhile
        return ServerWindow(context_tokens=4096, source="llama.cpp /props n_ctx")

    async def tokenizer(self, settings: OpenAIConfig) -> None:
        return None


async def test_concurrent_first_prompts_all_wait_for_an_auto_budget() -> None:
    model = ModelConfig(
        backend="openai", openai=OpenAIConfig(base_url="http://127.0.0.1:1/v1", model="m")
    )
    budgeter = PromptBudgeter(
        "qa", PromptBudget(max_prompt_tokens="auto", source="global"), model, "openai/m",
        facts=_SlowWindow(),
    )  # fmt: skip
    envelope = MessageEnvelope(request_id="req-1", sender="planner", target="qa")
    bundle = build_prompt(
        "task", role="qa", projection=project_request(sample_record(40, "req-1")),
        envelope=envelope,
    )  # fmt: skip
    budgets: list[int | None] = []

    async def fit() -> None:
        _, facts = await budgeter.fit(bundle)
        budgets.append(facts.max_prompt_tokens)

    async with anyio.create_task_group() as group:
        for _ in range(4):
            group.start_soon(fit)
    assert budgets == [3072] * 4  # before: the first resolved it, the others went unbudgeted


async def test_a_repair_shows_a_long_rejected_answer_shorter_to_fit_its_budget(
    openai_workspace: Callable[..., Workspace], seed: Seed, run_once: RunOnce,
    openai_server: FakeOpenAIServer,
) -> None:  # fmt: skip
    workspace = _with_budget(openai_workspace(), 1_500)
    seed(workspace, "req-1", "qa", events=3)
    openai_server.then(Text("x" * 3_800))  # cut at the window: not JSON, far from it
    summary = await run_once(workspace, roles=["qa"])
    assert summary.done == 1  # before: the repair could not fit, a final failure
    chat = [r for r in openai_server.requests if r.path.endswith("/chat/completions")]
    _, repair = chat
    assert "x" * 400 in repair.prompt and "x" * 401 not in repair.prompt
