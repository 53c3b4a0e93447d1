"""Reading the YAML text of ``team_runtime.yaml``: PyYAML's safe loader, minus what it lets slip.

PyYAML keeps the last of a key written twice and says nothing, so a section written twice
(``prompt_context:`` at the top and again further down) quietly undoes the first one. Here a
key written twice in any mapping is an error naming its dotted path and lines. Merge keys
(``<<: *base``) still work as YAML defines them: a mapping's own keys win over merged ones.
A number written with an exponent but without a dot or the exponent's sign (``1e3``, ``2.5e3``)
is a number, as YAML 1.2 reads it (YAML 1.1, which PyYAML follows, reads it as text). A value
YAML's rules cannot turn into a number or date (an integer of 5,000 digits, the 45th
of month 13) is an error with its line, not a traceback.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import ConstructorError

__all__ = ["DuplicateKeyError", "load_yaml", "written_key", "yaml_problem"]

_MERGE_TAG = "tag:yaml.org,2002:merge"


class DuplicateKeyError(Exception):
    """A key written twice in one mapping: ``key`` is its dotted path, the lines are 1-based."""

    def __init__(self, key: str, first_line: int, line: int) -> None:
        self.key, self.first_line, self.line = key, first_line, line
        where = f"both on line {line}" if line == first_line else f"lines {first_line} and {line}"
        super().__init__(f"{key} is written twice ({where}); write each key once.")


def written_key(key: object) -> str:
    """A mapping key as YAML writes it: ``null`` and ``true``, not Python's ``None``, ``True``."""
    if isinstance(key, str):
        return key
    try:
        return yaml.safe_dump(key, default_flow_style=True).removesuffix("\n...\n").strip()
    except yaml.YAMLError:
        return repr(key)


_EXPONENT_FLOAT = re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$")


class _ConfigLoader(yaml.SafeLoader):
    def compose_document(self) -> Any:
        # Checked on the composed tree: constructing a mapping flattens the merge keys of the
        # mappings it merges into them, after which their own keys can no longer be told apart.
        node = super().compose_document()
        _refuse_duplicate_keys(self, node)
        return node

    def construct_object(self, node: Any, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except (ValueError, OverflowError) as exc:  # int("9" * 5000), date(2026, 13, 45)
            too_long = "integer string conversion" in str(exc)
            problem = "a number with too many digits" if too_long else str(exc)
            raise ConstructorError(None, None, problem, node.start_mark) from None


_ConfigLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", _EXPONENT_FLOAT, list("-+0123456789")
)

_UNHASHABLE = object()


def _key_of(loader: _ConfigLoader, key_node: Any) -> object:
    """The key a node stands for, or ``_UNHASHABLE`` when it cannot be compared (a complex
    key is refused by PyYAML itself when the mapping is constructed)."""
    if key_node.tag == _MERGE_TAG:
        return "<<"
    key = loader.construct_object(key_node, deep=True)
    try:
        hash(key)
    except TypeError:
        return _UNHASHABLE
    return key


def _refuse_duplicate_keys(loader: _ConfigLoader, root: Any) -> None:
    """Raise ``DuplicateKeyError`` for the first key written twice, in document order."""
    pending: list[tuple[Any, str]] = [(root, "")]
    visited: set[int] = set()  # an anchored node is checked once, wherever it is used
    while pending:
        node, path = pending.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        children: list[tuple[Any, str]] = []
        if isinstance(node, yaml.MappingNode):
            lines: dict[object, int] = {}
            for key_node, value_node in node.value:
                key = _key_of(loader, key_node)
                line = key_node.start_mark.line + 1
                if key is _UNHASHABLE:
                    continue
                dotted = f"{path}.{written_key(key)}" if path else written_key(key)
                if key in lines:
                    raise DuplicateKeyError(dotted, lines[key], line)
                lines[key] = line
                if key_node.tag != _MERGE_TAG:
                    children.append((value_node, dotted))
                elif isinstance(value_node, yaml.SequenceNode):  # `<<: [*a, *b]`
                    children += [(source, path) for source in value_node.value]
                else:  # what a merge key brings belongs to this mapping: it keeps this path
                    children.append((value_node, path))
        elif isinstance(node, yaml.SequenceNode):
            children = [(item, f"{path}[{number}]") for number, item in enumerate(node.value)]
        pending.extend(reversed(children))


def load_yaml(text: str) -> Any:
    """The document in ``text``; raises ``yaml.YAMLError`` or ``DuplicateKeyError``."""
    return yaml.load(text, Loader=_ConfigLoader)  # a SafeLoader subclass: safe


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong, and where: ``<problem> at line L, column C``."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    if mark is None:
        return str(problem)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
