"""``teams-runtime config`` warns of a token rate card that can price nothing: its roles' calls
report no token usage (a model command never does; a server ``config --probe`` found none in
the stream of), so their ``cost_usd`` stays null whatever the card says."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ..support.cli_in_process import run_cli
from ..support.fake_openai_server import FakeOpenAIServer, Raw
from ..support.paths import FAKE_MODEL

TOKENS = {"input_per_million_usd": 1.0, "output_per_million_usd": 2.0}


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("teams-runtime: warning: ")]


def _write(root: Path, config: dict[str, Any]) -> None:
    (root / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def _stream(*, usage: bool) -> Raw:
    events: list[dict[str, Any]] = [
        {"model": "m", "choices": [{"index": 0, "delta": {"content": '{"ok": true}'}}]},
        {"model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    if usage:
        counted = {"prompt_tokens": 9, "completion_tokens": 5}
        events.append({"model": "m", "choices": [], "usage": counted})
    body = "".join(f"data: {json.dumps(event)}\n\n" for event in events) + "data: [DONE]\n\n"
    return Raw(body.encode())


@pytest.mark.parametrize(
    ("card", "warned"),
    [
        pytest.param(TOKENS, True, id="token-card"),
        pytest.param({"per_invocation_usd": 0.01}, False, id="per-invocation-card"),
    ],
)
def test_config_warns_of_a_token_card_on_a_model_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], card: dict[str, float], warned: bool
) -> None:
    command = [sys.executable, str(FAKE_MODEL), "valid", str(tmp_path / "state")]
    _write(
        tmp_path,
        {
            "model": {"backend": "command", "command": command, "name": "cli"},
            "telemetry": {"rate_cards": {"command/cli": card}},
        },
    )
    status, out, err = run_cli(capsys, "config", "--workspace", str(tmp_path))
    assert status == 0 and json.loads(out)["telemetry"]["rate_cards"]
    expected = (
        "teams-runtime: warning: team_runtime.yaml telemetry.rate_cards command/cli prices "
        "tokens, but a model command reports no token usage: the calls of every role are never "
        "priced by it (cost_usd null); give the card per_invocation_usd to price each call."
    )
    assert _warnings(err) == ([expected] if warned else [])


@pytest.mark.parametrize("usage", [False, True], ids=["no-usage", "usage"])
def test_config_probe_warns_of_a_token_card_on_a_server_without_usage(
    tmp_path: Path,
    openai_server: FakeOpenAIServer,
    capsys: pytest.CaptureFixture[str],
    usage: bool,
) -> None:
    openai = {"base_url": openai_server.base_url, "model": "small", "provider": "local"}
    _write(
        tmp_path,
        {
            "model": {"backend": "openai", "openai": openai},
            "roles": {"qa": {"model": {"backend": "dry_run"}}},
            "telemetry": {"rate_cards": {"local/small": TOKENS}},
        },
    )
    openai_server.then(_stream(usage=usage))
    status, _, err = run_cli(capsys, "config", "--probe", "--workspace", str(tmp_path))
    assert status == 0, err
    expected = (
        "teams-runtime: warning: team_runtime.yaml telemetry.rate_cards local/small prices "
        "tokens, but its server reported no token usage: the calls of every role but qa are "
        "never priced by it (cost_usd null); give the card per_invocation_usd to price each "
        "call."
    )
    assert _warnings(err) == ([] if usage else [expected])
