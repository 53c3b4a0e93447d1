"""The ``model`` section: which backend answers prompts (dry run, a command, an OpenAI server,
or a person: ``human``, whose answers come through ``teams-runtime answer``), and the tools
its model may call (``model.tools``: the ``openai`` backend)."""

from __future__ import annotations

import re
from typing import Any, Literal, get_args

import msgspec

from teams_runtime.codecs.config._openai_section import OpenAIConfig
from teams_runtime.codecs.config._setting_checks import (
    LONGEST_CALL_SECONDS,
    MOST_ATTEMPTS,
    MOST_OUTPUT_BYTES,
    check_at_most,
    duration_seconds,
)
from teams_runtime.exceptions import ConfigError

__all__ = [
    "MOST_TOOL_ROUNDS",
    "STRUCTURED_OUTPUT_FORMS",
    "DryRunConfig",
    "McpServerConfig",
    "ModelConfig",
    "OpenAIConfig",
    "StructuredOutput",
    "ToolsConfig",
]

# How a call asks for an answer in the contract's shape: a JSON schema in the request
# (`response_format`), JSON alone, or nothing (the prompt's own words).
StructuredOutput = Literal["json_schema", "json_object", "off"]
STRUCTURED_OUTPUT_FORMS: tuple[str, ...] = get_args(StructuredOutput)


MOST_TOOL_ROUNDS = 64  # model.tools.max_rounds: far more than any answer needs
_TOOLS = "team_runtime.yaml model.tools"
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")  # what OpenAI takes as a function's name
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class McpServerConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One MCP server: a stdio ``command`` (an argument list) or a streamable HTTP ``url``,
    and the names of its tools a role may call (``tools``: an allow-list, never all)."""

    name: str
    command: list[str] = []
    url: str = ""
    tools: list[str] = []
    # Variables of the server's process (stdio), as model.env: values as written.
    env: dict[str, str] = {}
    # The names of environment variables whose values go to an HTTP server as headers
    # (``{header: VARIABLE}``): the secret stays in the environment, never in the file.
    headers_env: dict[str, str] = {}

    def check(self, where: str) -> None:
        """Raise ``ConfigError`` for a server that cannot be started or named."""
        if _NAME.fullmatch(self.name) is None:
            raise ConfigError(f"{where}.name must be 1 to 64 letters, digits, '_' or '-'.")
        if bool(self.command) == bool(self.url):
            raise ConfigError(
                f"{where} needs either command (a stdio server, as an argument list) or url "
                "(a streamable HTTP server), not both."
            )
        if self.url and not self.url.startswith(("http://", "https://")):
            raise ConfigError(f"{where}.url must start with http:// or https://.")
        if not self.tools:
            raise ConfigError(
                f"{where}.tools must list the names of the server's tools a role may call."
            )
        for tool in self.tools:
            if _NAME.fullmatch(tool) is None:
                raise ConfigError(f"{where}.tools holds {tool!r}, which cannot be a tool's name.")
        for variable in self.headers_env.values():
            if _ENV_NAME.fullmatch(variable) is None:
                raise ConfigError(
                    f"{where}.headers_env values must be names of environment variables."
                )


class ToolsConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``model.tools`` section (``openai`` backend only)."""

    # The built-in tools over the request's canonical record: off unless asked for (docs/models.md).
    read_events: bool = False
    # How many rounds of tool calls one model call may take before it must answer.
    max_rounds: int = 4
    mcp: list[McpServerConfig] = []

    @property
    def enabled(self) -> bool:
        """Whether any tool is offered."""
        return self.read_events or bool(self.mcp)

    def __post_init__(self) -> None:
        if self.max_rounds < 1:
            raise ConfigError(f"{_TOOLS}.max_rounds must be at least 1.")
        check_at_most("model.tools.max_rounds", self.max_rounds, MOST_TOOL_ROUNDS)
        names: set[str] = set()
        for number, server in enumerate(self.mcp):
            server.check(f"{_TOOLS}.mcp[{number}]")
            if server.name in names:
                raise ConfigError(f"{_TOOLS}.mcp names {server.name!r} twice.")
            names.add(server.name)


class DryRunConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The built-in dry-run backend: valid results, no model, a fixed route of roles (a route
    written in the file names roles of the team: ``roles_section`` checks it, knowing the
    cast)."""

    route: list[str] = msgspec.field(default_factory=lambda: ["planner", "developer", "qa"])


class ModelConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """The ``model`` section: which backend answers prompts, and how."""

    backend: Literal["dry_run", "command", "openai", "human"] = "dry_run"
    command: list[str] = []
    timeout_seconds: float = 300.0
    env: dict[str, str] = {}
    attempts: int = 2
    on_failure: Literal["fail", "requeue"] = "fail"
    max_output_bytes: int = 1_048_576
    dry_run: DryRunConfig = DryRunConfig()
    openai: OpenAIConfig | None = None
    # The tools the model may call (openai backend only): none unless asked for.
    tools: ToolsConfig = ToolsConfig()
    # Left out (None): the backend's default, filled in when the config is built (json_schema
    # for openai and command: a command gets the schema as a file, a cheap offer a CLI may
    # take or ignore; off for the dry run), so the field always holds the form the calls use.
    structured_output: StructuredOutput | None = None
    # The command backend's `{model}` and `{reasoning}` (and TEAMS_RUNTIME_MODEL,
    # TEAMS_RUNTIME_REASONING); the openai backend's are openai.model, openai.reasoning_effort.
    name: str = ""
    reasoning: str = ""
    # `human` only: how long a person has to answer before `on_failure` handles the envelope
    # (seconds, or text such as 4h); None waits without a limit. Seconds once built. Any kind
    # is taken here so that every wrong one gets the duration's own message.
    answer_within: Any = None

    @property
    def structured_output_form(self) -> StructuredOutput:
        """The form of structured output this backend's calls use: ``structured_output``
        (never ``None`` once built: this is the same value, typed without it)."""
        if self.structured_output is not None:
            return self.structured_output
        return "json_schema" if self.backend in ("command", "openai") else "off"

    @property
    def answer_seconds(self) -> float | None:
        """``answer_within`` in seconds (``None``: a person's answer may take any time)."""
        within = self.answer_within
        return None if within is None else duration_seconds(within, "model.answer_within")

    def __post_init__(self) -> None:
        # A frozen Struct: filled in once, here. (A copy made with `structs.replace` keeps it:
        # a role's model is merged from what was written, never from a built config.)
        msgspec.structs.force_setattr(self, "structured_output", self.structured_output_form)
        if self.answer_within is not None:
            if self.backend != "human":
                raise ConfigError(
                    "team_runtime.yaml model.answer_within is for a person's role: set "
                    "model.backend to human with it, or remove it (docs/roles.md)."
                )
            msgspec.structs.force_setattr(self, "answer_within", self.answer_seconds)
        if self.backend == "openai" and self.openai is None:
            raise ConfigError(
                "team_runtime.yaml model.openai must be set when model.backend is openai "
                "(at least base_url and model); see docs/models.md."
            )
        # A person's role and the dry run take none and ignore them (a team's global tools
        # with a person approving); a command's CLI would silently never see them.
        if self.tools.enabled and self.backend == "command":
            raise ConfigError(
                "team_runtime.yaml model.tools is for the openai backend (a command's CLI "
                "opens files itself); remove it or set model.backend to openai."
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
        for setting, value in (("name", self.name), ("reasoning", self.reasoning)):
            if value != value.strip():
                raise ConfigError(
                    f"team_runtime.yaml model.{setting} must not start or end with a space."
                )
