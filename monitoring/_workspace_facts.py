"""What ``metrics`` reads from the workspaces beside their logs: the rate cards in force (to
price the full-history estimate) and each request's status now (which requests completed)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import TYPE_CHECKING

from teams_runtime.codecs.config import RateCard
from teams_runtime.exceptions import TeamsRuntimeError
from teams_runtime.storage import Workspace, load_team_config
from teams_runtime.storage.opening import blocking_storage

if TYPE_CHECKING:
    from teams_runtime.storage.blocking import BlockingRecordStore

__all__ = ["rate_cards_of", "statuses_of"]


def rate_cards_of(workspaces: Sequence[Workspace]) -> dict[str, RateCard]:
    """The rate cards of the workspaces' configs (the first one's card wins for a key)."""
    cards: dict[str, RateCard] = {}
    for workspace in reversed(workspaces):
        cards.update(load_team_config(workspace.root).telemetry.rate_cards)
    return cards


@contextmanager
def statuses_of(workspaces: Sequence[Workspace]) -> Iterator[Callable[[str], str | None]]:
    """For the ``with`` block: a request's ``status`` now, from the first workspace that has its
    record (``None``: none has it, or it cannot be read). The backends are opened at the first
    question (read through each store's index) and closed with the block."""
    stores: list[BlockingRecordStore] = []
    with ExitStack() as opened:

        def status(request_id: str) -> str | None:
            if not stores:
                for workspace in workspaces:
                    stores.append(opened.enter_context(blocking_storage(workspace)).store)
            for store in stores:
                try:
                    if not store.exists(request_id):
                        continue
                    value = store.read(request_id, tail=1).fields.get("status")
                except (TeamsRuntimeError, OSError):
                    return None
                return value if isinstance(value, str) else None
            return None

        yield status
