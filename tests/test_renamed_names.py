"""Names renamed so that each word names one thing (issue 30): each old public name still
imports for one release, warns naming the new one, and is the new object."""

from __future__ import annotations

import importlib

import pytest

# (module, old name, new name)
RENAMED = [
    ("teams_runtime.codecs.model", "Answer", "CheckedReply"),
    ("teams_runtime.codecs.model", "AnswerKind", "ReplyKind"),
    ("teams_runtime.codecs.model", "AnswerRead", "ReplyRead"),
    ("teams_runtime.codecs.model", "AnswerReading", "ReplyReading"),
    ("teams_runtime.codecs.model", "answer_json", "reply_json"),
    ("teams_runtime.codecs.model", "read_answer", "read_reply"),
    ("teams_runtime.codecs.model", "validate_answer", "validate_reply"),
    ("teams_runtime.codecs.config", "BackendConfig", "StorageConfig"),
    ("teams_runtime.storage", "BackendQueue", "StorageQueue"),
    ("teams_runtime.exceptions", "BackendError", "StorageError"),
    ("teams_runtime", "BackendError", "StorageError"),
]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED)
def test_an_old_name_warns_naming_the_new_one_and_is_it(module: str, old: str, new: str) -> None:
    imported = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=rf"{module}\.{old} is deprecated: use .*\b{new}$"):
        value = getattr(imported, old)
    assert value is getattr(imported, new)


def test_a_name_that_was_never_renamed_is_still_an_attribute_error() -> None:
    model = importlib.import_module("teams_runtime.codecs.model")
    assert not hasattr(model, "NoSuchName")


def test_a_prompt_bundle_s_answer_kind_warns_and_is_its_reply_kind() -> None:
    from teams_runtime.policy.prompts import PromptBundle

    bundle = object.__new__(PromptBundle)
    object.__setattr__(bundle, "reply_kind", "task")
    with pytest.warns(DeprecationWarning, match="use PromptBundle.reply_kind"):
        assert bundle.answer_kind == "task"


def test_the_old_name_of_an_error_still_catches_it() -> None:
    import teams_runtime.exceptions as exceptions

    with pytest.warns(DeprecationWarning):
        old = exceptions.BackendError
    with pytest.raises(old):
        raise exceptions.StorageError("the NATS server is away")
