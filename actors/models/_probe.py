"""``config --probe``: one tiny request to each OpenAI-compatible server the roles use, for
each model they ask it for, to say what it answers before a run depends on it: the model it
answers as, whether it reports token usage in a stream, and which ``response_format`` form it
takes.

The request is a plain one, made here (not through ``OpenAIBackend``, which carries prompts,
retries and the contract): a streamed chat completion of a few tokens asking for a one-field
JSON object, sent with ``response_format`` as a JSON schema. A server whose error answer names
``response_format`` is asked again with the next form (``json_object`` with the schema, then
none), as runs do; so a server takes one request, or up to three when it refuses the forms.
Nothing the server says is shown but the model name it gives (scrubbed of the key, cut short)
and the status codes.

A server that answered (a reply, or an error status) is then asked for its window and its
tokenizer (``windows.probe_window``, ``windows.find_tokenizer``): the figures and where they
came from. One that gave no answer is not asked again.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import anyio
import httpx
import msgspec

from teams_runtime.actors.models.windows import find_tokenizer, probe_window
from teams_runtime.codecs.config import OpenAIConfig
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.model import KeyScrubber

__all__ = ["PROBE_SECONDS", "ServerProbe", "probe_all", "probe_server"]

PROBE_SECONDS = 60.0  # at most, per server and model (a server may load its model first)
_MODEL_NAME_CHARS = 120
_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
# The `response_format` forms tried in turn (OpenAI's wire: JSON sent as it is), by name.
_FORMS: tuple[tuple[str, JsonObject | None], ...] = (
    (
        "json_schema",
        {
            "type": "json_schema",
            "json_schema": {"name": "probe", "strict": True, "schema": _SCHEMA},
        },
    ),
    ("json_object", {"type": "json_object", "schema": _SCHEMA}),
    ("none", None),
)
_PROMPT = 'Answer with exactly this JSON object and nothing else: {"ok": true}'


class ServerProbe(msgspec.Struct, kw_only=True):
    """What one server answered. ``response_format`` is the first form it took (``none``: it
    refused both); ``problem`` says why it gave no reply (``None`` when it did)."""

    base_url: str
    roles: list[str]
    model: str  # the model asked for (its roles')
    answered_as: str | None = None
    usage: bool | None = None  # reported in the stream
    response_format: str | None = None
    problem: str | None = None
    # The server's window for the model (``ServerWindow``) and its tokenizer's endpoint: None
    # when unknown, or when the server gave no answer (then not asked).
    context_tokens: int | None = None
    slots: int | None = None
    window_source: str | None = None
    tokenizer: str | None = None


class _Refused(Exception):
    """The server's error answer is about ``response_format``: try the next form."""


class _ProbeReply(msgspec.Struct, frozen=True):
    """What one request's answer said: the model name it gave, and whether it reported usage."""

    model: str | None
    usage: bool


def _body(config: OpenAIConfig, form: JsonObject | None) -> JsonObject:
    body: JsonObject = {
        "model": config.model,
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 16,
        "messages": [{"role": "user", "content": _PROMPT}],
    }
    if form is not None:
        body["response_format"] = form
    return body


async def _ask(
    client: httpx.AsyncClient, config: OpenAIConfig, form: JsonObject | None, key: str
) -> _ProbeReply:
    """One request, and what its answer (a stream, or a whole completion) said."""
    headers = {"Accept": "text/event-stream"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    url = config.base_url.rstrip("/") + "/chat/completions"
    async with client.stream("POST", url, json=_body(config, form), headers=headers) as response:
        if response.status_code >= 400:
            said = (await response.aread())[:16_384].decode("utf-8", "replace")
            if form is not None and "response_format" in said:
                raise _Refused
            raise httpx.HTTPStatusError(
                f"{response.status_code}", request=response.request, response=response
            )
        if response.headers.get("content-type", "").lower().startswith("application/json"):
            whole = msgspec.json.decode(await response.aread())  # a server that ignores stream
            return _ProbeReply(_name(whole), _has_usage(whole))
        name: str | None = None
        usage = False
        async for line in response.aiter_lines():
            data = line.removeprefix("data:").strip() if line.startswith("data:") else ""
            if not data or data == "[DONE]":
                continue
            try:
                event = msgspec.json.decode(data)
            except msgspec.DecodeError:
                continue
            name = name or _name(event)
            usage = usage or _has_usage(event)
        return _ProbeReply(name, usage)


def _has_usage(event: object) -> bool:
    return isinstance(event, dict) and isinstance(event.get("usage"), dict)


def _name(event: object) -> str | None:
    if isinstance(event, dict) and isinstance(event.get("model"), str) and event["model"]:
        return str(event["model"])
    return None


async def probe_server(config: OpenAIConfig, roles: list[str]) -> ServerProbe:
    """Ask the server of ``config`` for its model (``roles``' server and model) once, or once
    a form it refuses; waits at most ``timeout_seconds`` in all, never over ``PROBE_SECONDS``.
    Never raises for what the server does: ``problem`` says it. Then, when it answered, its
    window and tokenizer, each within the same timeout."""
    result = ServerProbe(base_url=config.base_url, roles=roles, model=config.model)
    timeout = min(config.timeout_seconds, PROBE_SECONDS)
    # httpx's timeout bounds each read, not a stream: a server that streams without end (or
    # one byte a second) would hold the probe for ever. The deadline bounds all of it.
    with anyio.move_on_after(timeout) as scope:
        await _probe_forms(config, result, timeout)
    if scope.cancelled_caught:
        result.problem = f"no answer within {timeout:g} s"
    elif result.problem is None or result.problem.startswith("it answered"):
        await _probe_window(config, result)
    return result


async def _probe_window(config: OpenAIConfig, result: ServerProbe) -> None:
    """Ask the server for its window and its tokenizer, at once, into ``result``."""

    async def window() -> None:
        found = await probe_window(config)
        result.context_tokens, result.slots = found.context_tokens, found.slots
        result.window_source = found.source

    async def tokenizer() -> None:
        found = await find_tokenizer(config)
        result.tokenizer = found.source if found is not None else None

    async with anyio.create_task_group() as group:
        group.start_soon(window)
        group.start_soon(tokenizer)


async def _probe_forms(
    config: OpenAIConfig, result: ServerProbe, read_seconds: float
) -> ServerProbe:
    key = os.environ.get(config.api_key_env, "") if config.api_key_env else ""
    scrub = KeyScrubber(key)
    async with httpx.AsyncClient(timeout=read_seconds) as client:
        for form_name, form in _FORMS:
            try:
                answer = await _ask(client, config, form, key)
            except _Refused:
                continue
            except httpx.HTTPStatusError as exc:
                result.problem = f"it answered {exc.response.status_code}"
                return result
            except (httpx.HTTPError, msgspec.DecodeError, OSError) as exc:
                result.problem = f"no answer ({type(exc).__name__})"
                return result
            result.response_format = form_name
            result.usage = answer.usage
            if answer.model is not None:
                result.answered_as = scrub.scrub(answer.model)[:_MODEL_NAME_CHARS]
            return result
    return result  # not reached: the last form sends no response_format to refuse


async def probe_all(servers: Iterable[tuple[OpenAIConfig, list[str]]]) -> list[ServerProbe]:
    """Probe every server and model at once; the results in the order given."""
    pairs = list(servers)
    results: list[ServerProbe | None] = [None] * len(pairs)

    async def probe(index: int, config: OpenAIConfig, roles: list[str]) -> None:
        results[index] = await probe_server(config, roles)

    async with anyio.create_task_group() as group:
        for index, (config, roles) in enumerate(pairs):
            group.start_soon(probe, index, config, roles)
    return [result for result in results if result is not None]
