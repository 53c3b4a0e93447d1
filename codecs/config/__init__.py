"""The shape of ``team_runtime.yaml``: its sections, their checks and the parser of its text.

One module per job: a section each (``prompt_context_section``, ``model_section``,
``openai_section``, ``roles_section``, ``team_section``, ``queue_section``,
``backend_section``), the team's cast (``cast_section`` reads it; ``cast`` is what the
runtime uses), the whole file and its parser (``team_config``), the refusal of unknown keys
(``unknown_keys``), the checks several sections share (``setting_checks``), the YAML reader
(``strict_yaml``) and the text ``init`` writes (``init_text``). Reading the file from a workspace is
``storage.workspace.load_team_config``.
"""

from __future__ import annotations

from typing import Any

from teams_runtime._deprecated import renamed
from teams_runtime.codecs.config._backend_section import BACKEND_KINDS, NatsSettings, StorageConfig
from teams_runtime.codecs.config._cast import DEFAULT_CAST, DEFAULT_CONCURRENCY, Cast
from teams_runtime.codecs.config._init_text import DEFAULT_CONFIG_TEXT, backend_block_text
from teams_runtime.codecs.config._model_choices import INTERNAL_AGENTS, ModelChoice
from teams_runtime.codecs.config._model_section import (
    STRUCTURED_OUTPUT_FORMS,
    DryRunConfig,
    McpServerConfig,
    ModelConfig,
    StructuredOutput,
    ToolsConfig,
)
from teams_runtime.codecs.config._openai_section import RUNTIME_BODY_KEYS, OpenAIConfig
from teams_runtime.codecs.config._prompt_context_section import (
    DEFAULT_STEP,
    LAYOUTS,
    MOST_PROMPT_TOKENS,
    BudgetSource,
    Layout,
    PromptBudget,
    PromptContextConfig,
    RolePromptContext,
)
from teams_runtime.codecs.config._queue_section import QueueConfig
from teams_runtime.codecs.config._roles_section import RoleConfig
from teams_runtime.codecs.config._setting_checks import (
    CONFIG_FILE_NAME,
    EVENT_COUNT_LIMIT,
    event_count_problem,
)
from teams_runtime.codecs.config._team_config import TeamConfig, parse_team_config, section_notes
from teams_runtime.codecs.config._team_section import DEFAULT_REQUESTS_IN_FLIGHT, TeamSection
from teams_runtime.codecs.config._telemetry_section import RateCard, TelemetryConfig

__all__ = [
    "BACKEND_KINDS",
    "CONFIG_FILE_NAME",
    "DEFAULT_CAST",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_CONFIG_TEXT",
    "DEFAULT_REQUESTS_IN_FLIGHT",
    "DEFAULT_STEP",
    "EVENT_COUNT_LIMIT",
    "INTERNAL_AGENTS",
    "LAYOUTS",
    "MOST_PROMPT_TOKENS",
    "RUNTIME_BODY_KEYS",
    "STRUCTURED_OUTPUT_FORMS",
    "BudgetSource",
    "Cast",
    "DryRunConfig",
    "Layout",
    "McpServerConfig",
    "ModelChoice",
    "ModelConfig",
    "NatsSettings",
    "OpenAIConfig",
    "PromptBudget",
    "PromptContextConfig",
    "QueueConfig",
    "RateCard",
    "RoleConfig",
    "RolePromptContext",
    "StorageConfig",
    "StructuredOutput",
    "TeamConfig",
    "TeamSection",
    "TelemetryConfig",
    "ToolsConfig",
    "backend_block_text",
    "event_count_problem",
    "load_yaml",
    "parse_team_config",
    "section_notes",
]


def load_yaml(text: str) -> Any:
    """The document in ``text``, read as ``team_runtime.yaml`` is (``strict_yaml.load_yaml``).

    A function here rather than the name imported, so that importing the package loads no
    PyYAML: reading the config back from its cache never needs it."""
    from teams_runtime.codecs.config._strict_yaml import load_yaml as strict_load

    return strict_load(text)


# Renamed in issue 30 ("backend" is a model backend; where requests are kept is storage): the
# old name still imports, with a DeprecationWarning, for one release.
_RENAMED = {"BackendConfig": "StorageConfig"}


def __getattr__(name: str) -> Any:
    """An old name of this module's (``_RENAMED``), with a ``DeprecationWarning``."""
    return renamed(__name__, name, _RENAMED)
