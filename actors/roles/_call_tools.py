"""The tools of one model call of a role (``model.tools``): the session offered to the
``openai`` backend (the built-in record tools, the role's MCP tools), and its tool calls kept
in the request's attempts folder afterwards."""

from __future__ import annotations

import anyio

from teams_runtime._logs import logger
from teams_runtime.actors.context import ContextHandle
from teams_runtime.actors.models import Toolbox, ToolSession, combined
from teams_runtime.actors.roles._budget import BudgetFacts, PromptBudgeter
from teams_runtime.actors.roles._record_tools import RecordTools
from teams_runtime.codecs.attempt_records import ToolCallsRecord
from teams_runtime.codecs.config import ModelConfig
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.policy.prompts import PromptBundle
from teams_runtime.storage import Workspace
from teams_runtime.storage.attempt_files import save_tool_calls

__all__ = ["call_tools", "keep_tool_calls"]

_KEEP_SECONDS = 5.0  # how long keeping a call's tool calls may hold up a stopping role


def call_tools(
    model: ModelConfig,
    context: ContextHandle,
    bundle: PromptBundle,
    budget: BudgetFacts,
    mcp: Toolbox | None,
    budgeter: PromptBudgeter,
) -> ToolSession | None:
    """The tools one call of ``bundle`` offers; ``None`` when the role's model has none."""
    tools = model.tools
    if model.backend != "openai" or model.openai is None or not tools.enabled:
        return None
    boxes: list[Toolbox] = []
    if tools.read_events:
        room = None
        if budget.max_prompt_tokens is not None:
            room = max(budget.max_prompt_tokens - (budget.prompt_tokens_estimate or 0), 0)
        boxes.append(RecordTools(context, bundle.projection, rate=budgeter.rate(), room=room))
    if mcp is not None:
        boxes.append(mcp)
    return ToolSession(
        combined(boxes),
        max_rounds=tools.max_rounds,
        timeout_seconds=model.openai.timeout_seconds,
    )


async def keep_tool_calls(
    workspace: Workspace, bundle: PromptBundle, call: int, tools: ToolSession | None
) -> None:
    """Save the call's tool calls and results, if it made any, beside its attempts
    (content: a file, never a log line); not being able to is logged, never raised.
    Shielded: a stopping role still keeps them."""
    if tools is None or not tools.calls:
        return
    record = ToolCallsRecord(
        request_id=bundle.request_id,
        role=bundle.role,
        purpose=bundle.purpose,
        call=call,
        rounds=tools.rounds,
        tool_calls=tools.entries,
    )
    with anyio.CancelScope(shield=True), anyio.move_on_after(_KEEP_SECONDS):
        try:
            await anyio.to_thread.run_sync(save_tool_calls, workspace, record)
        except (TeamsRuntimeError, OSError) as exc:
            logger.bind(role=bundle.role, request_id=bundle.request_id).warning(
                "{}: tool calls for request {} not kept: {}", bundle.role, bundle.request_id, exc
            )
