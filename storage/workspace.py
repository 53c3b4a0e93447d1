"""Where a workspace keeps things; the only place that turns request ids and role names into
paths."""

from __future__ import annotations

import errno
from pathlib import Path

import msgspec

from teams_runtime.codecs.config import CONFIG_FILE_NAME, TeamConfig, parse_team_config
from teams_runtime.codecs.request_ids import REQUESTS_FOLDER, check_request_id
from teams_runtime.codecs.roles import check_role_name
from teams_runtime.exceptions import ConfigError
from teams_runtime.storage._config_cache import cached_config, remember_config
from teams_runtime.storage.local_files import NotRegularFile, open_regular

__all__ = ["RecordPaths", "Workspace", "load_team_config"]


# A frozen Struct rather than a dataclass: `dataclasses` and building the class cost `status`'s
# start about 2 ms; a Struct is made in C, and msgspec is loaded by then anyway.
class RecordPaths(msgspec.Struct, frozen=True):
    """The files of one request: the record, its lock file, and its index (a cache)."""

    request_id: str
    record: Path
    runtime: (
        Path  # the workspace's .teams_runtime folder: nothing under it is written through a link
    )
    index_dir: Path

    # The sidecars as properties: a cold read needs only the record, and every path made
    # costs about 2 us, more than the record's own stat.
    @property
    def lock(self) -> Path:
        return self.record.with_name(self.record.name + ".lock")

    @property
    def index(self) -> Path:
        return self.index_dir / f"{self.request_id}.idx"


class Workspace:
    """Paths inside one workspace folder."""

    def __init__(self, root: str | Path) -> None:
        self._root = Path(root)
        # Made once: a record's paths are made per request id, and each folder made costs
        # about as much as a record's stat.
        self._runtime_dir = self._root / ".teams_runtime"
        self._requests_dir = self._root / REQUESTS_FOLDER
        self._index_dir = self._runtime_dir / "index"

    @property
    def root(self) -> Path:
        return self._root

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_FILE_NAME

    @property
    def runtime_dir(self) -> Path:
        return self._runtime_dir

    @property
    def requests_dir(self) -> Path:
        return self._requests_dir

    @property
    def logs_dir(self) -> Path:
        return self.runtime_dir / "logs"

    @property
    def index_dir(self) -> Path:
        return self._index_dir

    @property
    def queue_dir(self) -> Path:
        return self.runtime_dir / "queue"

    @property
    def inbox_dir(self) -> Path:
        """Where the envelopes of people's roles wait for an answer (file storage)."""
        return self.runtime_dir / "inbox"

    @property
    def attempts_dir(self) -> Path:
        return self.runtime_dir / "attempts"

    def attempts_folder(self, request_id: str) -> Path:
        """Where the failed calls and rejected replies of ``request_id`` are kept."""
        return self.attempts_dir / check_request_id(request_id)

    def role_queue(self, role: str) -> Path:
        """The folder of envelopes waiting for ``role`` (only for a name a role may have:
        whether the team has it is the queue's check)."""
        return self.queue_dir / check_role_name(role)

    def role_inbox(self, role: str) -> Path:
        """The folder of ``role``'s waiting answers (only for a name a role may have: whether
        the team has it is the inbox's caller's check)."""
        return self.inbox_dir / check_role_name(role)

    def role_log(self, role: str) -> Path:
        """The text log of ``role`` (only for a name a role may have)."""
        return self.logs_dir / f"{check_role_name(role)}.log"

    def request_path(self, request_id: str) -> Path:
        """The record file of ``request_id``, after checking the id is safe."""
        return self.requests_dir / f"{check_request_id(request_id)}.json"

    def record_paths(self, request_id: str) -> RecordPaths:
        """The record file of ``request_id`` and its lock and index sidecars."""
        request_id = check_request_id(request_id)  # NFC: NFD input names the same files
        return RecordPaths(
            request_id,
            self._requests_dir / f"{request_id}.json",
            self._runtime_dir,
            self._index_dir,
        )

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"


def load_team_config(workspace: str | Path, *, remember: bool = False) -> TeamConfig:
    """Read ``<workspace>/team_runtime.yaml``; a missing or unreadable file is a ``ConfigError``.

    An unchanged file is read back from its checked cache; with ``remember`` a file parsed
    anew is cached for the next reads. Only ``init`` and ``config`` remember: every other
    command leaves the disk as it found it when its input is bad."""
    path = Path(workspace) / CONFIG_FILE_NAME
    try:
        fd = open_regular(path, follow_links=True)  # the user's file: it may be a link
        with open(fd, "rb") as handle:
            text = handle.read().decode("utf-8")
    except NotRegularFile as exc:
        if exc.errno == errno.EISDIR:
            raise ConfigError(
                f"{path}: a folder, not a file; it must be the YAML file (move the folder "
                f"away, then run `teams-runtime init {workspace}` to write a default one)."
            ) from exc
        raise ConfigError(f"{path}: not a regular file; it must be the YAML file.") from exc
    except FileNotFoundError as exc:
        raise ConfigError(
            f"{path}: no such file; run `teams-runtime init {workspace}` to create one."
        ) from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc}).") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc}).") from exc
    # An unchanged file is read back from its checked cache (``_config_cache``): no PyYAML.
    runtime = Workspace(workspace).runtime_dir
    config = cached_config(runtime, text)
    if config is None:
        config = parse_team_config(text, str(path))
        if remember:
            remember_config(runtime, text, config)
    return config
