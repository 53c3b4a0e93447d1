"""The shape of ``team_runtime.yaml``: its sections, their checks and the parser of its text.

Reading the file from a workspace is ``storage.workspace.load_team_config``.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args
from urllib.parse import urlsplit

import msgspec
import yaml

from teams_runtime.codecs.config_yaml import DuplicateKeyError, load_yaml, written_key, yaml_problem
from teams_runtime.codecs.roles import ROLES
from teams_runtime.exceptions import ConfigError

__all__ = [
    "BACKEND_KINDS",
    "CONFIG_FILE_NAME",
    "DEFAULT_CONFIG_TEXT",
    "DEFAULT_REQUESTS_IN_FLIGHT",
    "EVENT_COUNT_LIMIT",
    "BackendConfig",
    "DryRunConfig",
    "ModelConfig",
    "NatsSettings",
    "OpenAIConfig",
    "PromptContextConfig",
    "QueueConfig",
    "TeamConfig",
    "TeamSection",
    "backend_block_text",
    "event_count_problem",
    "parse_team_config",
]

CONFIG_FILE_NAME = "team_runtime.yaml"

# What `teams-runtime init` writes. The prompt_context block is exactly the defaults.
DEFAULT_CONFIG_TEXT = """\
# teams-runtime workspace configuration.
# Read once when role services start: restart them after changing it.

# How much of a request's event history goes into each role's prompt.
# Rollback: set `enabled: false` and restart to put the full history back in prompts.
prompt_context:
  enabled: true
  recent_events: 8
  max_events: 16

# Which model answers the roles' prompts. `dry_run` answers valid results without any
# model, handing each request along `route`: a new workspace runs end to end as it is.
# To use a real model CLI (reads the prompt on stdin, prints the role result JSON):
#   backend: command
#   command: [my-model-cli, --json]
#   timeout_seconds: 300
# Or any OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio, OpenAI):
#   backend: openai
#   openai:
#     base_url: http://127.0.0.1:11434/v1
#     model: qwen2.5-coder
#     api_key_env: OPENAI_API_KEY   # the variable's name; the key never sits in this file
# See docs/models.md.
model:
  backend: dry_run
  dry_run:
    route: [planner, developer, qa]
"""

_PREFIX = "team_runtime.yaml prompt_context"

# The most events a count (prompt_context.recent_events and max_events, the CLI's
# --recent-events and --max-events) may name: far more than any prompt can carry, and small
# enough that every buffer sized by it can be made (a huge count once left envelopes queued).
EVENT_COUNT_LIMIT = 1_000_000


def event_count_problem(value: object) -> str | None:
    """Why ``value`` cannot be an event count (``must be ...``), or ``None`` when it can.

    The one check behind the config's counts and the CLI's flags, so both say the same.
    """
    # bool is an int subclass: `true` must not pass as 1.
    if type(value) is not int or value < 1:
        return "must be a positive integer"
    if value > EVENT_COUNT_LIMIT:
        return f"must be at most {EVENT_COUNT_LIMIT}"
    return None


class PromptContextConfig(msgspec.Struct, frozen=True, kw_only=True):
    """How a request's events are projected into prompts (spec section 3).

    Constructing one directly is checked like the YAML block, in the same order and with the
    same messages, so a config with ``recent_events > max_events`` can never be used.
    """

    enabled: bool = True
    recent_events: int = 8
    max_events: int = 16

    def __post_init__(self) -> None:
        if type(self.enabled) is not bool:
            raise ConfigError(f"{_PREFIX}.enabled must be a boolean.")
        for name, value in (("recent_events", self.recent_events), ("max_events", self.max_events)):
            problem = event_count_problem(value)
            if problem is not None:
                raise ConfigError(f"{_PREFIX}.{name} {problem}.")
        if self.max_events < self.recent_events:
            raise ConfigError(
                f"{_PREFIX}.max_events must be greater than or equal to recent_events."
            )


# Upper bounds of the other numbers: generous, but a typo (a few digits too many, `.inf`)
# is an error naming the setting instead of a wait of centuries or an overflow at run time.
_LONGEST_CALL_SECONDS = 86_400  # model.timeout_seconds, model.openai.timeout_seconds: a day
_MOST_ATTEMPTS = 100  # model.attempts
_MOST_OUTPUT_BYTES = 1 << 30  # model.max_output_bytes: 1 GiB
_MOST_HOPS = 10_000  # team.max_hops
_MOST_IN_FLIGHT = 1_024  # team.requests_in_flight: each may hold a worker thread
DEFAULT_REQUESTS_IN_FLIGHT = 64


def _check_at_most(setting: str, value: float, limit: int) -> None:
    if not value <= limit:  # `not <=`: NaN fails too
        raise ConfigError(f"{CONFIG_FILE_NAME} {setting} must be at most {limit}.")


class DryRunConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The built-in dry-run backend: valid results, no model, a fixed route of roles."""

    route: list[str] = msgspec.field(default_factory=lambda: ["planner", "developer", "qa"])


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A host name (letters, digits, `-`, `.`), an IPv4 address or a bracketed IPv6 one (as
# urlsplit gives it, without brackets).
_URL_HOST = re.compile(r"[A-Za-z0-9.-]+|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.%A-Za-z]*")
_OPENAI = "team_runtime.yaml model.openai"
_HIGHEST_PORT = 65_535


def _is_port(number: int) -> bool:
    """Whether a server can listen on port ``number`` (the one check of every URL's port)."""
    return 1 <= number <= _HIGHEST_PORT


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
            bad_port = parts.port is not None and not _is_port(parts.port)
        except ValueError:  # not a number, or beyond 65535
            bad_port = True
        if bad_port:
            raise ConfigError(
                f"{_OPENAI}.base_url has a port that is not a number from 1 to {_HIGHEST_PORT}."
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
        _check_at_most("model.openai.timeout_seconds", self.timeout_seconds, _LONGEST_CALL_SECONDS)
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
        _check_at_most("model.timeout_seconds", self.timeout_seconds, _LONGEST_CALL_SECONDS)
        _check_at_most("model.attempts", self.attempts, _MOST_ATTEMPTS)
        _check_at_most("model.max_output_bytes", self.max_output_bytes, _MOST_OUTPUT_BYTES)
        unknown = [role for role in self.dry_run.route if role not in ROLES]
        if unknown:
            raise ConfigError(
                f"team_runtime.yaml model.dry_run.route names unknown roles ({', '.join(unknown)});"
                f" roles are: {', '.join(ROLES)}."
            )


class TeamSection(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``team`` section: limits on how a request travels between roles, and on how many
    requests one worker's ContextActor works on at once."""

    max_hops: int = 40  # hand-offs a request may take before it is failed with `hop_limit`
    # Requests whose asks a worker's ContextActor answers at once (each may hold a thread).
    requests_in_flight: int = DEFAULT_REQUESTS_IN_FLIGHT

    def __post_init__(self) -> None:
        if self.max_hops < 1:
            raise ConfigError("team_runtime.yaml team.max_hops must be at least 1.")
        _check_at_most("team.max_hops", self.max_hops, _MOST_HOPS)
        if self.requests_in_flight < 1:
            raise ConfigError("team_runtime.yaml team.requests_in_flight must be at least 1.")
        _check_at_most("team.requests_in_flight", self.requests_in_flight, _MOST_IN_FLIGHT)


class QueueConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``queue`` section: how workers share the envelopes of a workspace."""

    lease_seconds: float = 60.0  # a dead worker's claims return to the queue after this

    def __post_init__(self) -> None:
        if not 1 <= self.lease_seconds <= 86_400:
            raise ConfigError("team_runtime.yaml queue.lease_seconds must be between 1 and 86400.")


BACKEND_KINDS = ("file", "nats")
_NATS_URL = re.compile(
    r"(nats|tls)://(?:[^@/\s]+@)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?/?"
)
_NATS_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")


def _is_nats_host(host: str) -> bool:
    """A name or IPv4 address, or a bracketed IPv6 address that is one (``[abc]`` is not)."""
    if not host.startswith("["):
        return True
    try:
        return ipaddress.ip_address(host[1:-1]).version == 6
    except ValueError:
        return False


def _shown(url: str) -> str:
    """``url`` for messages, logs and output: the user and password of each of its URLs (a
    cluster's are comma-separated) replaced by ``***``."""
    return ",".join(_shown_one(part) for part in url.split(","))


def _shown_one(url: str) -> str:
    if "@" not in url:
        return url
    scheme, separator, _ = url.partition("://")
    return (scheme + separator if separator else "") + "***@" + url.rsplit("@", 1)[1]


class NatsSettings(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``backend.nats`` section: which server, and the names this team uses on it."""

    url: str = "nats://127.0.0.1:4222"  # a cluster: several, comma-separated
    prefix: str = "teams"  # streams, buckets and subjects start with it (one team per prefix)
    replicas: int = 1  # JetStream replicas of every stream and bucket (3 in a 3-node cluster)
    connect_seconds: float = 2.0  # how long starting waits for the server before giving up
    retry_seconds: float = 60.0  # how long a call retries while the server is away

    @property
    def shown_url(self) -> str:
        """The URL for messages and logs: a user or password in it is never shown."""
        return _shown(self.url)

    def __post_init__(self) -> None:
        for part in self.url.split(","):
            match = _NATS_URL.fullmatch(part.strip())
            if match is None or not _is_nats_host(match.group(2)):
                raise ConfigError(
                    f"team_runtime.yaml backend.nats.url {_shown(self.url)!r} is not a NATS "
                    "URL; write it as nats://HOST:PORT (or tls://HOST:PORT; several, "
                    "comma-separated, for a cluster)."
                )
            port = int(match.group(3)[1:]) if match.group(3) else None
            if port is not None and not _is_port(port):
                raise ConfigError(
                    f"team_runtime.yaml backend.nats.url {_shown(self.url)!r} names port "
                    f"{port}, which no server can listen on; a port is between 1 and "
                    f"{_HIGHEST_PORT}."
                )
        if _NATS_PREFIX.fullmatch(self.prefix) is None:
            raise ConfigError(
                "team_runtime.yaml backend.nats.prefix must start with a letter and hold only "
                "letters, digits, '_' and '-' (at most 32 characters)."
            )
        if type(self.replicas) is not int or not 1 <= self.replicas <= 5:
            raise ConfigError("team_runtime.yaml backend.nats.replicas must be between 1 and 5.")
        if not 0 < self.connect_seconds <= 60 or not 0 < self.retry_seconds <= 3600:
            raise ConfigError(
                "team_runtime.yaml backend.nats.connect_seconds must be in (0, 60] and "
                "retry_seconds in (0, 3600]."
            )


class BackendConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``backend`` section: where requests and the queue live (docs/scaling.md)."""

    kind: str = "file"
    nats: NatsSettings = NatsSettings()

    def __post_init__(self) -> None:
        if self.kind not in BACKEND_KINDS:
            raise ConfigError(
                f"team_runtime.yaml backend.kind must be one of: {', '.join(BACKEND_KINDS)}."
            )


def backend_block_text(settings: NatsSettings) -> str:
    """The ``backend`` block ``init --backend nats`` writes for ``settings`` (already checked,
    as a ``NatsSettings``)."""
    return (
        "\n# Where requests and the work queue live: `file` (this folder) or `nats` (shared by\n"
        "# every host of the team through NATS JetStream). See docs/scaling.md.\n"
        "backend:\n"
        "  kind: nats\n"
        "  nats:\n"
        f"    url: {settings.url}\n"
        f"    prefix: {settings.prefix}\n"
        f"    replicas: {settings.replicas}\n"
    )


class TeamConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Everything read from ``team_runtime.yaml`` when role services start."""

    prompt_context: PromptContextConfig = PromptContextConfig()
    model: ModelConfig = ModelConfig()
    team: TeamSection = TeamSection()
    queue: QueueConfig = QueueConfig()
    backend: BackendConfig = BackendConfig()


_SectionT = TypeVar("_SectionT", bound=msgspec.Struct)


def _settings_of(section: type[msgspec.Struct]) -> dict[str, type[msgspec.Struct] | None]:
    """The keys a section accepts, each with its own section type if it is a section too."""
    keys: dict[str, type[msgspec.Struct] | None] = {}
    for field in msgspec.structs.fields(section):
        # A section may be optional (`OpenAIConfig | None`): look inside the union too.
        kinds = [field.type, *get_args(field.type)]
        nested = [
            kind for kind in kinds if isinstance(kind, type) and issubclass(kind, msgspec.Struct)
        ]
        keys[field.encode_name] = nested[0] if nested else None
    return keys


def _unknown_key(key: object, path: str, valid: list[str]) -> ConfigError:
    written = written_key(key)  # `null:` is reported as null, not as Python's None
    dotted = f"{path}.{written}" if path else written
    close = difflib.get_close_matches(written, valid, n=1)
    if close:
        message = f"{dotted} is not a setting; did you mean {close[0]}?"
        return ConfigError(f"{CONFIG_FILE_NAME} {message}")
    where = f"in {path}" if path else "at the top level"
    return ConfigError(
        f"{CONFIG_FILE_NAME} {dotted} is not a setting; the settings {where} are: "
        f"{', '.join(valid)}."
    )


def _check_keys(block: object, section: type[msgspec.Struct], path: str = "") -> None:
    """Refuse a key no section declares, anywhere in the file, naming it and the nearest one.

    Walks the section types themselves, so a new setting needs no change here. A block that
    is not a mapping is left to the section's own check ("must be a mapping").
    """
    if not isinstance(block, Mapping):
        return
    settings = _settings_of(section)
    for key, value in block.items():
        if key not in settings:
            raise _unknown_key(key, path, list(settings))
        nested = settings[key]
        if nested is not None:
            _check_keys(value, nested, f"{path}.{key}" if path else str(key))


def _section(block: object, name: str, section: type[_SectionT], doc: str) -> _SectionT:
    """Check a strict section: bad values are errors naming their path."""
    if block is None:
        return section()
    if not isinstance(block, Mapping):
        raise ConfigError(f"team_runtime.yaml {name} must be a mapping.")
    try:
        return msgspec.convert(block, section)
    except msgspec.ValidationError as exc:
        if isinstance(exc.__cause__, ConfigError):
            raise exc.__cause__ from None
        message, _, where = str(exc).partition(" - at `$")
        path = name + where.rstrip("`")
        raise ConfigError(f"team_runtime.yaml {path}: {message}; see {doc}.") from None


def _prompt_context(block: object) -> PromptContextConfig:
    """Check a ``prompt_context`` block (its keys already checked); missing, ``null`` or ``{}``
    gives the defaults.

    Unknown keys are errors naming the nearest valid key (issue 14 overrides spec section 3,
    which ignored them: a typo such as ``max_event`` silently kept the default): that is
    ``_check_keys``, run on the whole file first.
    """
    if block is None:
        return PromptContextConfig()
    if not isinstance(block, Mapping):
        raise ConfigError(f"{_PREFIX} must be a mapping.")
    # A count left empty takes its default; `enabled` left empty stays an error (the rollback
    # switch is said out loud).
    given = {key: value for key, value in block.items() if value is not None or key == "enabled"}
    return PromptContextConfig(**given)


def parse_team_config(text: str, source: str) -> TeamConfig:
    """Parse the text of a ``team_runtime.yaml``; ``source`` names the file in errors.

    ``source`` is the path as the user gave it (``cfg/team_runtime.yaml``); a setting's error
    reads ``<source> <section>.<key> ...``, exactly the spec's message when ``source`` is the
    bare file name. A key written twice in any mapping is an error too (``config_yaml``).
    """
    try:
        document: Any = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"{source}: not valid YAML ({yaml_problem(exc)}); fix the file and try again."
        ) from exc
    except DuplicateKeyError as exc:
        raise ConfigError(f"{source} {exc}") from None
    if document is None:  # an empty file: every section takes its defaults
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError(
            f"{source}: the top level must be a mapping of sections "
            f"(found {type(document).__name__})."
        )
    try:
        _check_keys(document, TeamConfig)  # every section's keys, before any value is checked
        return TeamConfig(
            prompt_context=_prompt_context(document.get("prompt_context")),
            model=_section(document.get("model"), "model", ModelConfig, "docs/models.md"),
            team=_section(document.get("team"), "team", TeamSection, "docs/configuration.md"),
            queue=_section(document.get("queue"), "queue", QueueConfig, "docs/configuration.md"),
            backend=_section(document.get("backend"), "backend", BackendConfig, "docs/scaling.md"),
        )
    except ConfigError as exc:
        message = str(exc)
        if source == CONFIG_FILE_NAME or not message.startswith(f"{CONFIG_FILE_NAME} "):
            raise
        raise ConfigError(source + message[len(CONFIG_FILE_NAME) :]) from None
