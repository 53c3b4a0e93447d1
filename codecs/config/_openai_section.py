"""The ``model.openai`` section: an OpenAI-compatible chat-completions server, and what each
request to it carries beside the prompt."""

from __future__ import annotations

import math
import re
from urllib.parse import urlsplit

import msgspec

from teams_runtime.codecs.config._setting_checks import (
    HIGHEST_PORT,
    LONGEST_CALL_SECONDS,
    check_at_most,
    is_port,
)
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.exceptions import ConfigError

__all__ = ["RUNTIME_BODY_KEYS", "OpenAIConfig"]

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A host name (letters, digits, `-`, `.`), an IPv4 address or a bracketed IPv6 one (as
# urlsplit gives it, without brackets).
_URL_HOST = re.compile(r"[A-Za-z0-9.-]+|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.%A-Za-z]*")
_OPENAI = "team_runtime.yaml model.openai"
_PROVIDER = re.compile(r"[^/\s*]+")
# Keys of the request body the runtime writes itself: extra_body may not replace them, or the
# prompt, the stream the answer is read from or the model a role was given would be lost.
RUNTIME_BODY_KEYS = ("model", "messages", "stream", "stream_options")
MOST_TOKENS = 10_000_000  # model.openai.max_tokens: far beyond any model's context
MOST_CONCURRENT = 1000  # model.openai.max_concurrent: far beyond any server's slots


def _not_a_host() -> ConfigError:
    return ConfigError(
        f"{_OPENAI}.base_url has a host that is not a name or an address (letters, digits, '-' "
        "and '.', or an IP address)."
    )


class OpenAIConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``openai`` backend: an OpenAI-compatible chat-completions server.

    ``api_key_env`` names the environment variable that holds the key; the key itself is read
    at call time and is never part of the config (so never printed with it). The settings
    after ``max_retries`` go into each request's body when set (empty or ``None``: not sent).
    """

    base_url: str
    model: str
    api_key_env: str = ""  # "" = send no key (Ollama, llama.cpp and LM Studio need none)
    timeout_seconds: float = 300.0
    max_retries: int = 3  # extra requests after a 429 or a 5xx reply
    reasoning_effort: str = ""  # sent as `reasoning_effort` (low, medium, high, ...)
    temperature: float | None = None  # 0 to 2
    max_tokens: int | None = None  # the most tokens the model may answer with
    # The server's context window in tokens, for a server that does not say it (llama-cpp-
    # python's, a hosted API): what a `max_prompt_tokens: auto` budget is made from. Never sent.
    context_tokens: int | None = None
    # The most calls a worker sends to this base_url at once (the smallest its roles write);
    # None: the server's slots, else 1 on a local server, else no limit. Never sent.
    max_concurrent: int | None = None
    system: str = ""  # a system message sent before the prompt
    extra_body: JsonObject = {}  # merged into the body: a server's own knobs
    # The provider half of the rate card key `provider/model` (telemetry.rate_cards): who
    # bills the calls. Never sent.
    provider: str = "openai"

    def __post_init__(self) -> None:
        self._check_url()
        if not self.model.strip():
            raise ConfigError(f"{_OPENAI}.model must be a non-empty model name.")
        # Never echo the value: a key pasted here by mistake must not reach an error message.
        if self.api_key_env and not _ENV_NAME.fullmatch(self.api_key_env):
            raise ConfigError(
                f"{_OPENAI}.api_key_env must be the name of an environment variable (letters, "
                "digits and _, for example OPENAI_API_KEY), not the key itself."
            )
        if not self.timeout_seconds > 0:
            raise ConfigError(f"{_OPENAI}.timeout_seconds must be greater than 0.")
        check_at_most("model.openai.timeout_seconds", self.timeout_seconds, LONGEST_CALL_SECONDS)
        if not _PROVIDER.fullmatch(self.provider):
            raise ConfigError(
                f"{_OPENAI}.provider must be a provider name without spaces or slashes (for "
                "example: openai, ollama), the first half of a telemetry.rate_cards key."
            )
        if not 0 <= self.max_retries <= 100:
            raise ConfigError(f"{_OPENAI}.max_retries must be between 0 and 100.")
        self._check_request_settings()

    def _check_request_settings(self) -> None:
        if self.reasoning_effort != self.reasoning_effort.strip():
            raise ConfigError(
                f"{_OPENAI}.reasoning_effort must be a level without spaces around it "
                "(for example: medium), or left out to send none."
            )
        temperature = self.temperature
        if temperature is not None and not (math.isfinite(temperature) and 0 <= temperature <= 2):
            raise ConfigError(
                f"{_OPENAI}.temperature must be a number from 0 to 2 (for example: 0.2), or "
                "left out to use the server's default."
            )
        if self.max_tokens is not None and not 1 <= self.max_tokens <= MOST_TOKENS:
            raise ConfigError(
                f"{_OPENAI}.max_tokens must be a whole number from 1 to {MOST_TOKENS} (for "
                "example: 4096), or left out to let the server decide."
            )
        self._check_window()
        if self.max_concurrent is not None and not 1 <= self.max_concurrent <= MOST_CONCURRENT:
            raise ConfigError(
                f"{_OPENAI}.max_concurrent must be a whole number from 1 to {MOST_CONCURRENT}: "
                "the most calls a worker sends to this server at once (for example: 1 for "
                "llama-cpp-python), or left out to ask the server."
            )
        taken = [key for key in RUNTIME_BODY_KEYS if key in self.extra_body]
        if taken:
            raise ConfigError(
                f"{_OPENAI}.extra_body.{taken[0]} is set by the runtime itself (as are "
                f"{', '.join(RUNTIME_BODY_KEYS)}); leave it out of extra_body (the model is "
                "model.openai.model)."
            )

    def _check_window(self) -> None:
        window = self.context_tokens
        if window is None:
            return
        if not 1 <= window <= MOST_TOKENS:
            raise ConfigError(
                f"{_OPENAI}.context_tokens must be a whole number from 1 to {MOST_TOKENS}: the "
                "server's context window in tokens (for example: 8192), or left out to ask the "
                "server."
            )
        if self.max_tokens is not None and self.max_tokens >= window:
            raise ConfigError(
                f"{_OPENAI}.max_tokens ({self.max_tokens}) must be less than "
                f"context_tokens ({window}): the answer's tokens come out of the same window "
                "as the prompt's."
            )

    def _check_url(self) -> None:
        scheme, _, rest = self.base_url.partition("://")
        host = rest.split("/", 1)[0]
        if scheme not in ("http", "https") or not host:
            raise ConfigError(
                f"{_OPENAI}.base_url must be an http:// or https:// URL "
                "(for example: http://127.0.0.1:11434/v1)."
            )
        if "@" in host:  # printed by `config` and in errors: no place for a secret
            raise ConfigError(
                f"{_OPENAI}.base_url must not hold credentials; put the key in the variable "
                "named by api_key_env."
            )
        # Checked here, or a bad host or port would fail only the run's first call, as a crash.
        try:
            parts = urlsplit(self.base_url)
        except ValueError:  # a broken [IPv6] host: a bracket unclosed, or no address inside
            if "[" in host and "]" not in host:
                raise ConfigError(
                    f"{_OPENAI}.base_url has an IPv6 host without its closing bracket (write "
                    "it as http://[::1]:8080/v1)."
                ) from None
            raise _not_a_host() from None
        try:
            bad_port = parts.port is not None and not is_port(parts.port)
        except ValueError:  # not a number, or beyond 65535
            bad_port = True
        if bad_port:
            raise ConfigError(
                f"{_OPENAI}.base_url has a port that is not a number from 1 to {HIGHEST_PORT}."
            )
        if "?" in self.base_url or "#" in self.base_url:
            # `/chat/completions` is added to the path: after a `?` or `#` it would be lost.
            raise ConfigError(
                f"{_OPENAI}.base_url must not hold a query or fragment (`?...`, `#...`); give "
                "the API's root, for example http://127.0.0.1:11434/v1."
            )
        if not _URL_HOST.fullmatch(parts.hostname or ""):
            raise _not_a_host()
