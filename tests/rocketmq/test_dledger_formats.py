"""DLedger CommitLog codecs (formats/rocketmq/dledger.py): the 48-byte entry header, the 32-byte
index unit, the blank filler and the properties files, with hypothesis round trips."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mqstore.errors import CorruptDataError
from mqstore.formats.rocketmq import dledger as fmt

LONG = st.integers(-(2**63), 2**63 - 1)
INT = st.integers(-(2**31), 2**31 - 1)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(INT, INT, LONG, LONG, LONG, INT, INT, INT, INT)
def test_entry_header_round_trip(magic, size, index, term, pos, channel, chain, crc, blen):
    h = fmt.EntryHeader(magic, size, index, term, pos, channel, chain, crc, blen)
    data = h.encode()
    assert len(data) == fmt.ENTRY_HEADER_SIZE == 48
    assert fmt.EntryHeader.decode(data) == h
    assert fmt.EntryHeader.decode(b"\x00" * 5 + data, 5) == h
    assert fmt.peek_magic(data) == magic


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(INT, LONG, INT, LONG, LONG)
def test_index_unit_round_trip(magic, pos, size, index, term):
    u = fmt.IndexUnit(magic, pos, size, index, term)
    data = u.encode()
    assert len(data) == fmt.INDEX_UNIT_SIZE == 32
    assert fmt.IndexUnit.decode(data) == u
    arr = np.frombuffer(data, dtype=fmt.INDEX_DTYPE)
    assert (int(arr["magic"][0]), int(arr["pos"][0]), int(arr["size"][0]), int(arr["index"][0]),
            int(arr["term"][0])) == (magic, pos, size, index, term)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.integers(0, 2**40), st.integers(0, 2**20), st.integers(0, 2**40), st.binary(max_size=300))
def test_encode_entry_layout(index, term, pos, body):
    data = fmt.encode_entry(index, term, pos, body)
    h = fmt.EntryHeader.decode(data)
    assert data[fmt.ENTRY_HEADER_SIZE:] == body
    assert (h.magic, h.size, h.index, h.term, h.pos, h.body_length) == (1, 48 + len(body), index, term, pos, len(body))
    assert (h.channel, h.chain_crc, h.body_crc) == (0, 0, 0)
    # the field order on disk: magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodyLength
    assert struct.unpack(">iiqqqiiii", data[:48]) == (1, 48 + len(body), index, term, pos, 0, 0, 0, len(body))
    assert h.body_pos == pos + 48
    unit = fmt.IndexUnit.of(h)
    assert unit.encode() == struct.pack(">iqiqq", 1, pos, 48 + len(body), index, term)
    assert h.problem(pos) is None  # an empty body is a legal entry (48 > the 44-byte header)


def test_header_problems():
    good = fmt.EntryHeader(1, 60, 3, 1, 1000, body_length=12)
    assert good.problem(1000) is None
    assert "magic" in fmt.EntryHeader(2, 60, 3, 1, 1000, body_length=12).problem(1000)
    assert "not larger" in fmt.EntryHeader(1, 44, 3, 1, 1000, body_length=-4).problem(1000)
    assert "body length" in fmt.EntryHeader(1, 60, 3, 1, 1000, body_length=11).problem(1000)
    assert "position 1000" in good.problem(1048)
    assert fmt.EntryHeader(-1, 0, 0, 0, 0).is_blank


def test_truncated_decode_is_typed():
    with pytest.raises(CorruptDataError):
        fmt.EntryHeader.decode(b"\x00" * 47)
    with pytest.raises(CorruptDataError):
        fmt.IndexUnit.decode(b"\x00" * 31)
    with pytest.raises(CorruptDataError):
        fmt.EntryHeader.decode(b"\x00" * 60, 20)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.integers(8, 5000))
def test_blank_filler(n):
    b = fmt.encode_blank(n)
    assert len(b) == n
    assert struct.unpack(">ii", b[:8]) == (-1, n)
    assert not any(b[8:])
    assert fmt.peek_magic(b) == fmt.BLANK_MAGIC


def test_blank_too_small():
    with pytest.raises(ValueError):
        fmt.encode_blank(7)


@settings(suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.dictionaries(st.text(alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=1,
                               max_size=12),
                       st.one_of(st.integers(-(2**63), 2**63 - 1).map(str), st.text(alphabet="n0123-", max_size=8)),
                       max_size=5))
def test_properties_round_trip(values):
    assert fmt.parse_properties(fmt.encode_properties(values)) == values


def test_properties_as_java_writes_them():
    data = b"#Sat Nov 28 05:00:00 UTC 2026\ncommittedIndex=41\nendIndex=42\n! comment\n\n"
    assert fmt.parse_properties(data) == {"committedIndex": "41", "endIndex": "42"}
    assert fmt.parse_properties(b"currTerm: 3\nvoteLeader=n0\n") == {"currTerm": "3", "voteLeader": "n0"}


def test_sizes():
    assert fmt.DEFAULT_INDEX_FILE_SIZE == 32 * 5 * 1024 * 1024
    assert fmt.DEFAULT_DATA_FILE_SIZE == 1 << 30
    assert fmt.INDEX_DTYPE.itemsize == 32
