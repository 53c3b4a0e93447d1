"""One model call reported while it runs (``--verbose``): content-free, when it starts and
every ``PROGRESS_SECONDS`` until it ends."""

from __future__ import annotations

import anyio

from teams_runtime._logs import logger
from teams_runtime.actors.models._backends import ModelBackend, OpenAIBackend
from teams_runtime.actors.models.tools import ToolSession
from teams_runtime.codecs.model import ModelReply
from teams_runtime.policy.prompts import PromptBundle

__all__ = ["PROGRESS_SECONDS", "complete_reporting"]

PROGRESS_SECONDS = 10.0  # how often a running model call is reported (--verbose)


async def _report_running(bundle: PromptBundle) -> None:
    started = anyio.current_time()
    log = logger.bind(role=bundle.role, request_id=bundle.request_id, purpose=bundle.purpose)
    while True:
        await anyio.sleep(PROGRESS_SECONDS)
        log.debug(
            "model call running: {} for {}, {} s",
            bundle.role,
            bundle.request_id,
            round(anyio.current_time() - started),
        )


async def complete_reporting(
    backend: ModelBackend, bundle: PromptBundle, tools: ToolSession | None = None
) -> ModelReply:
    """One call of ``backend`` (with ``tools``, on the ``openai`` backend: others take none),
    reported at DEBUG (content-free) when it starts and every ``PROGRESS_SECONDS`` while it
    runs. Raises what the backend raises."""
    logger.bind(role=bundle.role, request_id=bundle.request_id, purpose=bundle.purpose).debug(
        "model call started: {} for {} ({})", bundle.role, bundle.request_id, bundle.purpose
    )
    failure: Exception | None = None
    reply: ModelReply | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(_report_running, bundle)
        try:
            if tools is not None and isinstance(backend, OpenAIBackend):
                reply = await backend.complete(bundle, tools)
            else:
                reply = await backend.complete(bundle)
        except Exception as exc:  # raised below, outside the group: itself, not a group
            failure = exc
        finally:
            group.cancel_scope.cancel()
    if failure is not None:
        raise failure
    assert reply is not None
    return reply
