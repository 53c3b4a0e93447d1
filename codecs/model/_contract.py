"""The strict-JSON contracts of role replies (spec section 6), defined once as Structs.

``RoleResult``, ``VersionControlResult`` and ``ResearchDecision`` are the single source: the
example shape shown in prompts, the validator's checks and defaults, the dry-run replies and
the failure results all derive from their fields. A checked reply is one of them, carried as
such to the record, where ``result_json`` writes it.
"""

from __future__ import annotations

import copy
import functools
from typing import Any, Literal, get_args, get_origin

import msgspec

from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.model._deliverable import (
    EXAMPLES,
    OUTPUT_KEY,
    RESEARCH_EXAMPLES,
    echo_issues,
    output_issues,
)
from teams_runtime.codecs.model._reply_json import ReplyRead, ReplyReading, read_reply
from teams_runtime.codecs.roles import DEFAULT_NEXT_ROLES, NextRoles
from teams_runtime.codecs.statuses import (
    COMMIT_STATUSES,
    RESULT_STATUSES,
    CommitStatus,
    ResultStatus,
)

__all__ = [
    "COMMIT_STATUSES",
    "CONTRACTS",
    "NON_EMPTY",
    "NULLABLE",
    "RESULT_STATUSES",
    "CheckedReply",
    "ContractFailure",
    "ReplyKind",
    "ResearchDecision",
    "RoleResult",
    "Validated",
    "VersionControlResult",
    "contract_fields",
    "contract_shape",
    "defaults_of",
    "reply_json",
    "result_json",
    "validate_reading",
    "validate_reply",
]

ReplyKind = Literal["task", "research_decision", "version_control"]


class RoleResult(msgspec.Struct, kw_only=True):
    """What a role replies for its task (and what its report event carries as payload).

    ``extra`` and ``key_order`` are not the contract's: they keep what an answer's JSON held
    beside it (the keys the contract does not know) and how it laid its keys out, so the
    record holds the answer as given (``result_json``). A result made here has neither."""

    request_id: str
    role: str
    status: ResultStatus
    summary: str
    insights: list[Any] = []
    proposals: JsonObject = {}  # the role's own: any JSON object
    artifacts: list[Any] = []
    next_role: str = ""
    error: str = ""
    extra: JsonObject = {}
    key_order: tuple[str, ...] = ()  # empty: the fields' order, then ``extra``

    @property
    def output(self) -> Any:
        """The role's deliverable (``output``: text or an object), ``None`` when it gave none.

        Kept with the keys the contract does not type (``extra``), so a result without one
        is written as before (``codecs.model._deliverable``)."""
        return self.extra.get(OUTPUT_KEY)


class VersionControlResult(RoleResult, kw_only=True):
    """What the version_controller answers: a role result plus the commit it made."""

    commit_status: CommitStatus
    commit_sha: str = ""
    commit_message: str = ""
    commit_paths: list[Any] = []
    change_detected: bool = False


class ContractFailure(RoleResult, kw_only=True):
    """The result recorded when a role's answers stayed invalid after every repair."""

    contract_issues: list[str] = []


class ResearchDecision(msgspec.Struct, kw_only=True):
    """What the research role replies at the research gate."""

    request_id: str
    role: str
    needed: bool
    subject: str = ""
    research_query: str = ""
    reason_code: str
    summary: str = ""
    next_role: str = ""


CheckedReply = RoleResult | ResearchDecision  # a checked reply: a role result, or a research gate's

CONTRACTS: dict[ReplyKind, type[CheckedReply]] = {
    "task": RoleResult,
    "version_control": VersionControlResult,
    "research_decision": ResearchDecision,
}
# A role result's fields that carry its JSON's layout rather than the contract's values.
_CARRIED = frozenset({"extra", "key_order"})

# How an issue names the JSON type a field must have.
_TYPE_LABELS: dict[type, str] = {
    str: "a string",
    bool: "true or false",
    list: "a list",
    dict: "an object",
}
_LABEL_OVERRIDES = {"artifacts": "a list of paths", "commit_paths": "a list of paths"}
# Checked by name below, with their own messages (not by the generic type check). The JSON
# schema (``result_schema``) reads the same rules from these names, so the two cannot drift.
_SPECIAL = {"request_id", "role", "next_role", "status", "commit_status", "needed"}
# Fields that must hold a string with more than whitespace in it (when the contract has them).
NON_EMPTY = ("summary", "reason_code")
# Fields where null means the default: no error, no next role.
NULLABLE = ("error", "next_role")


@functools.cache
def _fields_of(struct: type[CheckedReply]) -> tuple[msgspec.structs.FieldInfo, ...]:
    """The contract's fields of ``struct``, in order, looked up once: ``msgspec.structs.fields``
    evaluates the class's annotations anew on every call (a few ms per answer otherwise)."""
    return tuple(f for f in msgspec.structs.fields(struct) if f.name not in _CARRIED)


def contract_fields(kind: ReplyKind) -> tuple[msgspec.structs.FieldInfo, ...]:
    """The fields of ``kind``'s contract Struct (without ``RoleResult``'s layout carriers)."""
    return _fields_of(CONTRACTS[kind])


def result_json(result: RoleResult) -> JsonObject:
    """``result`` as the record holds it (its ``result``, its report's payload): the keys as
    its answer laid them out, the unknown ones too; a result made here (a contract failure, a
    research gate's) in its fields' order."""
    values = {field.name: getattr(result, field.name) for field in _fields_of(type(result))}
    values.update(result.extra)
    if not result.key_order:
        return values
    return {key: values[key] for key in result.key_order if key in values} | values


def reply_json(answer: CheckedReply) -> JsonObject:
    """A checked reply as JSON: a role result as ``result_json`` writes it, a research
    decision in its fields' order."""
    if isinstance(answer, RoleResult):
        return result_json(answer)
    return msgspec.structs.asdict(answer)


def _json_type(field: msgspec.structs.FieldInfo) -> type:
    annotation = field.type
    origin = getattr(annotation, "__origin__", None)
    return origin if isinstance(origin, type) else annotation  # list[Any] -> list


def _default(field: msgspec.structs.FieldInfo) -> Any:
    if field.default_factory is not msgspec.NODEFAULT:
        return field.default_factory()
    return copy.deepcopy(field.default)  # a fresh list or dict for every answer


def defaults_of(kind: ReplyKind) -> JsonObject:
    """The values an answer of ``kind`` gets for the optional fields it leaves out."""
    fields = contract_fields(kind)
    return {f.name: _default(f) for f in fields if f.required is False and f.name != "next_role"}


def _next_role_example(next_roles: NextRoles, research: bool) -> str:
    """What the example shape says of ``next_role``: the roles it may name."""
    if research and "planner" in next_roles.roles:
        return "planner"  # the research gate's example names a role, as upstream's does
    roles = ", ".join(next_roles.roles)
    if not next_roles.roles:
        return "empty: this role finishes the request"
    return f"one of {roles}, or empty to finish" if next_roles.finish else f"one of {roles}"


def contract_shape(
    kind: ReplyKind,
    request_id: str,
    role: str,
    next_roles: NextRoles = DEFAULT_NEXT_ROLES,
    *,
    output: bool = False,
) -> JsonObject:
    """An example answer of the right shape, shown to the model in every prompt; its
    ``next_role`` names what ``next_roles`` allows (by default any built-in role); with
    ``output`` (the role's team asks for its deliverable) ``output`` follows ``summary``."""
    research = kind == "research_decision"
    examples = {**EXAMPLES, **(RESEARCH_EXAMPLES if research else {})}
    examples["next_role"] = _next_role_example(next_roles, research)
    shape: JsonObject = {}
    for field in contract_fields(kind):
        if field.name == "request_id":
            shape[field.name] = request_id
        elif field.name == "role":
            shape[field.name] = role
        elif get_origin(field.type) is Literal:
            shape[field.name] = " | ".join(get_args(field.type))
        else:
            shape[field.name] = examples.get(field.name, _default(field))
        if field.name == "summary" and output and not research:
            shape[OUTPUT_KEY] = examples[OUTPUT_KEY]
    return shape


def _checked_by_name(field: msgspec.structs.FieldInfo) -> bool:
    """Whether a field has its own check (and message) rather than the generic type check: a
    required non-empty string (``summary`` of a result) is; an optional one is not."""
    return field.name in _SPECIAL or (field.name in NON_EMPTY and field.required)


def _type_issues(answer: JsonObject, kind: ReplyKind) -> list[str]:
    issues = []
    for field in contract_fields(kind):
        name = field.name
        if _checked_by_name(field) or name not in answer:
            continue
        if name in NULLABLE and answer[name] is None:  # a null error means no error
            continue
        expected = _json_type(field)
        value = answer[name]
        if not isinstance(value, expected) or (expected is not bool and isinstance(value, bool)):
            label = _LABEL_OVERRIDES.get(name, _TYPE_LABELS[expected])
            issues.append(f"`{name}` must be {label}.")
    return issues


def _json_kind(value: object) -> str:
    """What a decoded JSON value is, in JSON's words (the model reads it)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array"


def _non_empty(value: object) -> bool:
    return isinstance(value, str) and bool(value.strip())


def _kind_issues(answer: JsonObject, kind: ReplyKind) -> list[str]:
    issues = []
    if kind == "research_decision":
        needed = answer.get("needed")
        if "needed" not in answer:
            issues.append("`needed` is missing (true or false).")
        elif not isinstance(needed, bool):
            issues.append("`needed` must be true or false.")
        if not _non_empty(answer.get("reason_code")):
            issues.append("`reason_code` must be a non-empty string.")
        return issues
    if answer.get("status") not in RESULT_STATUSES:
        issues.append(f"`status` must be one of: {', '.join(RESULT_STATUSES)}.")
    if not _non_empty(answer.get("summary")):
        issues.append("`summary` is missing or empty.")
    if kind == "version_control" and answer.get("commit_status") not in COMMIT_STATUSES:
        issues.append(f"`commit_status` must be one of: {', '.join(COMMIT_STATUSES)}.")
    return issues + output_issues(answer)


@functools.cache
def _echo_fields(kind: ReplyKind) -> tuple[str, ...]:
    """The fields of ``kind`` whose example is a placeholder an answer must not give back."""
    names = [field.name for field in contract_fields(kind) if field.name in EXAMPLES]
    return (*names, OUTPUT_KEY) if kind != "research_decision" else tuple(names)


class Validated(msgspec.Struct, frozen=True, kw_only=True):
    """A checked reply: the result to record (defaults filled; ``None`` when there are
    issues), every issue, and how the answer's text was read (``None``: it could not be)."""

    answer: CheckedReply | None
    issues: list[str]
    read: ReplyRead | None


def _typed(kind: ReplyKind, filled: JsonObject) -> CheckedReply:
    """A checked reply (``filled``: defaults first, then the answer's keys) as its contract's
    Struct, keeping its layout and the keys the contract does not know."""
    names = {field.name for field in contract_fields(kind)}
    known = {key: value for key, value in filled.items() if key in names}
    if kind == "research_decision":
        return msgspec.convert(known, ResearchDecision)
    extra = {key: value for key, value in filled.items() if key not in names}
    return msgspec.convert({**known, "extra": extra, "key_order": list(filled)}, CONTRACTS[kind])


def _reading_issue(reading: ReplyReading) -> str:
    if reading.too_deep:
        return "The answer is nested too deeply: send one flat JSON object."
    if reading.found > 1:
        return (
            f"The answer holds {reading.found} JSON objects: send exactly one JSON object and "
            "nothing else."
        )
    return "The answer is not valid JSON: send one JSON object and nothing else."


def _next_role_issue(next_roles: NextRoles, role: str) -> str:
    """The issue of a ``next_role`` that is none of ``next_roles``: it names those allowed
    (and, when the role's ``hands_to`` narrows them, that it does)."""
    roles = ", ".join(next_roles.roles)
    if not next_roles.limited:
        return f"`next_role` must be empty or one of: {roles}."
    if not next_roles.roles:
        return f'`next_role` must be "": {role} hands the request to no role (it finishes it).'
    if not next_roles.finish:
        return (
            f"`next_role` must be one of: {roles} ({role} may hand the request only to these, "
            "and may not finish it)."
        )
    return f"`next_role` must be empty or one of: {roles} ({role} may hand only to these)."


def validate_reading(
    reading: ReplyReading,
    *,
    kind: ReplyKind,
    request_id: str,
    role: str,
    next_roles: NextRoles = DEFAULT_NEXT_ROLES,
) -> Validated:
    """Check an answer read by ``read_reply`` against the contract of ``kind``; its
    ``next_role`` must be one of ``next_roles`` (by default any built-in role, or none).

    The answer is ``None`` when there are issues, and the issues are all of them (the repair
    prompt shows the model every one). Issue texts name keys, never echo values. Keys the
    contract does not know are kept.
    """
    if reading.how is None:
        return Validated(answer=None, issues=[_reading_issue(reading)], read=None)
    answer = reading.value
    if not isinstance(answer, dict):
        issue = f"The answer must be a JSON object, not {_json_kind(answer)}."
        return Validated(answer=None, issues=[issue], read=reading.how)
    issues: list[str] = []
    if answer.get("request_id") != request_id:
        issues.append(f'`request_id` must be "{request_id}".')
    if answer.get("role") != role:
        issues.append(f'`role` must be "{role}".')
    next_role = answer.get("next_role")
    next_role = "" if next_role is None else next_role
    if not next_roles.allows(next_role):
        issues.append(_next_role_issue(next_roles, role))
    issues += _kind_issues(answer, kind)
    issues += _type_issues(answer, kind)
    issues += echo_issues(answer, _echo_fields(kind))
    if issues:
        return Validated(answer=None, issues=issues, read=reading.how)
    answer = {key: value for key, value in answer.items() if value is not None or key != "error"}
    filled = {**defaults_of(kind), **answer, "next_role": next_role}
    return Validated(answer=_typed(kind, filled), issues=[], read=reading.how)


def validate_reply(
    text: str,
    *,
    kind: ReplyKind,
    request_id: str,
    role: str,
    next_roles: NextRoles = DEFAULT_NEXT_ROLES,
) -> Validated:
    """Read a model's reply text (``read_reply``: the one JSON object it holds) and check it
    (``validate_reading``)."""
    return validate_reading(
        read_reply(text), kind=kind, request_id=request_id, role=role, next_roles=next_roles
    )
