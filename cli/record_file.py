"""Reading a record file the user names (``project``/``explain --record``, ``import``)."""

from __future__ import annotations

from pathlib import Path

from teams_runtime.codecs.request_records import RecordFields, decode_record
from teams_runtime.exceptions import RecordError
from teams_runtime.storage.local_files import open_regular

__all__ = ["read_record_file"]


def read_record_file(path: Path) -> tuple[bytes, RecordFields]:
    """The file's bytes and decoded fields. The file is the user's own, so it is read through a
    link; a FIFO or device in its place is refused, never read. Raises ``RecordError``."""
    try:
        fd = open_regular(path.resolve())
        with open(fd, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise RecordError(f"{path}: no such record file.") from None
    except OSError as exc:
        raise RecordError(f"{path}: cannot be read ({exc.strerror or exc}).") from None
    return data, decode_record(data, str(path))
