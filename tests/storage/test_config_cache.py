"""The checked cache of the parsed team_runtime.yaml: used only for the same text and code."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from teams_runtime.codecs.config import DEFAULT_CONFIG_TEXT, parse_team_config
from teams_runtime.exceptions import ConfigError
from teams_runtime.storage import load_team_config
from teams_runtime.storage import workspace as workspace_module
from teams_runtime.storage._config_cache import CACHE_NAME


def _workspace(tmp_path: Path, text: str = DEFAULT_CONFIG_TEXT) -> Path:
    (tmp_path / ".teams_runtime").mkdir()
    (tmp_path / "team_runtime.yaml").write_text(text)
    return tmp_path


def _no_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(text: str, source: str) -> None:
        raise AssertionError("parsed although the cache matched")

    monkeypatch.setattr(workspace_module, "parse_team_config", refuse)


def test_an_unchanged_file_is_read_back_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _workspace(tmp_path)
    first = load_team_config(root)
    assert first == parse_team_config(DEFAULT_CONFIG_TEXT, "team_runtime.yaml")
    assert (root / ".teams_runtime" / CACHE_NAME).is_file()
    _no_parse(monkeypatch)
    again = load_team_config(root)
    assert again == first
    assert msgspec.json.encode(again) == msgspec.json.encode(first)  # the cast's order too


def test_a_changed_file_is_parsed_again(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    load_team_config(root)
    text = DEFAULT_CONFIG_TEXT.replace("recent_events: 8", "recent_events: 5")
    assert text != DEFAULT_CONFIG_TEXT
    (root / "team_runtime.yaml").write_text(text)
    assert load_team_config(root).prompt_context.recent_events == 5


def test_an_error_is_never_cached(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    load_team_config(root)
    (root / "team_runtime.yaml").write_text("prompt_context: [\n")
    for _ in range(2):
        with pytest.raises(ConfigError, match="not valid YAML"):
            load_team_config(root)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda data: b"not json", id="not-json"),
        pytest.param(lambda data: data[: len(data) // 2], id="cut-short"),
        pytest.param(lambda data: data.replace(b"recent_events", b"recent_evants"), id="edited"),
        pytest.param(
            lambda data: data.replace(b'"code":[[', b'"code":[["/gone",0,0],['), id="code-gone"
        ),
    ],
)
def test_a_damaged_or_stale_cache_is_parsed_over_and_rewritten(
    tmp_path: Path, damage: object
) -> None:
    root = _workspace(tmp_path)
    expected = load_team_config(root)
    cache = root / ".teams_runtime" / CACHE_NAME
    good = cache.read_bytes()
    cache.write_bytes(damage(good))  # type: ignore[operator]
    assert load_team_config(root) == expected
    assert cache.read_bytes() == good


def test_a_changed_parser_module_makes_the_cache_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _workspace(tmp_path)
    load_team_config(root)
    cache = root / ".teams_runtime" / CACHE_NAME
    document = msgspec.json.decode(cache.read_bytes())
    path, mtime, size = document["code"][0]
    document["code"][0] = [path, mtime - 1, size]  # as if the module was edited since
    cache.write_bytes(msgspec.json.encode(document))
    calls: list[str] = []
    real = workspace_module.parse_team_config

    def counted(text: str, source: str) -> object:
        calls.append(source)
        return real(text, source)

    monkeypatch.setattr(workspace_module, "parse_team_config", counted)
    load_team_config(root)
    assert len(calls) == 1


def test_a_workspace_without_its_runtime_folder_gets_none(tmp_path: Path) -> None:
    (tmp_path / "team_runtime.yaml").write_text(DEFAULT_CONFIG_TEXT)
    load_team_config(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["team_runtime.yaml"]
