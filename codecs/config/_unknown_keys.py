"""Refusing a key no section declares, anywhere in ``team_runtime.yaml``, naming the nearest."""

from __future__ import annotations

from collections.abc import Mapping
from types import UnionType
from typing import Union, get_args, get_origin

import msgspec

from teams_runtime.codecs.config._setting_checks import CONFIG_FILE_NAME
from teams_runtime.exceptions import ConfigError

__all__ = ["check_keys"]


def _settings_of(section: type[msgspec.Struct]) -> dict[str, type[msgspec.Struct] | None]:
    """The keys a section accepts, each with its own section type if it is a section too."""
    keys: dict[str, type[msgspec.Struct] | None] = {}
    for field in msgspec.structs.fields(section):
        # A section may be optional (`OpenAIConfig | None`): look inside the union too (not
        # inside a `dict[str, ...]`: its keys are names, checked by the section's own code).
        union = get_origin(field.type) in (Union, UnionType)
        kinds = [field.type, *(get_args(field.type) if union else ())]
        nested = [
            kind for kind in kinds if isinstance(kind, type) and issubclass(kind, msgspec.Struct)
        ]
        keys[field.encode_name] = nested[0] if nested else None
    return keys


def _unknown_key(key: object, path: str, valid: list[str]) -> ConfigError:
    import difflib  # only for a mistake: every command's start-up is spared its import

    from teams_runtime.codecs.config._strict_yaml import written_key  # PyYAML: as in parse

    written = written_key(key)  # `null:` is reported as null, not as Python's None
    dotted = f"{path}.{written}" if path else written
    close = difflib.get_close_matches(written, valid, n=1)
    if close:
        message = f"{dotted} is not a setting; did you mean {close[0]}?"
        return ConfigError(f"{CONFIG_FILE_NAME} {message}")
    where = f"in {path}" if path else "at the top level"
    return ConfigError(
        f"{CONFIG_FILE_NAME} {dotted} is not a setting; the settings {where} are: "
        f"{', '.join(valid)}."
    )


def check_keys(block: object, section: type[msgspec.Struct], path: str = "") -> None:
    """Refuse a key no section declares, anywhere in the file, naming it and the nearest one.

    Walks the section types themselves, so a new setting needs no change here. A block that
    is not a mapping is left to the section's own check ("must be a mapping").
    """
    if not isinstance(block, Mapping):
        return
    settings = _settings_of(section)
    for key, value in block.items():
        if key not in settings:
            raise _unknown_key(key, path, list(settings))
        nested = settings[key]
        if nested is not None:
            check_keys(value, nested, f"{path}.{key}" if path else str(key))
