"""The ``openai`` model backend: any OpenAI-compatible chat-completions server (OpenAI, Ollama,
vLLM, llama.cpp's server, llama-cpp-python's, LM Studio), over httpx.

One call is one ``POST {base_url}/chat/completions``: the role's settings (``model``,
``reasoning_effort``, ``temperature``, ``max_tokens``, ``extra_body``), the contract as a JSON
schema in ``response_format``, an optional system message, then the prompt as the user
message, streamed from the prompt's chunks (chunked transfer encoding: the prompt is never
held whole). The answer is read as a server-sent-event stream (``actors.models._openai_reading``).

- A 429 or 5xx reply is tried again (``max_retries`` times, waiting as ``Retry-After`` says
  or with exponential backoff).
- A server whose error answer names ``response_format`` is asked again with the next form
  (json_schema, json_object with the schema, none); the form that worked, and those it
  refused, are kept per server for the worker's run: a known refusal is not sent again.
- A server that is away (refused or reset before any answer byte, a name that does not
  resolve, 429/502/503/504 after the retries) is not the request's fault: the call waits for
  it (``model_servers``) and is sent again when it is back; it is not an attempt. A 429 that
  limits the call's model (``limits_the_model``) holds back that model only, not the
  server's others.
- At most ``max_concurrent`` calls of a worker run at one server at once (``_pace``); a stream
  cut short or empty while other calls ran there is the server busy with them: the call is
  sent again once one of them ends, and it is not an attempt.
- A prompt that does not fit the server's context fails with ``PromptTooLarge``.
- The answer's ``finish_reason`` travels up on the reply (the prompt record, the trace); an
  answer the server stopped at its token limit (``length``) is worth a warning.
- Anything else that goes wrong fails the call with a content-free ``ModelFailure``, as a
  failed model command does, and the role's ``model.attempts`` decide what comes next.

The key is read from the variable ``api_key_env`` names at each call and sent only in the
``Authorization`` header. Every text the server sends back (the answer, what came before a
failure, error bodies, errors in the stream) is scrubbed of it before it leaves the call as a
``ModelReply`` or ``ModelFailure``. No message, log line or config output holds it, nor
anything else the server said beyond its status code: reasons are content-free.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable

import anyio
import httpx
import msgspec

from teams_runtime._logs import logger
from teams_runtime.actors.models._openai_failures import say_cut, too_large
from teams_runtime.actors.models._openai_reading import (
    KEPT_CHARS,
    ContextExceeded,
    FormRefused,
    Retry,
    ServerBusy,
    ServerReply,
    answered,
    read_response,
)
from teams_runtime.actors.models._servers import Availability, ModelServer, ModelServers
from teams_runtime.actors.models.tools import PLAIN, ToolSession, Turn, run_rounds
from teams_runtime.codecs.config import OpenAIConfig, StructuredOutput
from teams_runtime.codecs.model import (
    SCHEMA_NAMES,
    KeyScrubber,
    ModelReply,
    ResponseFormat,
    forms_to_try,
    generation_schema,
    header_safe,
    json_string_fragment,
    request_fields,
    request_head,
    response_format,
)
from teams_runtime.exceptions import ConfigError, ModelFailure
from teams_runtime.policy.backoff import backoff_delay
from teams_runtime.policy.prompts import PromptBundle

__all__ = ["BACKOFF_FIRST_SECONDS", "BACKOFF_MAX_SECONDS", "KEPT_CHARS", "OpenAIBackend"]

# The wait before the first retry without Retry-After; it doubles each time, up to the max.
BACKOFF_FIRST_SECONDS = 1.0
BACKOFF_MAX_SECONDS = 30.0
_BACKOFF_JITTER = 0.5  # each wait cut by a random part of up to half
# Statuses that say the server cannot serve now, whoever asks: after the retries, away.
_AWAY_STATUSES = frozenset({429, 502, 503, 504})


class _Away(Exception):
    """The server is away (``reason``: content-free), or only the call's model
    (``whole`` false); nothing of this call reached a model."""

    def __init__(self, reason: str, *, whole: bool = True) -> None:
        super().__init__(reason)
        self.reason = reason
        self.whole = whole


class OpenAIBackend:
    """Send each prompt to an OpenAI-compatible chat-completions endpoint."""

    name = "openai"

    def __init__(
        self,
        config: OpenAIConfig,
        *,
        max_output_bytes: int = 1_048_576,
        structured_output: StructuredOutput = "json_schema",
        servers: ModelServers | None = None,
    ) -> None:
        """Raises ``ConfigError`` if the key's variable is not set or cannot be a key: better no
        run at all than every queued request failed for want of it. ``servers`` is shared by
        the backends of one worker (a server away for one role is away for all)."""
        self._config = config
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._max_output_bytes = max_output_bytes
        self._forms = forms_to_try(structured_output)
        servers = servers or ModelServers()
        self._facts = servers.facts
        self._server: ModelServer = servers.server(config.base_url)
        self._server.pace.write(config.max_concurrent)
        self._model: Availability = self._server.for_model(config.model)
        _, problem = self._key()
        if problem:
            raise ConfigError(f"{problem}, then start again.")

    def is_away(self) -> bool:
        """Whether this backend's server, or its model there, is away (its calls wait; take
        no new work for it)."""
        return self._server.is_away() or self._model.is_away()

    def _key(self) -> tuple[str, str]:
        """The key, read now (never kept: only the environment holds it; "" for none), and
        what is wrong with it ("" if nothing). The problem names the variable, never its
        value."""
        name = self._config.api_key_env
        if not name:
            return "", ""
        key = os.environ.get(name, "")
        variable = f"the environment variable {name} (model.openai.api_key_env)"
        if not key:
            return "", f"{variable} is not set; export the model server's key in it"
        if not header_safe(key):
            return "", (
                f"{variable} holds a space, a line break or a character that is not ASCII, "
                "which no API key has; export only the key in it"
            )
        return key, ""

    async def complete(self, bundle: PromptBundle, tools: ToolSession | None = None) -> ModelReply:
        """Ask the server, plus up to ``max_retries`` more requests after a 429 or 5xx, and as
        long as it takes while the server is away. Each request may take ``timeout_seconds``
        (connecting, sending the prompt and reading the whole reply); with ``tools``, each
        round of tool calls is one more request (``tools.run_rounds``). Raises
        ``ModelFailure`` (``PromptTooLarge`` for a prompt beyond the server's context) for
        whatever goes wrong in the call; cancellation closes the connection."""
        key, problem = self._key()
        if problem:  # unset or changed since the run started: nothing is sent
            raise ModelFailure(problem)
        unexpected = ""
        try:
            if tools is None:
                return await self._complete_when_there(bundle, key, PLAIN)
            return await run_rounds(
                lambda turn: self._complete_when_there(bundle, key, turn), tools
            )
        except ModelFailure:
            raise
        except Exception as exc:  # a bug, ours or a library's: it fails this call, not the run
            unexpected = type(exc).__name__
        # Raised outside the handler, so the error (whose text may quote the server, or the
        # key) is not even its context: the type alone is content-free.
        raise ModelFailure(f"the call to the model server failed unexpectedly ({unexpected})")

    async def _complete_when_there(self, bundle: PromptBundle, key: str, turn: Turn) -> ModelReply:
        """The call, sent again each time it found the server (or its model) away, once it
        is back, or the server busy with other calls, once one of them ended."""
        pace = self._server.pace
        resends = 0  # after a busy server's answers
        while True:
            sending = await self._server.turn_for(self._model)
            probing = sending.probing is not None
            try:
                async with pace.turn(await pace.limit(self._config, self._facts)) as running:
                    busy = running.busy_check(resends)
                    reply = await self._complete(bundle, key, turn, probing=probing, busy=busy)
            except _Away as away:
                await sending.away(away.reason, whole=away.whole)
                continue
            except ServerBusy as cut:
                await sending.answered()  # it answered: there, and busy
                logger.bind(role=bundle.role, request_id=bundle.request_id).info(
                    "model server {} was busy with other calls ({}); the call for {} on "
                    "request {} is sent again when one ends",
                    self._config.base_url,
                    cut.how,
                    bundle.role,
                    bundle.request_id,
                )
                await pace.after_busy(resends)
                resends += 1
                continue
            except ModelFailure:
                await sending.answered()  # it answered: there, whatever it said
                raise
            except BaseException:
                sending.gave_up()
                raise
            await sending.answered()
            return reply

    async def _complete(
        self, bundle: PromptBundle, key: str, turn: Turn, *, probing: bool, busy: Callable[[], bool]
    ) -> ModelReply:
        config = self._config
        scrubber = KeyScrubber(key)
        headers = {"Accept": "text/event-stream", "Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        log = logger.bind(role=bundle.role, request_id=bundle.request_id, purpose=bundle.purpose)
        retries = 0 if probing else config.max_retries  # a probe asks once, then backs off
        forms = self._forms_for_server()
        # A client per call: calls take seconds to minutes, so a kept connection saves little,
        # and nothing is left open when a run stops.
        async with httpx.AsyncClient(timeout=config.timeout_seconds) as client:
            retry = 0
            while True:
                tools = turn.offers_tools(self._server.tools_refused)
                form = "none" if tools else forms[0]  # no schema with tools: see tools._loop
                try:
                    reply = await self._request(client, bundle, headers, scrubber, form, turn, busy)
                except FormRefused as refused:
                    if refused.tools:
                        self._tools_refused(refused.status)
                    else:
                        forms = self._refused(forms, refused.status)
                    continue
                except Retry as answer:
                    wait = self._wait(answer, retry, retries)
                    log.warning(
                        "model server answered {} for {} on request {}; retry {} of {} in {:.1f} s",
                        answer.status,
                        bundle.role,
                        bundle.request_id,
                        retry + 1,
                        retries,
                        wait,
                    )
                    retry += 1
                    await anyio.sleep(wait)
                    continue
                except ContextExceeded as exceeded:
                    raise too_large(bundle, exceeded) from None
                if not tools:
                    self._settle(form)
                return reply

    def _forms_for_server(self) -> tuple[ResponseFormat, ...]:
        """The forms still to try: from the one this server took, if it took one; else
        those it has not refused (a known refusal is not sent again in this worker)."""
        taken = self._server.form
        if taken in self._forms:
            return self._forms[self._forms.index(taken) :]
        return tuple(f for f in self._forms if f not in self._server.refused) or ("none",)

    def _refused(
        self, forms: tuple[ResponseFormat, ...], status: int
    ) -> tuple[ResponseFormat, ...]:
        if forms[0] not in self._server.refused:  # once, however many calls were refused
            self._server.refused.add(forms[0])
            logger.info(
                "model server {} answered {} to response_format {}; trying {}",
                self._config.base_url,
                status,
                forms[0],
                forms[1] if len(forms) > 1 else "none",
            )
        return forms[1:] if len(forms) > 1 else ("none",)

    def _tools_refused(self, status: int) -> None:
        """The server refused a request offering tools: none are offered to it again in this
        worker (its calls are answered without them), said once."""
        if not self._server.tools_refused:
            self._server.tools_refused = True
            logger.warning(
                "model server {} answered {} to a request offering tools; its calls go without "
                "tools in this run (llama-server needs --jinja; docs/models.md)",
                self._config.base_url,
                status,
            )

    def _settle(self, form: ResponseFormat) -> None:
        """The server answered a request sent with ``form``: keep it for the server, and say
        so once (unless nothing was asked of it: ``structured_output: off``)."""
        if self._server.form != form:
            self._server.form = form
            if self._forms != ("none",):
                logger.info(
                    "model server {} takes response_format {}; kept for its calls",
                    self._config.base_url,
                    form,
                )

    def _wait(self, answer: Retry, retry: int, retries: int) -> float:
        """How long to wait before retry number ``retry + 1``. Raises ``_Away`` when no retry
        is left (or the server asks for a wait longer than ``timeout_seconds``) for a status
        that says it cannot serve now (the model only, for a 429 that limits it),
        ``ModelFailure`` for another 5xx."""
        config = self._config
        said = answered(answer.status)
        away = answer.status in _AWAY_STATUSES
        whole = not answer.for_model
        if retry >= retries:
            tries = retry + 1
            reason = f"{said} to {tries} request{'s' if tries != 1 else ''} (max_retries {retries})"
            if away:
                raise _Away(reason, whole=whole)
            raise ModelFailure(reason, output=answer.said)
        if answer.wait is not None:
            if answer.wait > config.timeout_seconds:
                reason = (
                    f"{said} and asked to retry after {answer.wait:g} s, longer than "
                    f"model.openai.timeout_seconds ({config.timeout_seconds:g} s)"
                )
                if away:
                    raise _Away(reason, whole=whole)
                raise ModelFailure(reason, output=answer.said)
            return answer.wait
        # Jittered: clients that failed together spread out.
        return backoff_delay(
            retry, first=BACKOFF_FIRST_SECONDS, cap=BACKOFF_MAX_SECONDS, jitter=_BACKOFF_JITTER
        )

    async def _request(
        self,
        client: httpx.AsyncClient,
        bundle: PromptBundle,
        headers: dict[str, str],
        scrubber: KeyScrubber,
        form: ResponseFormat,
        turn: Turn,
        busy: Callable[[], bool],
    ) -> ModelReply:
        """One request and its whole answer, within ``timeout_seconds``."""
        timeout = self._config.timeout_seconds
        answer = ServerReply(self._max_output_bytes, scrubber)
        heard = False  # the server's reply began (its status line came)
        try:
            with anyio.fail_after(timeout):
                async with client.stream(
                    "POST", self._url, content=self._body(bundle, form, turn), headers=headers
                ) as response:
                    heard = True
                    await read_response(
                        response,
                        answer,
                        config=self._config,
                        max_output_bytes=self._max_output_bytes,
                        form_sent=form != "none",
                        busy=busy,
                        tools_sent=bool(turn.fields(self._server.tools_refused)),
                    )
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            # Refused, reset while connecting, a name that does not resolve, no route.
            raise _Away(f"cannot connect ({type(exc).__name__})") from None
        except (TimeoutError, httpx.TimeoutException):
            raise answer.failure(f"no answer within {timeout:g} s (timeout_seconds)") from None
        except httpx.TransportError as exc:  # the connection dropped, the server broke HTTP
            if not heard:  # before any byte of an answer: a server going down, not this call
                reason = f"the connection closed before any answer ({type(exc).__name__})"
                raise _Away(reason) from None
            raise answer.failure(
                f"the connection to the model server broke ({type(exc).__name__}) after "
                f"{answer.size} bytes of answer"
            ) from None
        if answer.cut():
            say_cut(bundle, answer.size, self._config.max_tokens)
        return answer.reply()

    async def _body(
        self, bundle: PromptBundle, form: ResponseFormat, turn: Turn
    ) -> AsyncIterator[bytes]:
        config = self._config
        format_: dict[str, object] = {}
        if form != "none":
            kind = bundle.reply_kind
            schema = generation_schema(
                kind,
                request_id=bundle.request_id,
                role=bundle.role,
                next_roles=bundle.next_roles,
                output=bundle.output,
            )
            format_ = response_format(form, SCHEMA_NAMES[kind], schema)
        if bundle.max_tokens is not None:  # an auto budget's reserve for the answer
            config = msgspec.structs.replace(config, max_tokens=bundle.max_tokens)
        fields = request_fields(config, format_) | turn.fields(self._server.tools_refused)
        yield request_head(config.model, fields, config.system)
        async for chunk in bundle.chunks():
            yield json_string_fragment(chunk)
        yield turn.tail()
