"""The file that says a model server, or one model on it, is away
(``.teams_runtime/servers/<key>.json``), written by the worker whose calls found it away and
read by ``status`` in another process.

Content-free: the server's ``base_url`` (config, which holds no credentials: the config refuses
them), the model's name when only that model is away (config too), when it went away, and
which worker (host, process) is waiting for it.
"""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.formats import pretty_json_bytes

__all__ = ["SERVERS_FOLDER", "ServerAway", "decode_server_away", "encode_server_away", "file_key"]

SERVERS_FOLDER = "servers"  # under .teams_runtime/


class ServerAway(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One model server (or one model on it) one worker is waiting for."""

    base_url: str
    # The model whose limits the server reached (a 429 naming it): its roles wait, the
    # server's others do not. None (and not written, so the file of a whole server is as it
    # was): the whole server is away.
    model: str | None = None
    away_since: str  # ISO-8601 with offset
    host: str
    pid: int
    reason: str  # content-free: what the last call that found it away met


_DECODER = msgspec.json.Decoder(ServerAway)


def file_key(base_url: str, host: str, pid: int, model: str | None = None) -> str:
    """The file's name (without ``.json``) for a server (or ``model`` on it) as one worker
    sees it: every worker waiting for a server keeps its own file, so none removes another's."""
    import hashlib  # only a worker waiting for a server names its file: `status` never does

    named = base_url if model is None else f"{base_url}\0{model}"  # no URL holds a NUL
    digest = hashlib.blake2b(named.encode(), digest_size=8).hexdigest()
    return f"{digest}-{hashlib.blake2b(host.encode(), digest_size=4).hexdigest()}-{pid}"


def encode_server_away(record: ServerAway) -> bytes:
    """The record as a 2-space-indented JSON object with a final newline."""
    return pretty_json_bytes(record) + b"\n"


def decode_server_away(data: bytes) -> ServerAway:
    """Decode a file's bytes; raises ``msgspec.DecodeError`` (``ValidationError`` too)."""
    return _DECODER.decode(data)
