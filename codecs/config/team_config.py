"""The whole of ``team_runtime.yaml`` (``TeamConfig``) and the parser of its text.

Reading the file from a workspace is ``storage.workspace.load_team_config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec
import yaml

from teams_runtime.codecs.config.backend_section import BackendConfig
from teams_runtime.codecs.config.model_section import ModelConfig
from teams_runtime.codecs.config.prompt_context_section import (
    PromptContextConfig,
    prompt_context_from_block,
)
from teams_runtime.codecs.config.queue_section import QueueConfig
from teams_runtime.codecs.config.setting_checks import CONFIG_FILE_NAME
from teams_runtime.codecs.config.strict_yaml import DuplicateKeyError, load_yaml, yaml_problem
from teams_runtime.codecs.config.team_section import TeamSection
from teams_runtime.codecs.config.unknown_keys import check_keys
from teams_runtime.exceptions import ConfigError

__all__ = ["TeamConfig", "parse_team_config"]


class TeamConfig(msgspec.Struct, frozen=True, kw_only=True):
    """Everything read from ``team_runtime.yaml`` when role services start."""

    prompt_context: PromptContextConfig = PromptContextConfig()
    model: ModelConfig = ModelConfig()
    team: TeamSection = TeamSection()
    queue: QueueConfig = QueueConfig()
    backend: BackendConfig = BackendConfig()


_SectionT = TypeVar("_SectionT", bound=msgspec.Struct)


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


def parse_team_config(text: str, source: str) -> TeamConfig:
    """Parse the text of a ``team_runtime.yaml``; ``source`` names the file in errors.

    ``source`` is the path as the user gave it (``cfg/team_runtime.yaml``); a setting's error
    reads ``<source> <section>.<key> ...``, exactly the spec's message when ``source`` is the
    bare file name. A key written twice in any mapping is an error too (``strict_yaml``).
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
        check_keys(document, TeamConfig)  # every section's keys, before any value is checked
        return TeamConfig(
            prompt_context=prompt_context_from_block(document.get("prompt_context")),
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
