"""A replay of a team's real run laid out ``shared_prefix``, against what its model server
received: each call's prompt rebuilt in the order sent, its shared part byte for byte as the
run sent it; and the server's own count of its cache beside the replay's prediction."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from itertools import pairwise
from pathlib import Path

import pytest

from teams_runtime.codecs.prompt_records import decode_prompt_record
from teams_runtime.monitoring.replay import (
    Layout,
    ReplayedPrompt,
    ReplaySetup,
    common_prefix,
    parse_policy,
    replay,
)
from teams_runtime.policy.token_counts import LearnedRatios
from teams_runtime.storage import Workspace, load_team_config

from ..support.cli_in_process import run_cli
from ..support.fake_openai_server import PROMPT_TOKENS_PER_CHAR, FakeOpenAIServer

Seed = Callable[..., None]

# The markers of the shared_prefix layout's parts (policy._shared_prefix).
_PER_HOP = "\n\nCurrent request, continued (the fields that change every hop):\n"
_NOTICE = "\n\nCurrent request event-history projection:\n"
_HEAD = "\n\nYou are the "
_ENVELOPE = "\n\nIncoming envelope"


class _LastPromptServer(FakeOpenAIServer):
    """A server that keeps the prompt it saw last, as llama-cpp-python's does: it reports as
    cached the prefix each prompt shares with the one before it, in its own tokens."""

    @property  # type: ignore[override]
    def cached_tokens(self) -> int:
        prompts = [seen.prompt for seen in self.requests]
        if len(prompts) < 2:
            return 0
        return common_prefix(prompts[-1], prompts[-2]) // PROMPT_TOKENS_PER_CHAR

    @cached_tokens.setter
    def cached_tokens(self, value: int | None) -> None:
        """Ignored: the count comes from the prompts."""


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[_LastPromptServer]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    running = _LastPromptServer()
    running.start()
    try:
        yield running
    finally:
        running.stop()


def _parts(prompt: str) -> dict[str, str]:
    """A shared_prefix prompt cut at its parts' headings: what every role shares, the fields
    a hop sets, the notice, the role's own head, and the envelope."""
    shared, rest = prompt.split(_PER_HOP, 1)
    per_hop, rest = rest.split(_NOTICE, 1)
    notice, rest = rest.split(_HEAD, 1)
    head, envelope = rest.split(_ENVELOPE, 1)
    return {
        "shared": shared,
        "per_hop": per_hop,
        "notice": notice,
        "head": head,
        "envelope": envelope,
    }


@pytest.fixture
def ran(tmp_path: Path, server: _LastPromptServer, seed: Seed) -> Workspace:
    """A workspace laid out shared_prefix (step 4), run on the server: one request of 40
    events handed to the developer, then on along the team."""
    (tmp_path / "team_runtime.yaml").write_text(
        "prompt_context: {layout: shared_prefix, step: 4}\n"
        "model:\n  backend: openai\n  openai:\n"
        f"    base_url: {server.base_url}\n    model: mid-8b\n    timeout_seconds: 10\n"
    )
    workspace = Workspace(tmp_path)
    seed(workspace, "req-run", "developer", events=40)
    return workspace


def test_replay_rebuilds_the_prompts_the_run_sent(
    ran: Workspace, server: _LastPromptServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(capsys, "run", "--once", "--plain", "--workspace", str(ran.root))[0] == 0
    log = ran.logs_dir / "prompt_context.jsonl"
    records = [decode_prompt_record(line) for line in log.read_text().splitlines()]
    assert len(records) == len(server.requests) >= 3
    assert {(record.layout, record.step) for record in records} == {("shared_prefix", 4)}
    rebuilt: list[ReplayedPrompt] = []
    setup = ReplaySetup(load_team_config(ran.root), {}, LearnedRatios())
    policies = [parse_policy("recorded"), parse_policy("configured")]
    layouts = [Layout("upstream"), Layout("shared_prefix")]
    report = replay(
        records, lambda _: ran.request_path("req-run").read_bytes(), policies, layouts, setup,
        rebuilt.append,
    )  # fmt: skip
    for policy in ("recorded", "configured"):  # the config in force is the calls' own
        laid_out = [prompt for prompt in rebuilt if prompt.policy == policy]
        ours = [prompt.text for prompt in laid_out if prompt.layout == "shared_prefix"]
        assert len(ours) == len(server.requests)
        for sent, mine in zip(server.requests, ours, strict=True):
            theirs, again = _parts(sent.prompt), _parts(mine)
            # Byte for byte: the preamble, the fields no hop sets, the stepped selection of
            # events; the notice (its counts); the role's header, rules and contract.
            assert again["shared"] == theirs["shared"]
            assert again["notice"] == theirs["notice"]
            assert again["head"] == theirs["head"]
    upstream = [p for p in rebuilt if p.policy == "configured" and p.layout == "upstream"]
    assert all(prompt.text.startswith("You are the ") for prompt in upstream)
    recorded = {row.layout: row for row in report.rows if row.policy == "recorded"}
    assert recorded["upstream"].prompts == 0
    assert recorded["shared_prefix"].prompts == len(records)


def test_replay_says_the_servers_cached_share_beside_its_prediction(
    ran: Workspace, server: _LastPromptServer, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run_cli(capsys, "run", "--once", "--plain", "--workspace", str(ran.root))[0] == 0
    argv = ("replay", "--workspace", str(ran.root), "--policy", "recorded")
    status, out, err = run_cli(capsys, *argv, "--json")
    assert status == 0, err
    rows = {row["layout"]: row for row in json.loads(out)["policies"]}
    shared = rows["shared_prefix"]
    sent = [seen.prompt for seen in server.requests]
    tokens = sum(len(prompt) // PROMPT_TOKENS_PER_CHAR for prompt in sent)
    cached = sum(
        common_prefix(prompt, before) // PROMPT_TOKENS_PER_CHAR for before, prompt in pairwise(sent)
    )
    assert shared["measured_prompts"] == len(sent)
    assert (shared["measured_prompt_tokens"], shared["measured_cached_prompt_tokens"]) == (
        tokens,
        cached,
    )
    # Three calls, the first cold: 31.0% measured, 31.6% predicted (2026-12-06).
    assert shared["measured_cached_share"] == cached / tokens > 0.25
    # One request, its roles one after another: the prompt before is the one to share with,
    # so the prediction is within 10 points of what the server said.
    assert abs(shared["predicted_cached_share"] - shared["measured_cached_share"]) < 0.10
    assert rows["upstream"]["measured_cached_share"] is None
    status, table, _ = run_cli(capsys, *argv)
    assert status == 0
    assert table.splitlines()[0].split()[-2:] == ["server", "cached"]
    assert f"Cached by the model server, by its own count ({len(sent)} calls laid out " in table
