"""The structured, content-free record written for every prompt a role sends.

Schema 2 adds what a call cost and how it went (``model`` .. ``outcome``); a schema-1 line
still reads, those fields ``None``. ``finish_reason`` came later within schema 2: optional, so
a line without it reads (``None``), and a reader that does not know it ignores it (msgspec
skips unknown fields). So did the token budget's three fields (``max_prompt_tokens`` ..
``token_count_method``), which a record without a budget leaves out of its line altogether:
such a line is byte for byte what it was before them, and reads them as ``None``. Schema 3
adds one ``outcome`` value, ``stopped`` (a call cut by the run stopping): a schema-2 reader
does not know it, so the version says a reader may meet it. The tool counts (``tool_rounds``,
``tool_calls``: ``model.tools`` on the ``openai`` backend) came as the budget's fields did:
left out of a line for a call that offered no tools. So did the layout (``layout``, ``step``:
``prompt_context.layout: shared_prefix``): left out of a line of the default layout, which
reads them as ``None`` (``upstream``).
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

from teams_runtime.codecs.config import Layout
from teams_runtime.codecs.model import FinishReason, ReplyRead

# How a prompt's tokens were estimated for its budget (``policy.token_counts``).
TokenCountMethod = Literal["server", "learned", "default"]

__all__ = [
    "ATTEMPT_KINDS",
    "CALL_OUTCOMES",
    "PROMPT_RECORD_SCHEMA",
    "AttemptKind",
    "CallOutcome",
    "PromptRecord",
    "TokenCountMethod",
    "decode_prompt_record",
    "encode_prompt_record",
]

PROMPT_RECORD_SCHEMA = 3

# Why the call was sent: the first call of a prompt, a call sent again after a failed one
# (model.attempts), or the first call of a contract-repair prompt.
AttemptKind = Literal["primary", "retry", "contract_repair"]
ATTEMPT_KINDS: tuple[AttemptKind, ...] = ("primary", "retry", "contract_repair")
# How it ended: an answer the contract took, one it rejected, a failed call, a call given up
# (the run stopped) while its model server was away, or a call cut by the run stopping
# (schema 3; not the model's failure).
CallOutcome = Literal["completed", "invalid", "failed", "server_away", "stopped"]
CALL_OUTCOMES: tuple[CallOutcome, ...] = (
    "completed",
    "invalid",
    "failed",
    "server_away",
    "stopped",
)

# A count or size: what a log line holds beyond this range is not a record we wrote.
Count = Annotated[int, msgspec.Meta(ge=0, le=2**53)]


class PromptRecord(msgspec.Struct, frozen=True, kw_only=True):
    """Counts and sizes of one prompt: never prompt, event, payload or envelope text."""

    schema_version: Count = PROMPT_RECORD_SCHEMA
    timestamp: str  # ISO-8601 with offset
    role: str
    purpose: str  # role_task | contract_repair | research_decision | version_control
    request_id: str
    enabled: bool
    recent_events: Count
    max_events: Count
    total_events: Count
    included_events: Count
    omitted_events: Count
    compacted: bool
    eligible: bool  # total_events > max_events, whatever `enabled` says
    backfilled_roles: list[str]
    prompt_chars: Count
    full_history_chars: Count  # estimated from the omitted events' byte sizes
    # Tokens the model server reported for this call; None when the backend reports none
    # (command, dry run) or the call failed.
    prompt_tokens: Count | None = None
    completion_tokens: Count | None = None
    # How the reply's JSON object was read (``read_reply``): as_is, extracted (from a
    # fence or text around it), repaired (raw control characters in its strings),
    # extracted_repaired; None when there was no answer (the call failed).
    answer_read: ReplyRead | None = None
    # Schema 2. The rate card key of the role's model (``policy.pricing.rate_key``).
    model: str | None = None
    attempt_kind: AttemptKind | None = None
    # From the call's start (as the role sent it, server retries and waits included) to its
    # end, and to the answer's first text (None when the backend cannot tell).
    latency_ms: Annotated[float, msgspec.Meta(ge=0)] | None = None
    first_token_ms: Annotated[float, msgspec.Meta(ge=0)] | None = None
    cached_prompt_tokens: Count | None = None
    # By the model's rate card; None without one (or a token card without reported usage).
    cost_usd: Annotated[float, msgspec.Meta(ge=0)] | None = None
    outcome: CallOutcome | None = None
    # Why the model server said the answer ended (``model_replies.FINISH_REASONS``); None when
    # it did not say (a command, the dry run, a stream without one) or the call failed first.
    finish_reason: FinishReason | None = None
    # The token budget in force for the role's prompt (None: none), the tokens the prompt was
    # estimated to take under it (``prompt_tokens`` stays what the server reported), and how
    # they were counted. Absent from the line when there is no budget.
    max_prompt_tokens: Count | None = None
    prompt_tokens_estimate: Count | None = None
    token_count_method: TokenCountMethod | None = None
    # The rounds of tool calls the call ran and the tool calls in them (None: no tools
    # offered); its tokens and cost then count every request of the call.
    tool_rounds: Count | None = None
    tool_calls: Count | None = None
    # How the prompt was laid out and the step its tail moves by (``prompt_context.layout:
    # shared_prefix``); None (absent from the line): the default layout, ``upstream``.
    layout: Layout | None = None
    step: Count | None = None


_ENCODER = msgspec.json.Encoder()
_DECODER = msgspec.json.Decoder(PromptRecord)
# The budget's fields as a line without a budget ends: cut, so that line stays as it was.
_NO_BUDGET = b',"max_prompt_tokens":null,"prompt_tokens_estimate":null,"token_count_method":null}'
_NO_TOOLS = b',"tool_rounds":null,"tool_calls":null}'
_NO_LAYOUT = b',"layout":null,"step":null}'


def encode_prompt_record(record: PromptRecord) -> str:
    """One JSON line (without the newline); without a budget, without the budget's fields;
    without tools, without their counts; in the default layout, without the layout's."""
    line = _ENCODER.encode(record)
    if line.endswith(_NO_LAYOUT):
        line = line[: -len(_NO_LAYOUT)] + b"}"
    if line.endswith(_NO_TOOLS):
        line = line[: -len(_NO_TOOLS)] + b"}"
    if line.endswith(_NO_BUDGET):
        line = line[: -len(_NO_BUDGET)] + b"}"
    return line.decode()


def decode_prompt_record(line: bytes) -> PromptRecord:
    """Decode one JSON line; raises ``msgspec.DecodeError`` (or ``ValidationError``)."""
    return _DECODER.decode(line)
