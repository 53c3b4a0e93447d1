"""Messages for a value of the wrong kind, in the house style: the dotted path of the setting,
what it must be, and for a mistyped choice the nearest one (as for a mistyped key).

msgspec says what it expected in its own words (``Expected `str`, got `int` - at `$.env[...]```)
and names no key inside a mapping of user names; here the path is completed from the block
itself (``model.env.A must be text, not a whole number``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

import msgspec

from teams_runtime.codecs.config._setting_checks import CONFIG_FILE_NAME
from teams_runtime.exceptions import ConfigError

__all__ = ["conversion_error", "convert_section", "kind_of", "nearest"]

# msgspec's names of JSON-like types, as a config's reader says them.
_EXPECTED = {
    "str": "must be text",
    "int": "must be a whole number",
    "float": "must be a number",
    "bool": "must be true or false",
    "object": "must be a mapping",
    "array": "must be a list",
}
_FOUND = {
    "str": "text",
    "int": "a whole number",
    "float": "a decimal number",
    "bool": "true or false",
    "null": "empty",
    "object": "a mapping",
    "array": "a list",
}
_WRONG_KIND = re.compile(r"Expected `([a-z]+)(?: \| null)?`, got `([a-z]+)`")
_MISSING = re.compile(r"Object missing required field `([^`]+)`")
_BAD_CHOICE = re.compile(r"Invalid enum value (.+)")
_STEP = re.compile(r"\.([^.\[]+)|\[(\d+|\.\.\.)\]")


def kind_of(value: object) -> str:
    """What ``value`` is, in a config reader's words (``text``, ``a whole number``, ...)."""
    match value:
        case None:
            return _FOUND["null"]
        case bool():
            return _FOUND["bool"]
        case int():
            return _FOUND["int"]
        case float():
            return _FOUND["float"]
        case str():
            return _FOUND["str"]
        case Mapping():
            return _FOUND["object"]
        case list():
            return _FOUND["array"]
    return type(value).__name__


def nearest(written: str, choices: list[str]) -> str | None:
    """The choice ``written`` most likely meant to be, if one is close."""
    import difflib  # only for a wrong value: a config read without one never loads it

    close = difflib.get_close_matches(written, choices, n=1)
    return close[0] if close else None


def _fits(expected: str, value: object) -> bool:
    match expected:
        case "str":
            return isinstance(value, str)
        case "int":
            return type(value) is int
        case "float":
            return type(value) in (int, float)
        case "bool":
            return type(value) is bool
        case "object":
            return isinstance(value, Mapping)
        case "array":
            return isinstance(value, list)
    return True


def _walk(block: object, where: str, expected: str | None) -> tuple[list[str], object]:
    """The keys along msgspec's ``$.a.b[0]`` in ``block``, and the value found there. Where
    msgspec writes ``[...]`` (a key of a mapping it does not name), the key taken is the first
    whose value is not of the ``expected`` kind."""
    keys: list[str] = []
    value: object = block
    for name, index in _STEP.findall(where):
        if name:
            keys.append(name)
            value = value.get(name) if isinstance(value, Mapping) else None
        elif index == "...":
            if not isinstance(value, Mapping):
                break
            wrong = [key for key, item in value.items() if not _fits(expected or "", item)]
            if not wrong:
                break
            from teams_runtime.codecs.config._strict_yaml import written_key  # as in parse

            keys.append(written_key(wrong[0]))
            value = value[wrong[0]]
        else:
            keys[-1:] = [f"{keys[-1]}[{index}]" if keys else f"[{index}]"]
            value = value[int(index)] if isinstance(value, list) else None
    return keys, value


def _choices_at(section: type[msgspec.Struct], keys: list[str]) -> list[str]:
    """The values a ``Literal`` setting at ``keys`` in ``section`` allows ([] if none)."""
    kind: Any = section
    for key in keys:
        structs = [item for item in (kind, *get_args(kind)) if isinstance(item, type)]
        struct = next((item for item in structs if issubclass(item, msgspec.Struct)), None)
        if struct is None:
            return []
        fields = {field.encode_name: field.type for field in msgspec.structs.fields(struct)}
        if key not in fields:
            return []
        kind = fields[key]
    for item in (kind, *get_args(kind)):
        if get_origin(item) is Literal:
            return [str(choice) for choice in get_args(item)]
    return []


def conversion_error(
    exc: msgspec.ValidationError,
    block: Mapping[str, Any],
    name: str,
    section: type[msgspec.Struct],
    doc: str,
) -> ConfigError:
    """The house-style error for msgspec's ``exc``, raised converting ``block`` (the section
    ``name``, a dotted path) into ``section``."""
    message, _, where = str(exc).partition(" - at `")
    key_of = where.startswith("key` in `")  # a key of a mapping is of the wrong kind
    where = where.removeprefix("key` in `").rstrip("`").removeprefix("$")
    wrong_kind = _WRONG_KIND.fullmatch(message)
    keys, value = _walk(block, where, wrong_kind.group(1) if wrong_kind else None)
    path = ".".join([name, *keys])
    start = f"{CONFIG_FILE_NAME} {path}"
    if key_of and wrong_kind:
        return ConfigError(f"{start} has a key that is not text; its keys must be text.")
    if wrong_kind and wrong_kind.group(1) in _EXPECTED:
        found = kind_of(value) if keys else _FOUND.get(wrong_kind.group(2), "another kind")
        hint = " (put it in quotes)" if wrong_kind.group(1) == "str" and found != "empty" else ""
        if wrong_kind.group(1) == "int" and isinstance(value, float) and value.is_integer():
            hint = f" (write {int(value)})"  # `1e3` is a number, but not a whole one
        return ConfigError(f"{start} {_EXPECTED[wrong_kind.group(1)]}, not {found}{hint}.")
    missing = _MISSING.fullmatch(message)
    if missing:
        return ConfigError(f"{start}.{missing.group(1)} must be set; see {doc}.")
    bad_choice = _BAD_CHOICE.fullmatch(message)
    choices = _choices_at(section, keys) if bad_choice else []
    if bad_choice and choices:
        written = str(value)
        close = nearest(written, choices)
        shown = written if len(written) <= 40 else written[:37] + "..."
        guess = f"; did you mean {close}?" if close else "."
        return ConfigError(f"{start} {shown!r} is not one of {', '.join(choices)}{guess}")
    return ConfigError(f"{start}: {message}; see {doc}.")


_SectionT = TypeVar("_SectionT", bound=msgspec.Struct)


def convert_section(
    block: Mapping[str, Any], section: type[_SectionT], name: str, doc: str
) -> _SectionT:
    """``block`` as a ``section``; a bad value is a ``ConfigError`` naming its path (the
    section's own check's, or ``conversion_error``'s)."""
    try:
        return msgspec.convert(block, section)
    except msgspec.ValidationError as exc:
        if isinstance(exc.__cause__, ConfigError):
            raise exc.__cause__ from None
        raise conversion_error(exc, block, name, section, doc) from None
