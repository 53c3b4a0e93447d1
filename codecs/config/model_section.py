"""The ``model`` section: which backend answers prompts (dry run, a command, an OpenAI server)."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import urlsplit

import msgspec

from teams_runtime.codecs.config.setting_checks import (
    HIGHEST_PORT,
    LONGEST_CALL_SECONDS,
    MOST_ATTEMPTS,
    MOST_OUTPUT_BYTES,
    check_at_most,
    is_port,
)
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import ConfigError

__all__ = ["DryRunConfig", "ModelConfig", "OpenAIConfig"]


class DryRunConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The built-in dry-run backend: valid results, no model, a fixed route of roles."""

    route: list[str] = msgspec.field(default_factory=lambda: ["planner", "developer", "qa"])


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A host name (letters, digits, `-`, `.`), an IPv4 address or a bracketed IPv6 one (as
# urlsplit gives it, without brackets).
_URL_HOST = re.compile(r"[A-Za-z0-9.-]+|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.%A-Za-z]*")
_OPENAI = "team_runtime.yaml model.openai"


def _not_a_host() -> ConfigError:
    return ConfigError(
        f"{_OPENAI}.base_url has a host that is not a name or an address (letters, digits, '-' "
        "and '.', or an IP address)."
    )


class OpenAIConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``openai`` backend: an OpenAI-compatible chat-completions server.

    ``api_key_env`` names the environment variable that holds the key; the key itself is read
    at call time and is never part of the config (so never printed with it).
    """

    base_url: str
    model: str
    api_key_env: str = ""  # "" = send no key (Ollama, llama.cpp and LM Studio need none)
    timeout_seconds: float = 300.0
    max_retries: int = 3  # extra requests after a 429 or a 5xx answer

    def __post_init__(self) -> None:
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
        if not 0 <= self.max_retries <= 100:
            raise ConfigError(f"{_OPENAI}.max_retries must be between 0 and 100.")


class ModelConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``model`` section: which backend answers prompts, and how."""

    backend: Literal["dry_run", "command", "openai"] = "dry_run"
    command: list[str] = []
    timeout_seconds: float = 300.0
    env: dict[str, str] = {}
    attempts: int = 2
    on_failure: Literal["fail", "requeue"] = "fail"
    max_output_bytes: int = 1_048_576
    dry_run: DryRunConfig = DryRunConfig()
    openai: OpenAIConfig | None = None

    def __post_init__(self) -> None:
        if self.backend == "openai" and self.openai is None:
            raise ConfigError(
                "team_runtime.yaml model.openai must be set when model.backend is openai "
                "(at least base_url and model); see docs/models.md."
            )
        if self.backend == "command" and not self.command:
            raise ConfigError(
                "team_runtime.yaml model.command must be a non-empty list of strings when "
                "model.backend is command (for example: [my-model-cli, --json])."
            )
        if any(not part for part in self.command):
            raise ConfigError("team_runtime.yaml model.command must not hold empty strings.")
        if not self.timeout_seconds > 0:
            raise ConfigError("team_runtime.yaml model.timeout_seconds must be greater than 0.")
        if self.attempts < 1:
            raise ConfigError("team_runtime.yaml model.attempts must be at least 1.")
        if self.max_output_bytes < 1:
            raise ConfigError("team_runtime.yaml model.max_output_bytes must be at least 1.")
        check_at_most("model.timeout_seconds", self.timeout_seconds, LONGEST_CALL_SECONDS)
        check_at_most("model.attempts", self.attempts, MOST_ATTEMPTS)
        check_at_most("model.max_output_bytes", self.max_output_bytes, MOST_OUTPUT_BYTES)
        unknown = [role for role in self.dry_run.route if role not in ROLES]
        if unknown:
            raise ConfigError(
                f"team_runtime.yaml model.dry_run.route names unknown roles ({', '.join(unknown)});"
                f" roles are: {', '.join(ROLES)}."
            )
