"""Reading the YAML text of ``team_runtime.yaml``: PyYAML's safe loader, minus what it lets slip.

PyYAML keeps the last of a key written twice and says nothing, so a section written twice
(``prompt_context:`` at the top and again further down) quietly undoes the first one. Here a
key written twice in any mapping is an error naming its dotted path and lines. Merge keys
(``<<: *base``) still work as YAML defines them: a mapping's own keys win over merged ones.
A number written with an exponent but without a dot or the exponent's sign (``1e3``, ``2.5e3``)
is a number, and ``yes``/``no``/``on``/``off`` are text, as YAML 1.2 reads them (YAML 1.1,
which PyYAML follows, reads the first as text and the others as booleans). A value
YAML's rules cannot turn into a number or date (an integer of 5,000 digits, the 45th
of month 13) is an error with its line, not a traceback.

A document is bounded before anything is built from it: nested at most ``MAX_DEPTH`` levels,
and at most ``MAX_VALUES`` values once its aliases are expanded (an alias of an alias of ...,
the "billion laughs", would otherwise grow without bound wherever the values are copied or
walked: a free-keyed section such as ``research_defaults`` or ``model.openai.extra_body``).
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import ConstructorError

__all__ = [
    "MAX_DEPTH",
    "MAX_VALUES",
    "DuplicateKeyError",
    "YamlTooLarge",
    "load_yaml",
    "written_key",
    "yaml_problem",
]

_MERGE_TAG = "tag:yaml.org,2002:merge"
# A team_runtime.yaml is a few levels deep and a few hundred values long; these bounds are far
# above any real one and far below what costs memory or Python's recursion limit.
MAX_DEPTH = 64
MAX_VALUES = 100_000


class DuplicateKeyError(Exception):
    """A key written twice in one mapping: ``key`` is its dotted path, the lines are 1-based."""

    def __init__(self, key: str, first_line: int, line: int) -> None:
        self.key, self.first_line, self.line = key, first_line, line
        where = f"both on line {line}" if line == first_line else f"lines {first_line} and {line}"
        super().__init__(f"{key} is written twice ({where}); write each key once.")


class YamlTooLarge(Exception):
    """A document nested deeper than ``MAX_DEPTH`` or larger than ``MAX_VALUES`` values once
    its aliases are expanded; the message says which, and where."""


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
        _refuse_expansion(node)
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
# Booleans as YAML 1.2 writes them: true and false only. YAML 1.1 (PyYAML's) also reads yes,
# no, on and off as booleans, so `enabled: no` turned compaction off where 1.2 reads text (and
# the check says it is no boolean). The resolvers were copied for this class by the call above.
for _first in "yYnNoO":
    _ConfigLoader.yaml_implicit_resolvers[_first] = [
        (tag, regexp)
        for tag, regexp in _ConfigLoader.yaml_implicit_resolvers.get(_first, [])
        if tag != "tag:yaml.org,2002:bool"
    ]

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


def _refuse_nesting(text: str) -> None:
    """Raise ``YamlTooLarge`` at the first collection nested deeper than ``MAX_DEPTH``. Read
    from the parser's events, which come without recursion: PyYAML's composer recurses once
    per level, and Python's recursion limit would end it in a ``RecursionError`` first."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise YamlTooLarge(
                    f"nested more than {MAX_DEPTH} levels deep (line {line}); a config is a "
                    "few levels deep: write it flatter"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def _refuse_expansion(root: Any) -> None:
    """Raise ``YamlTooLarge`` when the document, its aliases expanded, holds more than
    ``MAX_VALUES`` values or is nested deeper than ``MAX_DEPTH``. Each node is weighed once
    (an alias is the node it names), without recursion."""
    weight: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth) once expanded
    pending: list[tuple[Any, bool]] = [(root, False)]
    while pending:
        node, children_done = pending.pop()
        if id(node) in weight:
            continue
        children = _children(node)
        if not children_done:
            pending.append((node, True))
            pending.extend((child, False) for child in children if id(child) not in weight)
            continue
        values = 1 + sum(weight[id(child)][0] for child in children)
        depth = 1 + max((weight[id(child)][1] for child in children), default=0)
        if values > MAX_VALUES or depth > MAX_DEPTH:
            line = node.start_mark.line + 1
            what = (
                f"more than {MAX_VALUES:,} values"
                if values > MAX_VALUES
                else f"more than {MAX_DEPTH} levels deep"
            )
            raise YamlTooLarge(
                f"its aliases expand to {what} (the value at line {line}); write the values "
                "out, or use fewer aliases"
            )
        weight[id(node)] = (values, depth)


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def load_yaml(text: str) -> Any:
    """The document in ``text``; raises ``yaml.YAMLError``, ``DuplicateKeyError`` or
    ``YamlTooLarge``."""
    _refuse_nesting(text)
    return yaml.load(text, Loader=_ConfigLoader)  # a SafeLoader subclass: safe


def yaml_problem(exc: yaml.YAMLError) -> str:
    """What is wrong, and where: ``<problem> at line L, column C``."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or type(exc).__name__
    if mark is None:
        return str(problem)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
