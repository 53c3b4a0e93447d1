"""The text ``teams-runtime init`` writes into a new ``team_runtime.yaml``."""

from __future__ import annotations

from teams_runtime.codecs.config._backend_section import NatsSettings

__all__ = ["DEFAULT_CONFIG_TEXT", "backend_block_text"]

# What `teams-runtime init` writes. The prompt_context block is exactly the defaults.
DEFAULT_CONFIG_TEXT = """\
# teams-runtime workspace configuration.
# Read once when role services start: restart them after changing it.

# How much of a request's event history goes into each role's prompt.
# Rollback: set `enabled: false` and restart to put the full history back in prompts.
# On a model with a small context window, bound each prompt by tokens too: add
# `max_prompt_tokens: auto` (an openai server's own window) or a number (docs/compaction.md).
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
