"""What crosses the boundary to a model: the role-result contract and its JSON schema, the OpenAI
wire, a model's reply and its JSON."""

from __future__ import annotations

from teams_runtime.codecs.model._api_keys import KeyScrubber, header_safe
from teams_runtime.codecs.model._contract import (
    Answer,
    AnswerKind,
    ContractFailure,
    ResearchDecision,
    RoleResult,
    Validated,
    VersionControlResult,
    answer_json,
    contract_shape,
    result_json,
    validate_answer,
    validate_reading,
)
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
from teams_runtime.codecs.model._reply_json import AnswerRead, AnswerReading, read_answer
from teams_runtime.codecs.model._result_schema import SCHEMA_NAMES, generation_schema

__all__ = [
    "DONE",
    "REQUEST_TAIL",
    "SCHEMA_NAMES",
    "Answer",
    "AnswerKind",
    "AnswerRead",
    "AnswerReading",
    "ContractFailure",
    "EventStreamDecoder",
    "EventTooLong",
    "FinishReason",
    "KeyScrubber",
    "ModelReply",
    "ResearchDecision",
    "ResponseFormat",
    "RoleResult",
    "TokenUsage",
    "Validated",
    "VersionControlResult",
    "answer_json",
    "contract_shape",
    "decode_chunk",
    "event_line_limit",
    "finish_reason_of",
    "forms_to_try",
    "generation_schema",
    "header_safe",
    "json_string_fragment",
    "names_context_limit",
    "names_response_format",
    "read_answer",
    "request_fields",
    "request_head",
    "response_format",
    "result_json",
    "retry_after_seconds",
    "validate_answer",
    "validate_reading",
]
