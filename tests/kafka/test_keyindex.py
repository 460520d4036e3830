"""The Kafka key index (<base>.keyindex): codec, builder, live writes, recovery and exact lookups."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kernel_twins import twins
from mqstore.errors import CorruptIndexError, InvalidArgumentError
from mqstore.formats.kafka.batch import Header, SimpleRecord
from mqstore.formats.kafka.compression import Compression
from mqstore.formats.kafka.keyindex import (
    KeyIndexTrailer,
    decode_header,
    decode_trailer,
    encode_keyindex,
    geometry_for,
    header_hash,
    iter_items,
    key_hash,
    pack_location,
    unpack_location,
)
from mqstore.formats.rocketmq.javahash import java_string_hashcode
from mqstore.storage.kafka.keyindex import (
    KeyEntries,
    KeyIndexReader,
    build_keyindex,
    key_hashes,
    rebuild_keyindex,
    verify_keyindex,
)
from mqstore.storage.kafka.layout import classify_partition_file, segment_files
from mqstore.storage.kafka.log import PartitionLog
from mqstore.storage.kafka.segment import LogConfig

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- codec
def test_key_hash_is_the_indexfile_hash_of_the_text() -> None:
    assert key_hash(b"Aa") == key_hash(b"BB") and key_hash(b"AaBB") == key_hash(b"BBAa")
    assert key_hash(b"order-123") == abs(java_string_hashcode("order-123"))
    assert header_hash("trace", b"abc") == abs(java_string_hashcode("trace#abc"))
    assert key_hash(b"") == 0
    assert key_hash(b"\xff\xfe") == abs(java_string_hashcode("\ufffd\ufffd"))


@given(st.lists(st.binary(max_size=12), max_size=30))
@SETTINGS
def test_key_hash_kernel_equals_scalar(keys: list[bytes]) -> None:
    assert key_hashes(keys).tolist() == [key_hash(k) for k in keys]


def test_location_packing() -> None:
    assert unpack_location(pack_location(7, 4096)) == (7, 4096)
    assert unpack_location(pack_location(2**31 - 1, 2**31 - 1)) == (2**31 - 1, 2**31 - 1)
    with pytest.raises(InvalidArgumentError):
        pack_location(-1, 0)
    with pytest.raises(InvalidArgumentError):
        pack_location(0, 2**31)


_entry = st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
                   st.integers(-(10**6), 10**13))


@given(st.lists(_entry, max_size=60), st.integers(1, 9), st.integers(0, 5),
       st.one_of(st.none(), st.text(min_size=1, max_size=8)))
@SETTINGS
def test_codec_round_trip_and_bulk_builder_equals_reference(entries: list[tuple[int, int, int, int]], slots: int,
                                                            spare: int, name: str | None) -> None:
    ents = [(h, pack_location(r, p), ts) for h, r, p, ts in entries]
    items = len(ents) + 1 + spare
    if items < 2:
        items = 2
    data = encode_keyindex(ents, slots, items, name)
    t = decode_trailer(data)
    assert (t.hash_slot_num, t.index_num, t.header_name) == (slots, items, name)
    h = decode_header(data, t)
    assert h.index_count == len(ents) + 1
    got = list(iter_items(data, t, h))
    assert [(g[0], g[1]) for g in got] == [(e[0], e[1]) for e in ents]
    # each item links to the previous item of its slot
    last: dict[int, int] = {}
    for i, g in enumerate(got, start=1):
        assert g[3] == last.get(g[0] % slots, 0)
        last[g[0] % slots] = i
    # the compiled bulk builder writes the same bytes
    ke = KeyEntries(np.array([e[0] for e in ents], np.int32), np.array([e[1] for e in ents], np.int64),
                    np.array([e[2] for e in ents], np.int64))
    assert build_keyindex(ke, slots=slots, index_num=items, header_name=name) == data


def test_geometry_sized_to_entries() -> None:
    assert geometry_for(0) == (16, 2)
    assert geometry_for(1000) == (1000, 1001)
    assert geometry_for(10, slots=1) == (1, 11)


@pytest.mark.parametrize("damage", ["short", "magic", "size", "version", "counts"])
def test_damaged_trailer_or_header_is_corrupt(damage: str) -> None:
    data = bytearray(encode_keyindex([(5, pack_location(0, 0), 1000)], 4, 3))
    if damage == "short":
        data = data[:30]
    elif damage == "magic":
        data[-1] ^= 0xFF
    elif damage == "size":
        data = data[:10] + data[11:]
    elif damage == "version":
        data[-14] = 9
    else:
        data[36:40] = (99).to_bytes(4, "big")
    with pytest.raises(CorruptIndexError):
        decode_header(data, decode_trailer(data))


def test_trailer_encode_rejects_bad_names() -> None:
    with pytest.raises(InvalidArgumentError):
        KeyIndexTrailer(4, 2, "").encode()
    with pytest.raises(InvalidArgumentError):
        KeyIndexTrailer(4, 2, "x" * 300).encode()


# ----------------------------------------------------------------------------- the batch walk (twins)
@pytest.mark.parametrize("select", twins("rocketmq.select_many"))
def test_batch_walk_over_a_keyindex(select, tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    n = 500
    ke = KeyEntries(rng.integers(0, 40, n).astype(np.int32),
                    (np.arange(n, dtype=np.int64) << 32) | (np.arange(n, dtype=np.int64) * 100),
                    rng.integers(0, 10**6, n).astype(np.int64))
    p = tmp_path / "00000000000000000000.keyindex"
    p.write_bytes(build_keyindex(ke, slots=7))
    with KeyIndexReader(p) as r:
        t = r.parsed.trailer
        hashes = np.arange(0, 45, dtype=np.int32)
        body = np.frombuffer(p.read_bytes(), np.uint8, count=t.body_size)
        from mqstore.kernels.rocketmq.index_build import header_array

        locs, splits = select(body, t.hash_slot_num, t.index_num, header_array(r.parsed.header), hashes,
                              2**31 - 1, -(2**63), 2**63 - 1)
        for i, h in enumerate(hashes.tolist()):
            want = sorted((ke.location[ke.key_hash == h]).tolist(), reverse=True)
            assert locs[splits[i] : splits[i + 1]].tolist() == want


# ----------------------------------------------------------------------------- partition logs
# "Aa"/"BB" and "AaBB"/"BBAa" have equal Java hash codes: true hash collisions, not only shared slots
_KEYS = [b"a", b"b", b"order-1", b"order-2", "ü".encode(), b"\xff", b"", b"Aa", b"BB", b"AaBB", b"BBAa"]


@st.composite
def _appends(draw: st.DrawFn) -> list[list[tuple[bytes | None, int, bytes | None]]]:
    """Batches of records ``(key, timestamp, trace header value)``."""
    rec = st.tuples(st.one_of(st.none(), st.sampled_from(_KEYS)), st.integers(0, 50_000),
                    st.one_of(st.none(), st.sampled_from(_KEYS)))
    return draw(st.lists(st.lists(rec, min_size=1, max_size=6), min_size=1, max_size=25))


def _write(d: Path, appends: list, config: LogConfig, compression: int = Compression.NONE) -> None:
    log = PartitionLog.open(d, config)
    try:
        for batch in appends:
            recs = [SimpleRecord(value=b"x" * 20, key=k, timestamp=ts,
                                 headers=[] if hv is None else [Header("trace", hv), Header("other", b"a")])
                    for k, ts, hv in batch]
            log.append_records(recs, compression=compression)
    finally:
        log.close()


def _records(log: PartitionLog):  # type: ignore[no-untyped-def]  # data batches only (no markers)
    from mqstore.formats.kafka.batch import decode_batch_header

    for seg in log.segments:
        for ref in seg.batches(0):
            if ref.magic == 2 and decode_batch_header(seg.read_bytes(ref.position, 61)).attributes & 0x20:
                continue
            yield from seg.records_of(ref)[0]


def _brute(d: Path, key: bytes, lo: int | None, hi: int | None, header: str | None = None) -> list[int]:
    """The brute-force answer: every record of every data batch compared (control batches, whose
    records carry the marker type as a key, are not records a key lookup finds)."""
    log = PartitionLog.open(d, read_only=True)
    try:
        out = []
        for r in _records(log):
            if (lo is not None and r.timestamp < lo) or (hi is not None and r.timestamp > hi):
                continue
            if header is None:
                ok = r.key is not None and bytes(r.key) == key
            else:
                ok = any(h.key == header and h.value is not None and bytes(h.value) == key for h in r.headers)
            if ok:
                out.append(r.offset)
        return out
    finally:
        log.close()


@given(_appends(), st.integers(1, 3), st.sampled_from([Compression.NONE, Compression.GZIP]),
       st.lists(st.tuples(st.sampled_from([*_KEYS, b"absent", b"zz"]),
                          st.one_of(st.none(), st.integers(0, 50_000)), st.one_of(st.none(), st.integers(0, 50_000))),
                min_size=1, max_size=6))
@SETTINGS
def test_lookups_equal_a_brute_force_scan(appends: list, slots: int, compression: int, queries: list) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "t-0"
        cfg = LogConfig(key_index=True, key_header="trace", key_index_slots=slots, segment_bytes=600)
        _write(d, appends, cfg, compression)
        for mode in ("read_only", "writable"):
            log = PartitionLog.open(d, read_only=True) if mode == "read_only" else PartitionLog.open(d, cfg)
            try:
                keys = [q[0] for q in queries]
                for key, a, b in queries:
                    lo, hi = (a, b) if a is None or b is None or a <= b else (b, a)
                    assert log.offsets_for_key(key, lo, hi) == _brute(d, key, lo, hi)
                    assert log.offsets_for_key(key, lo, hi, header="trace") == _brute(d, key, lo, hi, "trace")
                    _found, stats = log.find_keys([key], lo, hi)
                    assert stats.scanned_segments == []
                assert log.offsets_for_keys(keys) == [_brute(d, k, None, None) for k in keys]
            finally:
                log.close()
        # after a clean close every key index is what a rebuild writes, byte for byte
        for f in segment_files(d, (".log",)):
            kp = f.with_suffix(".keyindex")
            have = kp.read_bytes()
            rebuild_keyindex(f, header_name="trace", slots=slots)
            assert kp.read_bytes() == have
            assert verify_keyindex(kp, f).problem is None


def test_off_by_default_leaves_the_other_files_byte_identical(tmp_path: Path) -> None:
    appends = [[(b"k%d" % (i % 5), 1000 + i, None)] for i in range(200)]
    _write(tmp_path / "plain" / "t-0", appends, LogConfig(segment_bytes=2000))
    _write(tmp_path / "keyed" / "t-0", appends, LogConfig(segment_bytes=2000, key_index=True))
    plain = {p.name: p.read_bytes() for p in (tmp_path / "plain" / "t-0").iterdir()}
    keyed = {p.name: p.read_bytes() for p in (tmp_path / "keyed" / "t-0").iterdir() if p.suffix != ".keyindex"}
    assert not any(n.endswith(".keyindex") for n in plain)
    assert plain == keyed
    assert len([p for p in (tmp_path / "keyed" / "t-0").iterdir() if p.suffix == ".keyindex"]) == len(
        [n for n in plain if n.endswith(".log")])


def test_a_partition_without_key_indexes_is_scanned(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _write(d, [[(b"k%d" % (i % 5), 1000 + i, None)] for i in range(50)], LogConfig(segment_bytes=1500))
    log = PartitionLog.open(d, read_only=True)
    found, stats = log.find_keys(["k1"])
    log.close()
    assert [m.offset for m in found[0]] == list(range(1, 50, 5))
    assert stats.indexed_segments == 0 and len(stats.scanned_segments) > 1


def test_enabling_later_builds_the_missing_indexes(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    _write(d, [[(b"k%d" % (i % 5), 1000 + i, None)] for i in range(50)], LogConfig(segment_bytes=1500))
    log = PartitionLog.open(d, LogConfig(segment_bytes=1500, key_index=True))
    log.append_records([SimpleRecord(b"v", key=b"k1")], timestamp=5000)
    assert log.offsets_for_key("k1") == [*range(1, 50, 5), 50]
    assert log.find_keys(["k1"])[1].scanned_segments == []
    log.close()


def test_retention_and_truncation(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=1500, key_index=True, retention_bytes=3000)
    _write(d, [[(b"k%d" % (i % 5), 1000 + i, None)] for i in range(80)], cfg)
    log = PartitionLog.open(d, cfg)
    n_before = len(log.segments)
    assert log.delete_old_segments(now=2000) > 0
    bases = {s.base_offset for s in log.segments}
    kfiles = {int(p.name.split(".")[0]) for p in d.iterdir() if p.suffix == ".keyindex"}
    assert kfiles <= bases and len(log.segments) < n_before
    start = log.log_start_offset
    log.truncate_to(70)
    assert log.offsets_for_key("k1") == [o for o in range(1, 70, 5) if o >= start]
    log.append_records([SimpleRecord(b"v", key=b"k1")], timestamp=9000)
    assert log.offsets_for_key("k1")[-1] == log.log_end_offset - 1
    log.close()
    for f in segment_files(d, (".log",)):
        assert verify_keyindex(f.with_suffix(".keyindex"), f).problem is None


def test_unclean_shutdown_rebuilds_and_corrupt_index_is_rebuilt_or_reported(tmp_path: Path) -> None:
    d = tmp_path / "t-0"
    cfg = LogConfig(segment_bytes=1500, key_index=True)
    log = PartitionLog.open(d, cfg)
    for i in range(60):
        log.append_records([SimpleRecord(b"v", key=b"k%d" % (i % 4))], timestamp=1000 + i)
    active = log.active_segment.key_index_path
    log.close_handlers()  # a crash: no compaction, no marker
    # damage the active key index: the reopen (unclean) rebuilds it anyway
    with open(active, "r+b") as f:
        f.seek(-1, os.SEEK_END)
        f.write(b"\0")
    log = PartitionLog.open(d, cfg)
    assert log.offsets_for_key("k2") == list(range(2, 60, 4))
    log.close()
    sealed = segment_files(d, (".keyindex",))[0]
    data = bytearray(sealed.read_bytes())
    data[-1] ^= 0xFF
    sealed.write_bytes(bytes(data))
    ro = PartitionLog.open(d, read_only=True)
    with pytest.raises(CorruptIndexError):
        ro.offsets_for_key("k2")
    ro.close()
    log = PartitionLog.open(d, cfg)  # a writable open checks the sealed ones and rebuilds it
    assert log.offsets_for_key("k2") == list(range(2, 60, 4))
    log.close()


def test_keyindex_is_classified() -> None:
    assert classify_partition_file("00000000000000000000.keyindex").kind == "keyindex"
    assert classify_partition_file("00000000000000000000.keyindex.deleted").kind == "deleted"


def test_bad_arguments(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError):
        LogConfig(key_header="x")
    with pytest.raises(InvalidArgumentError):
        LogConfig(key_index=True, key_index_slots=0)
    d = tmp_path / "t-0"
    _write(d, [[(b"k", 1000, None)]], LogConfig(key_index=True))
    log = PartitionLog.open(d, read_only=True)
    with pytest.raises(InvalidArgumentError):
        log.offsets_for_key(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        log.offsets_for_key("k", 10, 5)
    log.close()


# ----------------------------------------------------------------------------- broker data, legacy data
@pytest.mark.parametrize("case", ["single_default", "multi_segment_roll_bytes", "append_groups"])
def test_broker_fixtures_rebuilt_and_queried(tmp_path: Path, case: str) -> None:
    from kafka_support import copy_partition

    d = copy_partition(case, tmp_path)
    for f in segment_files(d, (".log",)):
        rebuild_keyindex(f)
    log = PartitionLog.open(d, read_only=True)
    try:
        keys = sorted({bytes(r.key) for r in _records(log) if r.key is not None})
        assert keys
        keys.append(b"never-a-key")
        found, stats = log.find_keys(keys)
        assert stats.scanned_segments == []
        assert [[m.offset for m in ms] for ms in found] == [_brute(d, k, None, None) for k in keys]
    finally:
        log.close()


def test_legacy_messages_are_checked_by_the_generic_decoder(tmp_path: Path) -> None:
    from mqstore.formats.kafka.batch import encode_legacy_message

    d = tmp_path / "old-0"
    d.mkdir()
    msgs = [encode_legacy_message(i, b"v%d" % i, b"k%d" % (i % 3), magic=1, timestamp=1000 + i) for i in range(30)]
    log_path = d / "00000000000000000000.log"
    log_path.write_bytes(b"".join(msgs))
    res = rebuild_keyindex(log_path)
    assert res.entries == 30
    log = PartitionLog.open(d, read_only=True)
    try:
        assert log.offsets_for_key("k1") == list(range(1, 30, 3))
        assert log.offsets_for_key("k1", 1010, 1020) == [10, 13, 16, 19]
    finally:
        log.close()
