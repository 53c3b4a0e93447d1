"""The ``roles`` section, and the model each role ends up with.

``roles.<role>`` is a mapping of that role's own settings: above all ``model``, which takes
any key of the ``model`` section, and ``prompt_context``, which takes only
``max_prompt_tokens`` (the role's own budget). A role's model is, from the weakest:

1. the ``model`` section;
2. upstream's ``role_defaults.<role>`` (``internal_agent_defaults.version_controller`` for the
   version controller, or else the orchestrator's): its ``model`` is the model name
   (``openai.model`` for the openai backend, ``name`` otherwise: the command's ``{model}``),
   its ``reasoning`` the reasoning level (``openai.reasoning_effort``, or ``reasoning``);
3. ``roles.<role>.model``.

Each is laid over the one before it key by key, mappings (``openai``, ``env``,
``openai.extra_body``, ...) key by key too; any other value (a list, a number) replaces the
one below it. The result is checked as a whole ``model`` section would be, and an error
names where the bad value was written.

A role setting beside ``model`` (``rules``, ``hands_to``, ``prompt_kind``, ``concurrency``,
``output``) is
a field of ``RoleConfig``, whose fields are also the keys ``check_role_keys`` accepts under
``roles.<role>`` (and, when the field is a Struct, inside it); its value is read by
``cast_section.role_settings`` (``prompt_context`` is read here). ``config`` prints every field
as it is. Which roles there are
is ``team.roles`` (``cast_section.cast_names``): ``roles.<name>`` may name only those.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from teams_runtime.codecs.config._cast_section import role_settings
from teams_runtime.codecs.config._model_choices import ModelChoice
from teams_runtime.codecs.config._model_section import DryRunConfig, ModelConfig
from teams_runtime.codecs.config._prompt_context_section import (
    PromptContextConfig,
    RolePromptContext,
    role_prompt_context_from_block,
)
from teams_runtime.codecs.config._unknown_keys import check_keys
from teams_runtime.codecs.config._value_messages import convert_section, nearest
from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.roles import RolePromptKind
from teams_runtime.exceptions import ConfigError

__all__ = [
    "RoleConfig",
    "check_role_keys",
    "model_for_team",
    "roles_from_blocks",
    "upstream_choice",
]

_FILE = "team_runtime.yaml"
_PLACEHOLDERS = (("{model}", "name", "model"), ("{reasoning}", "reasoning", "reasoning"))
# The path a section's message names: `team_runtime.yaml model.openai.temperature must ...`.
_NAMED_PATH = re.compile(r"team_runtime\.yaml model((?:\.[^\s.:\[]+(?:\[\d+\])?)*)")


class RoleConfig(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What one role runs with: its model, with every default and override applied, and what
    its prompts say of it (docs/roles.md).

    ``rules`` are its "Role rules" lines; ``hands_to`` the roles it may name as ``next_role``
    (``""``: it may finish the request; ``None``: any role of the team, or none);
    ``prompt_kind`` the prompt it gets for new work; ``concurrency`` how many of its
    envelopes one worker handles at once (``None``: the Team's, 4 by default); ``output``
    whether its contract asks for its deliverable (the ``output`` field)."""

    model: ModelConfig = ModelConfig()
    rules: list[str] = []
    hands_to: list[str] | None = None
    prompt_kind: RolePromptKind = "role_task"
    concurrency: int | None = None
    prompt_context: RolePromptContext = RolePromptContext()
    output: bool = False


# The `prompt_context` keys every role shares (spec section 3): refused under a role, saying so.
_SHARED = frozenset(
    field.encode_name
    for field in msgspec.structs.fields(PromptContextConfig)
    if field.encode_name != "max_prompt_tokens"
)


def _check_shared_keys(role: str, settings: object) -> None:
    block = settings.get("prompt_context") if isinstance(settings, Mapping) else None
    if not isinstance(block, Mapping):
        return
    for key in block:
        if key in _SHARED:
            raise ConfigError(
                f"{_FILE} roles.{role}.prompt_context.{key} cannot be set per role: every role "
                f"gets the same prompt_context (set prompt_context.{key}); only "
                "max_prompt_tokens may differ per role."
            )


def check_role_keys(block: object, names: Sequence[str]) -> None:
    """Refuse a role that is not one of the team's ``names`` (``team.roles``), and a key no
    role setting declares (before any value is checked, like every other unknown key)."""
    if not isinstance(block, Mapping):
        return
    for role, settings in block.items():
        if role not in names:
            close = nearest(str(role), list(names))
            listed = ", ".join(names)
            hint = (
                f"did you mean {close}?"
                if close
                else f"the roles are: {listed} (to add one, list the team in team.roles)."
            )
            raise ConfigError(f"{_FILE} roles.{role} is not a role of the team; {hint}")
        _check_shared_keys(str(role), settings)
        check_keys(settings, RoleConfig, f"roles.{role}")


def _merged(under: Mapping[str, Any], over: Mapping[str, Any]) -> JsonObject:
    merged = dict(under)
    for key, value in over.items():
        below = merged.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            merged[key] = _merged(below, value)
        else:
            merged[key] = value
    return merged


def _choice_block(choice: ModelChoice, backend: object) -> JsonObject:
    """``role_defaults``' model and reasoning as keys of the ``model`` section."""
    if backend == "openai":
        openai = {"model": choice.model, "reasoning_effort": choice.reasoning}
        given = {key: value for key, value in openai.items() if value}
        return {"openai": given} if given else {}
    own = {"name": choice.model, "reasoning": choice.reasoning}
    return {key: value for key, value in own.items() if value}


def _has_path(block: Mapping[str, Any], dotted: str) -> bool:
    value: object = block
    for key in dotted.split("."):
        key = key.split("[", 1)[0]
        if not isinstance(value, Mapping) or key not in value:
            return False
        value = value[key]
    return True


def _role_error(
    exc: ConfigError, role: str, own: Mapping[str, Any], chosen: JsonObject, source: str
) -> ConfigError:
    """``exc`` (a message about the ``model`` section) said of where its value was written:
    ``roles.<role>.model``, or the role's entry of ``role_defaults``."""
    message = str(exc)
    found = _NAMED_PATH.match(message)
    path = found.group(1).removeprefix(".") if found else ""
    rest = message[found.end() :] if found else ""
    if path and _has_path(own, path):
        return ConfigError(f"{_FILE} roles.{role}.model.{path}{rest}")
    if path and _has_path(chosen, path):
        last = path.rsplit(".", 1)[-1]
        key = "reasoning" if last in ("reasoning", "reasoning_effort") else "model"
        return ConfigError(f"{_FILE} {source}.{key}{rest}")
    said = message.removeprefix(f"{_FILE} ")
    return ConfigError(f"{_FILE} roles.{role}.model, laid over model: {said}")


def _check_placeholders(role: str, model: ModelConfig, source: str) -> None:
    if model.backend != "command":
        return
    for placeholder, setting, key in _PLACEHOLDERS:
        if any(placeholder in part for part in model.command) and not getattr(model, setting):
            raise ConfigError(
                f"{_FILE} model.command uses {placeholder}, but role {role} has no {key}: set "
                f"{source}.{key}, roles.{role}.model.{setting} or model.{setting}."
            )


def upstream_choice(
    role: str, role_defaults: Mapping[str, ModelChoice], agents: Mapping[str, ModelChoice]
) -> tuple[ModelChoice | None, str]:
    """The role's entry of upstream's defaults, and where it is written."""
    if role == "version_controller" and role in agents:
        return agents[role], "internal_agent_defaults.version_controller"
    if role == "version_controller":  # an absent agent inherits the orchestrator's
        return role_defaults.get("orchestrator"), "role_defaults.orchestrator"
    return role_defaults.get(role), f"role_defaults.{role}"


def _role_model(
    role: str,
    base: ModelConfig,
    model_block: Mapping[str, Any],
    own: Mapping[str, Any],
    choice: ModelChoice | None,
    source: str,
) -> ModelConfig:
    backend = own.get("backend", model_block.get("backend", "dry_run"))
    chosen = _choice_block(choice, backend) if choice is not None else {}
    if not chosen and not own:
        model = base
    else:
        merged = _merged(_merged(model_block, chosen), own)
        try:
            model = convert_section(merged, ModelConfig, "model", "docs/models.md")
        except ConfigError as exc:
            raise _role_error(exc, role, own, chosen, source) from None
    _check_placeholders(role, model, source)
    return model


def _check_route(route: list[str], where: str, names: Sequence[str]) -> None:
    unknown = [role for role in route if role not in names]
    if unknown:
        raise ConfigError(
            f"{_FILE} {where}.dry_run.route names roles the team does not have "
            f"({', '.join(unknown)}); roles are: {', '.join(names)}. List this team's roles "
            "in the route (the one `init` writes is for the default team), or remove it."
        )


def model_for_team(
    model: ModelConfig, *, blocks: Sequence[object], names: Sequence[str]
) -> ModelConfig:
    """``model`` (checked from ``blocks``, laid one over the other) with the dry-run route
    it follows for this team: a route none of the blocks writes is the default one less
    the roles the team lacks (a team without planner, developer and qa finishes each
    request at its first role), so ``config`` shows the route the dry run takes, not one
    naming roles of another team."""
    written = any(isinstance(b, Mapping) and _has_path(b, "dry_run.route") for b in blocks)
    route = model.dry_run.route
    if written or all(role in names for role in route):
        return model
    kept = [role for role in route if role in names]
    return msgspec.structs.replace(model, dry_run=DryRunConfig(route=kept))


def roles_from_blocks(
    block: object,
    *,
    names: Sequence[str],
    model: ModelConfig,
    model_block: object,
    role_defaults: Mapping[str, ModelChoice],
    agents: Mapping[str, ModelChoice],
) -> dict[str, RoleConfig]:
    """Every role's settings, in the team's order (``names``): ``roles.<role>`` (its keys
    already checked) over upstream's defaults over the ``model`` section (``model``, already
    checked from ``model_block``); beside the model, ``cast_section.role_settings``."""
    if block is None:
        block = {}
    if not isinstance(block, Mapping):
        raise ConfigError(f"{_FILE} roles must be a mapping.")
    base_block = model_block if isinstance(model_block, Mapping) else {}
    # A route written in the file names roles of this team (the default one may not: a team
    # without planner, developer and qa simply finishes each request at its first role).
    if _has_path(base_block, "dry_run.route"):
        _check_route(model.dry_run.route, "model", names)
    roles: dict[str, RoleConfig] = {}
    for role in names:
        settings = block.get(role)
        if settings is None:
            settings = {}
        if not isinstance(settings, Mapping):
            raise ConfigError(f"{_FILE} roles.{role} must be a mapping.")
        own = settings.get("model")
        if own is None:
            own = {}
        if not isinstance(own, Mapping):
            raise ConfigError(f"{_FILE} roles.{role}.model must be a mapping.")
        choice, source = upstream_choice(role, role_defaults, agents)
        role_model = _role_model(role, model, base_block, own, choice, source)
        if _has_path(own, "dry_run.route"):
            _check_route(role_model.dry_run.route, f"roles.{role}.model", names)
        role_model = model_for_team(role_model, blocks=(base_block, own), names=names)
        others = role_settings(role, settings, names)
        roles[role] = RoleConfig(
            model=role_model,
            rules=others.rules or [],
            hands_to=others.hands_to,
            prompt_kind=others.prompt_kind or "role_task",
            concurrency=others.concurrency,
            output=bool(others.output),
            prompt_context=role_prompt_context_from_block(role, settings.get("prompt_context")),
        )
    return roles
