"""What crosses the boundary to a model: the role-result contract and its JSON schema, the OpenAI
wire, a model's reply and its JSON."""

from __future__ import annotations

from typing import Any

from teams_runtime._deprecated import renamed
from teams_runtime.codecs.model._api_keys import KeyScrubber, header_safe
from teams_runtime.codecs.model._contract import (
    CheckedReply,
    ContractFailure,
    ReplyKind,
    ResearchDecision,
    RoleResult,
    Validated,
    VersionControlResult,
    contract_shape,
    reply_json,
    result_json,
    validate_reading,
    validate_reply,
)
from teams_runtime.codecs.model._deliverable import MAX_OUTPUT_BYTES, OUTPUT_KEY, has_output
from teams_runtime.codecs.model._openai_wire import (
    DONE,
    REQUEST_TAIL,
    EventStreamDecoder,
    EventTooLong,
    ResponseFormat,
    decode_chunk,
    event_line_limit,
    forms_to_try,
    json_string_fragment,
    names_context_limit,
    names_response_format,
    request_fields,
    request_head,
    response_format,
    retry_after_seconds,
)
from teams_runtime.codecs.model._replies import (
    FinishReason,
    ModelReply,
    TokenUsage,
    finish_reason_of,
)
from teams_runtime.codecs.model._reply_json import ReplyRead, ReplyReading, read_reply
from teams_runtime.codecs.model._result_schema import SCHEMA_NAMES, generation_schema
from teams_runtime.codecs.model._tool_wire import (
    ToolCall,
    ToolCallDelta,
    ToolCallParts,
    assistant_message,
    names_tools,
    request_tail,
    tool_message,
    tool_spec,
)

__all__ = [
    "DONE",
    "MAX_OUTPUT_BYTES",
    "OUTPUT_KEY",
    "REQUEST_TAIL",
    "SCHEMA_NAMES",
    "CheckedReply",
    "ContractFailure",
    "EventStreamDecoder",
    "EventTooLong",
    "FinishReason",
    "KeyScrubber",
    "ModelReply",
    "ReplyKind",
    "ReplyRead",
    "ReplyReading",
    "ResearchDecision",
    "ResponseFormat",
    "RoleResult",
    "TokenUsage",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallParts",
    "Validated",
    "VersionControlResult",
    "assistant_message",
    "contract_shape",
    "decode_chunk",
    "event_line_limit",
    "finish_reason_of",
    "forms_to_try",
    "generation_schema",
    "has_output",
    "header_safe",
    "json_string_fragment",
    "names_context_limit",
    "names_response_format",
    "names_tools",
    "read_reply",
    "reply_json",
    "request_fields",
    "request_head",
    "request_tail",
    "response_format",
    "result_json",
    "retry_after_seconds",
    "tool_message",
    "tool_spec",
    "validate_reading",
    "validate_reply",
]

# Renamed in issue 30 ("answer" is a person's result; what a model sends back is a reply):
# the old names still import, with a DeprecationWarning, for one release.
_RENAMED = {
    "Answer": "CheckedReply",
    "AnswerKind": "ReplyKind",
    "AnswerRead": "ReplyRead",
    "AnswerReading": "ReplyReading",
    "answer_json": "reply_json",
    "read_answer": "read_reply",
    "validate_answer": "validate_reply",
}


def __getattr__(name: str) -> Any:
    """An old name of this module's (``_RENAMED``), with a ``DeprecationWarning``."""
    return renamed(__name__, name, _RENAMED)
