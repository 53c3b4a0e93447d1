"""What a NATS record head keeps, and heads written by earlier versions read as they are."""

from __future__ import annotations

import msgspec

from teams_runtime.codecs.record_heads import RecordHead, decode_head, encode_head, key_digest


def test_a_head_comes_back_as_it_was_encoded() -> None:
    head = RecordHead(
        fields=msgspec.Raw(b'{"request_id":"req-1","events":[]}'),
        count=2,
        last_seq=7,
        tip=8,
        tail=[5, 7],
        keys=[(key_digest("env-1"), 2)],
        void=[(8, 8)],
        recent=[("a1", 2)],
    )
    assert decode_head(encode_head(head)) == head


def test_heads_of_earlier_versions_are_read_as_they_are() -> None:
    # Schema 1 kept the append keys themselves; heads of either schema named the append
    # that wrote them (`append`, never read, gone since).
    old = (
        b'{"schema":1,"fields":{"events":[]},"count":1,"last_seq":3,"tip":3,"tail":[3],'
        b'"keys":[["env-1",1]],"append":"0123abcd","recent":[["0123abcd",1]]}'
    )
    head = decode_head(old)
    assert (head.schema, head.keys, head.tail) == (2, [(key_digest("env-1"), 1)], [3])
    assert b'"append"' not in encode_head(head)
