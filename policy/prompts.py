"""The four model-facing prompts that embed a request record (spec section 6).

Every prompt is built from one ``Projection`` and streamed as text chunks: the fixed sections,
then the notice, then the record JSON with the selected events spliced from their bytes, then
the envelope. ``PromptBundle`` carries the chunks together with the notice and the counts.

The projection's ``config.layout`` says how the prompt is laid out: ``upstream`` as above (the
spec's prompt, byte for byte); ``shared_prefix`` (``policy._shared_prefix``) with what every
role of the request shares first and the role's own part after it. Rendering a prompt without
actors, under either layout (what ``teams-runtime replay`` does)::

    projection = project_fields(record_fields, PromptContextConfig(layout="shared_prefix"))
    text = build_prompt("task", role="qa", projection=projection, envelope=envelope).text()
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field

import msgspec

from teams_runtime.codecs.config import DEFAULT_CAST, Cast, Layout
from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.formats import pretty_json
from teams_runtime.codecs.model import ReplyKind, contract_shape
from teams_runtime.codecs.projection_reply import Projection
from teams_runtime.codecs.prompt_names import KIND_NAMES, PROMPT_KINDS, PURPOSES, PromptKind
from teams_runtime.codecs.request_records import (
    EVENT_SEPARATOR,
    EVENTS_KEY,
    iter_pretty_record,
    pretty_frame_size,
)
from teams_runtime.codecs.roles import DEFAULT_NEXT_ROLES, NextRoles
from teams_runtime.policy._shared_prefix import SharedPrefix
from teams_runtime.policy.projection import notice_text

__all__ = [
    "KIND_NAMES",
    "PROMPT_KINDS",
    "PURPOSES",
    "PromptBundle",
    "PromptKind",
    "PromptSizes",
    "build_prompt",
    "next_roles_of",
    "reply_kind_of",
]

ROLE_TASK_TEMPLATE = """\
You are the {role} role inside teams_runtime.

Answer with strict JSON only: one object, no prose, no code fences, with these keys:
{shape}

Current sprint: {sprint}

Rules:
- Treat `Current request` as the source of truth; the envelope only says why you were called.
- Read the latest `result` and the recent `events` before you decide.
- Set `request_id` to "{request_id}" and `role` to "{role}".
{next_role_rule}

Role rules ({role}):
{role_rules}"""

VERSION_CONTROL_TEMPLATE = (
    ROLE_TASK_TEMPLATE
    + """
- The `version_control` section of the request says what to commit (mode, scope, summary,
  paths); the work role's `result` says what changed."""
)

REPAIR_TEMPLATE = """\
You are the {role} role inside teams_runtime.

Your previous result was rejected by contract validation.

Validation errors:
{errors}

Previous invalid payload:
{previous}

Answer again with strict JSON only: one object, no prose, no code fences, in this shape:
{shape}

Rules:
- Fix every validation error; keep what was right in the previous payload.
- Treat `Current request` as the source of truth.
- Set `request_id` to "{request_id}" and `role` to "{role}"."""

RESEARCH_DECISION_TEMPLATE = """\
You are the {role} role inside teams_runtime.

Research gate: decide whether external research is needed before the team continues.
Answer with strict JSON only: one object, no prose, no code fences, with these keys:
{shape}

Rules:
- Set `needed` to true only when the request cannot be decided from what the team has.
- When `needed` is true, `subject` and `research_query` say exactly what to look up.
- `reason_code` is a short snake_case reason; `next_role` is who acts after the gate.
- Treat `Current request` as the source of truth.

Local sources already checked:
{sources}"""

_PREVIOUS_LIMIT = 4000  # characters of an invalid answer shown back to the model


def next_roles_of(role: str, cast: Cast = DEFAULT_CAST) -> NextRoles:
    """What ``role``'s answers may name as ``next_role``: its ``hands_to`` in ``cast`` (the
    team), else any role of the team, or none."""
    return cast.next_roles(role) if role in cast.roles else NextRoles(roles=cast.names)


def _next_role_rule(next_roles: NextRoles) -> str:
    """The role task's rule on ``next_role``: the roles it may hand to, when its ``hands_to``
    narrows them (the default team's line is unchanged)."""
    if not next_roles.limited:
        return '- Set `next_role` to the role that should act next, or "" when the request is done.'
    roles = ", ".join(next_roles.roles)
    if not next_roles.roles:
        return '- Set `next_role` to "": your result finishes the request.'
    if not next_roles.finish:
        return f"- Set `next_role` to the role that should act next: one of {roles}."
    return (
        f'- Set `next_role` to the role that should act next (one of {roles}), or "" when '
        "the request is done."
    )


# The role task's rule on the deliverable, for a role whose team asks for it (``output``).
_OUTPUT_RULE = (
    "\n- Put your work itself (the draft, the plan, the answer) in `output`, whole; `summary` "
    "only says what you did. The latest `result.output` holds the work so far."
)


def reply_kind_of(kind: PromptKind, repairing: PromptKind | None = None) -> ReplyKind:
    """The contract an answer to a prompt of ``kind`` must meet."""
    target = repairing if kind == "repair" else kind
    if target == "research_decision" or target == "version_control":
        return target
    return "task"


_CURRENT = "Current request:\n"
_ENVELOPE = "\n\nIncoming envelope:\n"


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


@dataclass(frozen=True, slots=True)
class PromptSizes:
    """A prompt's parts in UTF-8 bytes, as ``PromptBundle.iter_chunks`` lays them out: what a
    token budget counts (``policy.budget``). The parts add up to the prompt's size, or a few
    bytes more (a separator counted with every event), never less."""

    brief: int  # the head, and the lines around the record
    record: int  # the record's other fields, its braces and the events' brackets
    envelope: int
    notice: int
    events: tuple[int, ...]  # each selected event, with the separator before it


@dataclass(frozen=True)
class PromptBundle:
    """A prompt as chunks, with the notice and counts that travel with it."""

    role: str
    request_id: str  # the request being worked on (the envelope's), which the answer must name
    kind: PromptKind
    reply_kind: ReplyKind
    projection: Projection
    notice: str
    head: str
    envelope: MessageEnvelope | None
    # What the answer may name as `next_role` (the contract, the schema sent with the prompt).
    next_roles: NextRoles = DEFAULT_NEXT_ROLES
    # The answer's tokens to ask for instead of the model's `max_tokens`: the reserve an `auto`
    # budget leaves when the model sets none (None: as the model says).
    max_tokens: int | None = None
    # Whether the contract names `output` (the role's team asks for its deliverable).
    output: bool = False

    @property
    def answer_kind(self) -> ReplyKind:
        """Deprecated for one release: ``reply_kind`` (what a model sends back is a reply)."""
        warnings.warn(
            "PromptBundle.answer_kind is deprecated: use PromptBundle.reply_kind",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.reply_kind

    _streamed: list[int] = field(default_factory=lambda: [0, 0], repr=False, compare=False)

    @property
    def purpose(self) -> str:
        return PURPOSES[self.kind]

    @property
    def layout(self) -> Layout:
        """How the prompt is laid out: its projection's ``prompt_context.layout``."""
        return self.projection.config.layout

    def _shared(self) -> SharedPrefix:
        return SharedPrefix(self.projection, self.head, self.notice, self.envelope)

    def iter_chunks(self) -> Iterator[str]:
        """The prompt text in order; joined, exactly the prompt."""
        if self.layout == "shared_prefix":
            yield from self._shared().iter_chunks()
            return
        yield self.head + "\n\n"
        if self.notice:
            yield self.notice + "\n\n"
        yield _CURRENT
        for chunk in self.projection.iter_record_json():
            yield chunk.decode("utf-8")
        if self.envelope is not None:
            yield self.envelope_text()
        yield "\n"

    async def chunks(self) -> AsyncIterator[str]:
        """Stream the chunks. Pure text: the consumer's own sends (to a model process or a
        connection) are where other tasks get to run, so none are added here."""
        chars = 0
        for chunk in self.iter_chunks():
            chars += len(chunk)
            yield chunk
        self._streamed[:] = [1, chars]  # streamed to the end: its size is known for free

    def chars(self) -> int:
        """The prompt's size in characters (counted while streaming, else by rendering)."""
        if self._streamed[0]:
            return self._streamed[1]
        return sum(len(chunk) for chunk in self.iter_chunks())

    def text(self) -> str:
        return "".join(self.iter_chunks())

    def with_projection(
        self, projection: Projection, notice: str | None = None, max_tokens: int | None = None
    ) -> PromptBundle:
        """The same prompt built on ``projection`` (the one a token budget left), its notice
        made anew from it (or ``notice``, made from it before), asking for ``max_tokens``
        answer tokens if given."""
        return PromptBundle(
            role=self.role,
            request_id=self.request_id,
            kind=self.kind,
            reply_kind=self.reply_kind,
            projection=projection,
            notice=notice_text(projection) if notice is None else notice,
            head=self.head,
            envelope=self.envelope,
            next_roles=self.next_roles,
            max_tokens=self.max_tokens if max_tokens is None else max_tokens,
            output=self.output,
        )

    def envelope_text(self) -> str:
        """What the prompt shows of the envelope (``""`` when it shows none)."""
        if self.envelope is None:
            return ""
        if self.layout == "shared_prefix":
            return self._shared().envelope
        return _ENVELOPE + pretty_json(self.envelope.prompt_view())

    def brief_text(self) -> str:
        """The text a budget counts as the brief: the head (and, laid out ``shared_prefix``,
        the preamble and the lines around the record's parts)."""
        return self._shared().brief_text() if self.layout == "shared_prefix" else self.head

    def record_frame_text(self) -> str:
        """The record's fields as the prompt lays them out, with an empty events array."""
        if self.layout == "shared_prefix":
            return self._shared().record_frame_text()
        frame = dict(self.projection.fields)
        if EVENTS_KEY in frame and bytes(frame[EVENTS_KEY][:1]) == b"[":
            frame[EVENTS_KEY] = b"[]"
        return b"".join(iter_pretty_record(frame)).decode("utf-8")

    def sizes(self) -> PromptSizes:
        """The prompt's parts in UTF-8 bytes, from the projection's event sizes (no render of
        the events)."""
        projection = self.projection
        separator = len(EVENT_SEPARATOR)
        if self.layout == "shared_prefix":
            brief, record, envelope = self._shared().sizes()
        else:
            brief = _utf8_size(self.head) + 2 + len(_CURRENT) + 1
            record = pretty_frame_size(projection.fields)
            envelope = _utf8_size(self.envelope_text())
        return PromptSizes(
            brief=brief,
            record=record,
            envelope=envelope,
            notice=_utf8_size(self.notice) + 2 if self.notice else 0,
            events=tuple(size + separator for size in projection.event_sizes),
        )


def _bullets(lines: tuple[str, ...] | list[str]) -> str:
    return "\n".join(f"- {line}" for line in lines) if lines else "- none"


def _sprint(projection: Projection) -> str:
    value = projection.value("sprint_id")
    return value if isinstance(value, str) and value else "none"


def _previous(text: str) -> str:
    try:
        return pretty_json(msgspec.json.decode(text.strip().encode()))[:_PREVIOUS_LIMIT]
    except (msgspec.DecodeError, RecursionError):
        return pretty_json(text[:_PREVIOUS_LIMIT])


def _sources(envelope: MessageEnvelope | None) -> str:
    sources = (envelope.params.get("local_sources") if envelope else None) or []
    return _bullets([str(source) for source in sources])


def build_prompt(
    kind: PromptKind,
    *,
    role: str,
    projection: Projection,
    envelope: MessageEnvelope | None,
    repairing: PromptKind | None = None,
    errors: list[str] | None = None,
    previous: str = "",
    cast: Cast = DEFAULT_CAST,
) -> PromptBundle:
    """Build a prompt of ``kind`` for ``role`` of ``cast`` (the team: by default the built-in
    one) from a projection (and the envelope): the role's rules are the cast's, and so are the
    roles its answer may name as ``next_role``.

    A repair prompt names the kind it repairs, the validation errors and the previous answer;
    it carries no envelope.
    """
    reply_kind = reply_kind_of(kind, repairing)
    request_id = envelope.request_id if envelope is not None else projection.request_id
    known = role in cast.roles  # a role outside the team (a direct caller's) has no rules
    next_roles = next_roles_of(role, cast)
    output = cast.asks_output(role) and reply_kind != "research_decision"
    shape = pretty_json(contract_shape(reply_kind, request_id, role, next_roles, output=output))
    values = {
        "role": role,
        "request_id": request_id,
        "shape": shape,
        "sprint": _sprint(projection),
        "role_rules": _bullets(cast.rules_of(role) if known else ()),
        "next_role_rule": _next_role_rule(next_roles) + (_OUTPUT_RULE if output else ""),
    }
    if kind == "task":
        head = ROLE_TASK_TEMPLATE.format(**values)
    elif kind == "version_control":
        head = VERSION_CONTROL_TEMPLATE.format(**values)
    elif kind == "research_decision":
        head = RESEARCH_DECISION_TEMPLATE.format(**values, sources=_sources(envelope))
    else:
        head = REPAIR_TEMPLATE.format(
            **values, errors=_bullets(errors or []), previous=_previous(previous)
        )
        envelope = None
    return PromptBundle(
        role=role,
        request_id=request_id,
        kind=kind,
        reply_kind=reply_kind,
        projection=projection,
        notice=notice_text(projection),
        head=head,
        envelope=envelope,
        next_roles=next_roles,
        output=output,
    )
