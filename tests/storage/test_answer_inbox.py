"""The ``AnswerInbox`` protocol, run against both storages through the ``inboxes`` fixture:
one envelope waits once, whoever puts it; a removal is had by one; what another host put is
listed here; what is not a waiting answer is left out and left alone."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest

from teams_runtime.codecs.envelopes import MessageEnvelope
from teams_runtime.codecs.waiting_answers import WaitingAnswer
from teams_runtime.storage import AnswerInbox, FileAnswerInbox, Workspace
from teams_runtime.storage.nats.blocking_faces import blocking_inbox
from teams_runtime.storage.nats.connection import NatsConnection

# A new inbox of the same team each call: another worker, another host.
InboxFactory = Callable[[], AnswerInbox]


def _file_inboxes(root: Path, request: pytest.FixtureRequest) -> InboxFactory:
    return lambda: FileAnswerInbox(Workspace(root))


def _nats_inboxes(root: Path, request: pytest.FixtureRequest) -> InboxFactory:
    settings = request.getfixturevalue("nats_server").settings()  # a team of its own
    connect = request.getfixturevalue("nats_connect")
    # Each inbox on a connection of its own, as two hosts have.
    return lambda: blocking_inbox(connect(settings))


@pytest.fixture(
    params=[pytest.param(_file_inboxes, id="file"), pytest.param(_nats_inboxes, id="nats")]
)
def inboxes(request: pytest.FixtureRequest, tmp_path: Path) -> InboxFactory:
    factory: Callable[[Path, pytest.FixtureRequest], InboxFactory] = request.param
    return factory(tmp_path, request)


def _item(
    request_id: str = "req-1", role: str = "qa", since: float = 100.0, due: float | None = None
) -> WaitingAnswer:
    envelope = MessageEnvelope(
        request_id=request_id,
        sender="developer",
        target=role,
        envelope_id=f"env-{request_id}-{role}",
        scope="check the export",
    )
    return WaitingAnswer(envelope=envelope, since=since, due=due)


def test_an_envelope_waits_once_whoever_puts_it(inboxes: InboxFactory) -> None:
    here, there = inboxes(), inboxes()
    first = _item(since=100.0, due=200.0)
    assert here.put(first) is True
    # Put again (a worker that crashed before it acked its claim; another host): it keeps
    # waiting since when it was first put.
    assert there.put(msgspec.structs.replace(first, since=150.0)) is False
    assert here.items() == [first] and there.items() == [first]
    assert there.counts() == {"qa": 1}


def test_items_are_listed_oldest_first_with_counts_per_role(inboxes: InboxFactory) -> None:
    inbox = inboxes()
    newer = _item("req-2", since=300.0)
    older = _item("req-1", "version_controller", since=100.0)
    assert inbox.put(newer) and inbox.put(older)
    assert inboxes().items() == [older, newer]
    assert inboxes().counts() == {"qa": 1, "version_controller": 1}


def test_a_renewal_replaces_the_item_and_a_removal_is_had_once(inboxes: InboxFactory) -> None:
    inbox = inboxes()
    item = _item(due=200.0)
    inbox.put(item)
    renewed = msgspec.structs.replace(item, due=500.0, renewals=1)
    inboxes().renew(renewed)
    assert inbox.items() == [renewed]
    assert inboxes().remove(item) is True
    assert inbox.remove(item) is False  # gone already: the other one had it
    assert inbox.items() == [] and inbox.counts() == {}


def test_of_many_removing_one_item_at_once_exactly_one_removes_it(inboxes: InboxFactory) -> None:
    item = _item()
    inboxes().put(item)
    removers = [inboxes() for _ in range(4)]
    results: list[bool] = []
    start = threading.Barrier(len(removers))

    def remove(inbox: AnswerInbox) -> None:
        start.wait()
        results.append(inbox.remove(item))

    threads = [threading.Thread(target=remove, args=(inbox,)) for inbox in removers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) == [False, False, False, True]


def test_what_is_not_a_waiting_answer_is_left_out_and_left_alone(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    inbox = FileAnswerInbox(workspace)
    inbox.put(_item())
    folder = workspace.role_inbox("qa")
    broken, misplaced = folder / "0000-req-9.json", folder / "0001-req-8.json"
    broken.write_bytes(b"{not json")
    misplaced.write_bytes(msgspec.json.encode(_item("req-8", "developer")))  # another role's
    assert inbox.items() == [_item()]
    assert broken.read_bytes() == b"{not json" and misplaced.exists()


def test_a_nats_inbox_lists_what_another_host_put(
    nats_server: object, nats_connect: Callable[..., NatsConnection]
) -> None:
    settings = nats_server.settings()  # type: ignore[attr-defined]
    blocking_inbox(nats_connect(settings)).put(_item("req-è.1"))  # any id: keys are tokens
    (item,) = blocking_inbox(nats_connect(settings)).items()
    assert item.request_id == "req-è.1"
    other_team = blocking_inbox(nats_connect(nats_server.settings()))  # type: ignore[attr-defined]
    assert other_team.items() == []
