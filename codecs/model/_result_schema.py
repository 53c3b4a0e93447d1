"""The role-result contract as a JSON schema, generated from the contract's own Structs and
rules (``contract``), so the schema and the validator cannot drift.

``contract_schema`` accepts exactly what ``validate_reply`` accepts (a test checks it on
examples both ways): ``request_id`` and ``role`` fixed to the call's values, ``next_role`` one
of the roles the answering role may hand to, or ``""`` (or null) when it may finish, the
statuses as enums, every typed field typed, the required fields required, and any other key
allowed (the contract keeps unknown keys). With ``output`` (the role's team asks for its
deliverable) the schema names ``output`` too, text or an object: a grammar-constrained server
writes only the keys a schema names.

``generation_schema`` is what a model server is sent to hold its model to the contract. It is
the same schema with one change: "a string with more than whitespace in it" is the regular
expression ``\\S``, which llama.cpp's grammar converter refuses (it takes only patterns
anchored with ``^`` and ``$``, and no ``\\S``), so it is sent as ``minLength: 1``. A model can
then still write a summary of spaces only; the contract rejects it as before.
"""

from __future__ import annotations

from typing import Any, Literal, get_args, get_origin

import msgspec

from teams_runtime.codecs.formats import JsonObject
from teams_runtime.codecs.model._contract import NON_EMPTY, NULLABLE, ReplyKind, contract_fields
from teams_runtime.codecs.model._deliverable import OUTPUT_KEY
from teams_runtime.codecs.roles import DEFAULT_NEXT_ROLES, NextRoles

__all__ = ["SCHEMA_NAMES", "contract_schema", "generation_schema"]

# The `name` a schema is sent under (OpenAI's json_schema wants one: letters, digits, _ and -).
SCHEMA_NAMES: dict[ReplyKind, str] = {
    "task": "role_result",
    "version_control": "version_control_result",
    "research_decision": "research_decision",
}
_JSON_TYPES: dict[type, str] = {str: "string", bool: "boolean", list: "array", dict: "object"}
_NOT_ONLY_WHITESPACE = "\\S"  # Python's and ECMA's \s: what str.strip() strips


def _json_type(annotation: Any) -> str:
    origin = get_origin(annotation)
    return _JSON_TYPES[origin if isinstance(origin, type) else annotation]


def _field_schema(
    field: msgspec.structs.FieldInfo, request_id: str, role: str, next_roles: NextRoles
) -> JsonObject:
    name = field.name
    if name == "request_id":
        return {"type": "string", "const": request_id}
    if name == "role":
        return {"type": "string", "const": role}
    if name == "next_role" and next_roles.finish:  # null reads as "": no next role
        return {"type": ["string", "null"], "enum": [*next_roles.values, None]}
    if name == "next_role":
        return {"type": "string", "enum": list(next_roles.values)}
    if get_origin(field.type) is Literal:
        return {"type": "string", "enum": list(get_args(field.type))}
    kind = _json_type(field.type)
    if name in NON_EMPTY and field.required:
        return {"type": kind, "pattern": _NOT_ONLY_WHITESPACE}
    if name in NULLABLE:
        return {"type": [kind, "null"]}
    return {"type": kind}


def contract_schema(
    kind: ReplyKind,
    *,
    request_id: str,
    role: str,
    next_roles: NextRoles = DEFAULT_NEXT_ROLES,
    output: bool = False,
) -> JsonObject:
    """The JSON schema of an answer of ``kind`` from ``role`` for ``request_id``, whose
    ``next_role`` is one of ``next_roles`` (by default any built-in role, or none); with
    ``output``, naming the role's deliverable."""
    fields = contract_fields(kind)
    properties = {
        field.name: _field_schema(field, request_id, role, next_roles) for field in fields
    }
    if output and kind != "research_decision":
        properties[OUTPUT_KEY] = {"type": ["string", "object"]}
    return {
        "type": "object",
        "properties": properties,
        # A role that may not finish must name its next role (left out, it reads as "").
        "required": [
            field.name
            for field in fields
            if field.required or (field.name == "next_role" and not next_roles.finish)
        ],
    }


def generation_schema(
    kind: ReplyKind,
    *,
    request_id: str,
    role: str,
    next_roles: NextRoles = DEFAULT_NEXT_ROLES,
    output: bool = False,
) -> JsonObject:
    """``contract_schema`` as model servers can take it (see the module's doc)."""
    schema = contract_schema(
        kind, request_id=request_id, role=role, next_roles=next_roles, output=output
    )
    for value in schema["properties"].values():
        if value.pop("pattern", None) is not None:
            value["minLength"] = 1
    return schema
