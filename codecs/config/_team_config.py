"""The whole of ``team_runtime.yaml`` (``TeamConfig``) and the parser of its text.

Reading the file from a workspace is ``storage.workspace.load_team_config``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import msgspec

from teams_runtime.codecs.config._backend_section import StorageConfig
from teams_runtime.codecs.config._cast import DEFAULT_CAST, Cast
from teams_runtime.codecs.config._cast_section import cast_names
from teams_runtime.codecs.config._model_choices import (
    INTERNAL_AGENTS,
    ModelChoice,
    internal_agent_defaults_from_block,
    role_defaults_from_block,
)
from teams_runtime.codecs.config._model_notes import role_defaults_note
from teams_runtime.codecs.config._model_section import ModelConfig
from teams_runtime.codecs.config._prompt_context_section import (
    PromptBudget,
    PromptContextConfig,
    prompt_context_from_block,
)
from teams_runtime.codecs.config._queue_section import QueueConfig
from teams_runtime.codecs.config._roles_section import (
    RoleConfig,
    check_role_keys,
    model_for_team,
    roles_from_blocks,
)
from teams_runtime.codecs.config._setting_checks import CONFIG_FILE_NAME
from teams_runtime.codecs.config._team_section import TeamSection
from teams_runtime.codecs.config._telemetry_section import TelemetryConfig, telemetry_from_block
from teams_runtime.codecs.config._unknown_keys import check_keys
from teams_runtime.codecs.config._upstream_sections import (
    UNUSED_SECTIONS,
    check_actions,
    check_allowed_guild_ids,
    check_approval,
    check_ingress,
    check_research_defaults,
    check_sprint,
)
from teams_runtime.codecs.config._value_messages import convert_section
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.exceptions import ConfigError

__all__ = ["TeamConfig", "parse_team_config", "section_notes"]


class TeamConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Everything read from ``team_runtime.yaml`` when role services start.

    ``model`` is the ``model`` section as written; what each role runs with (upstream's
    ``role_defaults`` and the role's own ``roles.<role>.model`` laid over it) is ``roles``,
    read through ``model_for``. ``roles`` holds exactly the team's roles (``team.roles``, by
    default the eight built-in ones), in its order: ``cast``. The sections after ``backend``
    are upstream's (spec section 3b): checked as upstream does and kept as written;
    ``section_notes`` says which drive nothing here.
    """

    prompt_context: PromptContextConfig = PromptContextConfig()
    model: ModelConfig = ModelConfig()
    roles: dict[str, RoleConfig] = {}
    team: TeamSection = TeamSection()
    queue: QueueConfig = QueueConfig()
    backend: StorageConfig = StorageConfig()
    role_defaults: dict[str, ModelChoice] = {}
    internal_agent_defaults: dict[str, ModelChoice] = {}
    telemetry: TelemetryConfig = TelemetryConfig()
    sprint: JsonObject | None = None
    ingress: JsonObject | None = None
    allowed_guild_ids: list[Any] | None = None
    research_defaults: JsonObject | None = None
    actions: JsonObject | None = None

    @property
    def cast(self) -> Cast:
        """The team's roles (``team.roles``) and each one's settings: what every part of the
        runtime takes its roles from. A config built in code without ``roles``: the eight
        built-in roles."""
        return Cast(self.roles) if self.roles else DEFAULT_CAST

    def model_for(self, role: str) -> ModelConfig:
        """The model ``role`` runs with: its entry of ``roles``, or (a config built in code
        without one) the ``model`` section."""
        settings = self.roles.get(role)
        return settings.model if settings is not None else self.model

    def prompt_budget(self, role: str) -> PromptBudget:
        """The token budget of ``role``'s prompts and where it is written: its own
        ``roles.<role>.prompt_context.max_prompt_tokens`` (``none``: no budget), else
        ``prompt_context``'s, else none (docs/compaction.md, the budget)."""
        settings = self.roles.get(role)
        own = settings.prompt_context.max_prompt_tokens if settings is not None else None
        if own == "none":
            return PromptBudget(source="role")
        if own is not None:
            return PromptBudget(max_prompt_tokens=own, source="role")
        written = self.prompt_context.max_prompt_tokens
        if written is not None:
            return PromptBudget(max_prompt_tokens=written, source="global")
        return PromptBudget()


def section_notes(config: TeamConfig) -> list[str]:
    """One line for each of upstream's sections present in ``config`` that drives nothing
    here (checked, kept, and otherwise left alone), and one naming the roles whose model name
    ``role_defaults`` gives (``model_notes``)."""
    notes = [
        f"team_runtime.yaml {name} is checked but not used: {why}."
        for name, why in UNUSED_SECTIONS.items()
        if getattr(config, name) is not None
    ]
    agents = [agent for agent in INTERNAL_AGENTS[:2] if agent in config.internal_agent_defaults]
    if agents:
        notes.append(
            f"team_runtime.yaml internal_agent_defaults.{' and .'.join(agents)} "
            f"{'is' if len(agents) == 1 else 'are'} checked but not used: teams-runtime has no "
            "such agents (its version_controller entry is used)."
        )
    named = role_defaults_note(config)
    if named is not None:
        notes.append(named)
    return notes


_SectionT = TypeVar("_SectionT", bound=msgspec.Struct)


def _section(block: object, name: str, section: type[_SectionT], doc: str) -> _SectionT:
    """Check a strict section: bad values are errors naming their path."""
    if block is None:
        return section()
    if not isinstance(block, Mapping):
        raise ConfigError(f"team_runtime.yaml {name} must be a mapping.")
    return convert_section(block, section, name, doc)


def parse_team_config(text: str, source: str) -> TeamConfig:
    """Parse the text of a ``team_runtime.yaml``; ``source`` names the file in errors.

    ``source`` is the path as the user gave it (``cfg/team_runtime.yaml``); a setting's error
    reads ``<source> <section>.<key> ...``, exactly the spec's message when ``source`` is the
    bare file name. A key written twice in any mapping is an error too (``strict_yaml``).
    """
    # PyYAML (about 11 ms to import) only when there is text to parse: the Structs above are
    # all that a config read back from its cache (storage's config_cache) needs.
    import yaml

    from teams_runtime.codecs.config._strict_yaml import (
        DuplicateKeyError,
        YamlTooLarge,
        load_yaml,
        yaml_problem,
    )

    try:
        document: Any = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(
            f"{source}: not valid YAML ({yaml_problem(exc)}); fix the file and try again."
        ) from exc
    except DuplicateKeyError as exc:
        raise ConfigError(f"{source} {exc}") from None
    except YamlTooLarge as exc:
        raise ConfigError(f"{source}: {exc}.") from None
    if document is None:  # an empty file: every section takes its defaults
        document = {}
    if not isinstance(document, Mapping):
        raise ConfigError(
            f"{source}: the top level must be a mapping of sections "
            f"(found {type(document).__name__})."
        )
    try:
        return _parse_sections(document)
    except ConfigError as exc:
        message = str(exc)
        if source == CONFIG_FILE_NAME or not message.startswith(f"{CONFIG_FILE_NAME} "):
            raise
        raise ConfigError(source + message[len(CONFIG_FILE_NAME) :]) from None


def _check_auto_budgets(config: TeamConfig) -> None:
    """Refuse ``max_prompt_tokens: auto`` for a role whose model is not an OpenAI-compatible
    server's: only such a server can say its context size. A person's role sends no prompt.
    Every role refused is named at once, so one edit mends them all."""
    refused = [
        (role, config.model_for(role).backend, config.prompt_budget(role).source)
        for role in config.cast.names
        if config.prompt_budget(role).max_prompt_tokens == "auto"
        and config.model_for(role).backend not in ("openai", "human")
    ]
    if not refused:
        return
    own = [
        f"roles.{role}.prompt_context.max_prompt_tokens" for role, _, s in refused if s == "role"
    ]
    if own:
        raise ConfigError(
            f"{CONFIG_FILE_NAME} {', '.join(own)} {'is' if len(own) == 1 else 'are'} auto, "
            "which only the openai backend can resolve (its server's context size), and "
            f"{_backends_of([item for item in refused if item[2] == 'role'])}: give a number "
            "of tokens."
        )
    names = ", ".join(role for role, _, _ in refused)
    raise ConfigError(
        f"{CONFIG_FILE_NAME} prompt_context.max_prompt_tokens is auto, which only the openai "
        f"backend can resolve (its server's context size), and {_backends_of(refused)}: give "
        "a number of tokens, or set roles.<role>.prompt_context.max_prompt_tokens (a number, "
        f"or none for no budget) for {names}."
    )


def _backends_of(refused: Sequence[tuple[str, str, str]]) -> str:
    """``the qa role's model.backend is command``, or for several roles each backend once."""
    if len(refused) == 1:
        role, backend, _ = refused[0]
        return f"the {role} role's model.backend is {backend}"
    by_backend: dict[str, list[str]] = {}
    for role, backend, _ in refused:
        by_backend.setdefault(backend, []).append(role)
    said = "; ".join(f"{', '.join(roles)} use {backend}" for backend, roles in by_backend.items())
    return f"the roles' model.backend is not openai ({said})"


def _parse_sections(document: Mapping[str, Any]) -> TeamConfig:
    """Check every section: keys first, then upstream's sections in upstream's order
    (spec section 3b), then this runtime's own."""
    # Every section's keys, before any value is checked (approval is refused in its turn).
    check_keys({key: value for key, value in document.items() if key != "approval"}, TeamConfig)
    names = cast_names(document.get("team"))  # the roles `roles.<name>` may name
    check_role_keys(document.get("roles"), names)
    sprint = check_sprint(document.get("sprint"))
    ingress = check_ingress(document.get("ingress"))
    check_approval(document)
    role_defaults = role_defaults_from_block(document.get("role_defaults"))
    agents = internal_agent_defaults_from_block(document.get("internal_agent_defaults"))
    research_defaults = check_research_defaults(document.get("research_defaults"))
    prompt_context = prompt_context_from_block(document.get("prompt_context"))
    telemetry = telemetry_from_block(document.get("telemetry"))
    actions = check_actions(document.get("actions"))
    allowed_guild_ids = check_allowed_guild_ids(document.get("allowed_guild_ids"))
    model_block = document.get("model")
    model = model_for_team(
        _section(model_block, "model", ModelConfig, "docs/models.md"),
        blocks=(model_block,),
        names=names,
    )
    config = TeamConfig(
        prompt_context=prompt_context,
        model=model,
        roles=roles_from_blocks(
            document.get("roles"),
            names=names,
            model=model,
            model_block=model_block,
            role_defaults=role_defaults,
            agents=agents,
        ),
        team=_section(document.get("team"), "team", TeamSection, "docs/configuration.md"),
        queue=_section(document.get("queue"), "queue", QueueConfig, "docs/configuration.md"),
        backend=_section(document.get("backend"), "backend", StorageConfig, "docs/scaling.md"),
        role_defaults=role_defaults,
        internal_agent_defaults=agents,
        telemetry=telemetry,
        sprint=sprint,
        ingress=ingress,
        allowed_guild_ids=allowed_guild_ids,
        research_defaults=research_defaults,
        actions=actions,
    )
    _check_auto_budgets(config)
    return config
