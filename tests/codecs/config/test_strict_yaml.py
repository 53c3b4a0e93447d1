"""The YAML reader of team_runtime.yaml: PyYAML's safe loader, but a key written twice in any
mapping is an error naming its path and lines, and merge keys still work as YAML defines them."""

from __future__ import annotations

import re

import pytest
import yaml

from teams_runtime import ConfigError
from teams_runtime.codecs.config import parse_team_config
from teams_runtime.codecs.config._strict_yaml import DuplicateKeyError, load_yaml, written_key

MERGES = [
    pytest.param("a: &a {x: 1, y: 2}\nb:\n  <<: *a\n  y: 3\n", id="own-key-wins"),
    pytest.param("a: &a {x: 1}\nc: &c {x: 2, z: 2}\nb:\n  <<: [*a, *c]\n", id="first-merged-wins"),
    # An anchor that merges, defined deeper than a mapping that merges it: the outer mapping
    # is read first and flattens the anchor's merge before the anchor's own place is read.
    pytest.param(
        "a:\n  deep: &d\n    <<: {x: 1}\n    x: 2\nb:\n  <<: *d\nc:\n  <<: [*d, {y: 1}]\n  y: 3\n",
        id="merging-anchor-read-late",
    ),
    pytest.param("a:\n  - &i {k: 1}\n  - <<: *i\n    k: 2\n", id="inside-a-list"),
]


@pytest.mark.parametrize("text", MERGES)
def test_merge_keys_read_as_the_safe_loader_reads_them(text: str) -> None:
    assert load_yaml(text) == yaml.safe_load(text)


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        pytest.param("a: 1\nb: 2\na: 3\n", "a", (1, 3), id="top-level"),
        pytest.param("a:\n  b: {c: 1, c: 2}\n", "a.b.c", (2, 2), id="flow-mapping"),
        pytest.param("a:\n  - x: 1\n  - y: 1\n    y: 2\n", "a[1].y", (3, 4), id="in-a-list"),
        pytest.param("a: {'k': 1, k: 2}\n", "a.k", (1, 1), id="quoted-and-plain"),
        pytest.param("a: {1: x, 0x1: y}\n", "a.1", (1, 1), id="same-number-two-spellings"),
        pytest.param("a: {<<: {x: 1}, <<: {y: 2}}\n", "a.<<", (1, 1), id="merge-key-twice"),
        pytest.param("x: &a {k: 1, k: 2}\ny: *a\n", "x.k", (1, 1), id="in-an-anchor"),
        pytest.param("a:\n  <<: {k: 1, k: 2}\n", "a.k", (2, 2), id="in-what-is-merged"),
        pytest.param("null: 1\n~: 2\n", "null", (1, 2), id="null-spelled-twice-ways"),
    ],
)
def test_a_key_written_twice_is_named_with_its_lines(
    text: str, key: str, lines: tuple[int, int]
) -> None:
    with pytest.raises(DuplicateKeyError) as raised:
        load_yaml(text)
    assert (raised.value.key, raised.value.first_line, raised.value.line) == (key, *lines)


def test_the_first_key_written_twice_in_the_document_is_named() -> None:
    with pytest.raises(DuplicateKeyError, match=r"^a\.b is written twice \(lines 2 and 3\)"):
        load_yaml("a:\n  b: 1\n  b: 2\nc:\n  d: 1\n  d: 2\n")


@pytest.mark.parametrize(
    ("key", "written"),
    [(None, "null"), (True, "true"), (False, "false"), (42, "42"), (1.5, "1.5"), ("k", "k")],
)
def test_keys_are_named_as_yaml_writes_them(key: object, written: str) -> None:
    assert written_key(key) == written


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        pytest.param(f"a: {'9' * 5000}\n", "a number with too many digits", id="long-int"),
        pytest.param("a: 2026-02-30\n", "day is out of range for month", id="no-such-day"),
    ],
)
def test_a_value_yaml_cannot_construct_is_a_yaml_error_with_its_place(
    text: str, problem: str
) -> None:
    with pytest.raises(yaml.YAMLError) as raised:
        load_yaml(text)
    mark = getattr(raised.value, "problem_mark", None)
    assert mark is not None and (mark.line, mark.column) == (0, 3)
    assert re.fullmatch(re.escape(problem), str(getattr(raised.value, "problem", "")))


def _laughs(levels: int, indent: str = "  ") -> str:
    """Aliases of aliases: nine values, each level nine of the level below (9**levels)."""
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 9)}]" for n in range(1, levels + 1)]
    return "".join(f"{indent}{line}\n" for line in lines)


@pytest.mark.parametrize(
    ("section", "indent"),
    [
        pytest.param("research_defaults:\n", "  ", id="research_defaults"),
        pytest.param("model:\n  openai:\n    extra_body:\n", "      ", id="extra_body"),
    ],
)
def test_aliases_that_expand_without_bound_are_refused_before_anything_is_built(
    section: str, indent: str
) -> None:
    # Nine to the eighth values: built, walked or copied, they take gigabytes.
    with pytest.raises(
        ConfigError,
        match=r"^team_runtime\.yaml: its aliases expand to more than 100,000 values \(the value "
        r"at line \d+\); write the values out, or use fewer aliases\.$",
    ):
        parse_team_config(section + _laughs(8, indent), "team_runtime.yaml")


def test_aliases_within_the_bound_still_read() -> None:
    assert len(load_yaml("x:\n" + _laughs(3))["x"]["a3"]) == 9  # 9**4 values: a few hundred


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("a: " + "[" * 500 + "]" * 500 + "\n", id="flow-500"),
        pytest.param(
            "".join("  " * n + f"k{n}:\n" for n in range(300)) + "  " * 300 + "v: 1\n",
            id="block-300",
        ),
        pytest.param(
            "x: &x "
            + "[" * 40
            + "1"
            + "]" * 40
            + "\ny: &y [*x]\nz: [[[[[[[[[[[[[[[[[[[[[[[[[*y]]]]]]]]]]]]]]]]]]]]]]]]]\n",
            id="through-aliases",
        ),
    ],
)
def test_a_document_nested_deeper_than_a_config_is_refused_not_a_recursion_error(
    text: str,
) -> None:
    with pytest.raises(
        ConfigError, match=r"^team_runtime\.yaml: .*(nested|expand to) more than 64 levels deep"
    ):
        parse_team_config(text, "team_runtime.yaml")


@pytest.mark.parametrize("word", ["no", "yes", "off", "on", "No", "YES"])
def test_yes_no_on_off_are_text_as_yaml_1_2_reads_them(word: str) -> None:
    assert load_yaml(f"a: {word}\n") == {"a": word}
    with pytest.raises(
        ConfigError, match=r"^team_runtime\.yaml prompt_context\.enabled must be a boolean\.$"
    ):
        parse_team_config(f"prompt_context:\n  enabled: {word}\n", "team_runtime.yaml")


@pytest.mark.parametrize("word", ["true", "false", "True", "FALSE"])
def test_true_and_false_are_booleans(word: str) -> None:
    assert load_yaml(f"a: {word}\n") == {"a": word.lower() == "true"}
