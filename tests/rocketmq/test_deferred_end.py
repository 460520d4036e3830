"""The read-only open that leaves the recovery walk to the first whole-log scan
(``RocketMQStore(defer_valid_end=True)``, ``CommitLog.defer_valid_end``): every reader sees exactly
what the eager open (walk at open, then scan) gives, whatever the damage, and nothing is changed."""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner

from mqstore.api.rocketmq import MessageStore, StoreConfig
from mqstore.cli.main import cli
from mqstore.kernels.rocketmq.framing import record_positions
from mqstore.storage.rocketmq.store import RocketMQStore
from mqstore.storage.rocketmq.verify import verify_store, verify_store_reference

SEG = 16 * 1024
BODY = 88  # where the body of a magic-v1 record with IPv4 hosts starts


def _cfg(check_crc: bool = True) -> StoreConfig:
    return StoreConfig(commit_log_file_size=SEG, consume_queue_file_size=600, hash_slot_num=64, index_num=400,
                       check_crc_on_recover=check_crc)


def _make(root: Path, n: int = 150) -> None:
    with MessageStore.open(root, _cfg()) as s:
        s.put_batch([dict(topic=f"t{i % 3}", queue_id=i % 2, body=bytes([65 + i % 26]) * (40 + i % 90),
                          keys=[f"k{i}"], tags=f"tag{i % 4}") for i in range(n)])


def _segments(root: Path) -> list[Path]:
    return sorted((root / "commitlog").iterdir())


def _positions(seg: Path) -> list[tuple[int, int]]:
    data = seg.read_bytes()
    pos, sizes, _stop, _p = record_positions(data, 0, len(data))
    return list(zip(pos.tolist(), sizes.tolist(), strict=True))


def _patch(seg: Path, at: int, data: bytes) -> None:
    b = bytearray(seg.read_bytes())
    b[at : at + len(data)] = data
    seg.write_bytes(bytes(b))


def _clean(root: Path) -> None:
    pass


def _torn_tail(root: Path) -> None:
    """a record the writer was still copying: its head in place, the rest not"""
    seg = _segments(root)[-1]
    p, n = _positions(seg)[-1]
    head = seg.read_bytes()[p : p + 60]
    _patch(seg, p + n, head)


def _torn_last_record(root: Path) -> None:
    seg = _segments(root)[-1]
    p, n = _positions(seg)[-1]
    _patch(seg, p + n - 6, bytes(6))


def _crc_middle(root: Path) -> None:
    """a body byte flipped in the middle of the last segment (the CRC catches it)"""
    seg = _segments(root)[-1]
    recs = _positions(seg)
    p, _n = recs[len(recs) // 2]
    b = seg.read_bytes()
    _patch(seg, p + BODY + 2, bytes([b[p + BODY + 2] ^ 0xFF]))


def _size_middle(root: Path) -> None:
    """a TOTALSIZE that disagrees with the fields, in the middle of the last segment"""
    seg = _segments(root)[-1]
    recs = _positions(seg)
    p, n = recs[len(recs) // 2]
    _patch(seg, p, (n + 8).to_bytes(4, "big"))


def _magic_first_segment(root: Path) -> None:
    """damage in an older segment (one the walk trusts)"""
    seg = _segments(root)[0]
    p, _n = _positions(seg)[3]
    _patch(seg, p + 4, b"\xde\xad\xbe\xef")


def _crc_first_segment(root: Path) -> None:
    seg = _segments(root)[0]
    p, _n = _positions(seg)[2]
    b = seg.read_bytes()
    _patch(seg, p + BODY + 5, bytes([b[p + BODY + 5] ^ 0x55]))


def _zero_last_segment(root: Path) -> None:
    """the last segment holds no record (all zeros)"""
    seg = _segments(root)[-1]
    seg.write_bytes(bytes(SEG))


def _unclean(root: Path) -> None:
    (root / "abort").write_text("1")
    _torn_tail(root)


DAMAGE: dict[str, Callable[[Path], None]] = {
    "clean": _clean, "torn_tail": _torn_tail, "torn_last_record": _torn_last_record, "crc_middle": _crc_middle,
    "size_middle": _size_middle, "magic_first_segment": _magic_first_segment,
    "crc_first_segment": _crc_first_segment, "zero_last_segment": _zero_last_segment, "unclean": _unclean,
}  # fmt: skip


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _observe(root: Path, cfg: StoreConfig, defer: bool, how: str, scan_kw: dict, batch: int | None) -> tuple:
    """What a reader sees: the batches of a whole-log scan, then the recovery report and positions."""
    st = RocketMQStore(root, cfg, read_only=True, defer_valid_end=defer)
    try:
        cl = st.commit_log
        rec_first = st.recovery if how == "recovery_first" else None
        if batch is None:
            batches = cl.scan(cl.min_offset, cl.max_offset, **scan_kw)
        else:
            batches = cl.scan_bounded(cl.min_offset, cl.max_offset, batch_records=batch, **scan_kw)
        seen = [(b.commit_log_offset.tolist(), b.size.tolist(), b.topic_id.tolist(), b.topics, b.key_hash.tolist(),
                 b.next_offset, b.stop, b.error, b.skipped) for b in batches]
        r = st.recovery
        assert rec_first is None or rec_first == r
        again = [b.commit_log_offset.tolist() for b in cl.scan(cl.min_offset, cl.max_offset, **scan_kw)]
        return (seen, (r.clean_shutdown, r.commit_log_end, r.truncated_bytes, r.redispatched_from,
                       r.index_rebuilt_from, r.error), cl.max_offset, [f.wrote_position for f in cl.queue.files],
                again)
    finally:
        st.close()


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deferred") / "store"
    _make(root)
    assert len(_segments(root)) >= 3
    return root


@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("check_crc", [True, False])
def test_deferred_open_sees_what_the_eager_open_sees(pristine: Path, tmp_path: Path, damage: str,
                                                     check_crc: bool) -> None:
    root = tmp_path / "s"
    shutil.copytree(pristine, root)
    DAMAGE[damage](root)
    before = _digest(root)
    cfg = _cfg(check_crc)
    for scan_kw in ({}, {"check_crc": True, "skip_length_mismatch": False}):
        for batch in (None, 7, 1 << 16):
            for how in ("scan_first", "recovery_first"):
                eager = _observe(root, cfg, False, how, scan_kw, batch)
                assert _observe(root, cfg, True, how, scan_kw, batch) == eager, (scan_kw, batch, how)
    v = verify_store(root, cfg)
    ref = verify_store_reference(root, cfg)
    assert (v.problems, v.messages, v.cq_units, v.index_items) == (ref.problems, ref.messages, ref.cq_units,
                                                                    ref.index_items)
    assert _digest(root) == before  # read-only: nothing changed


def test_deferred_scan_reports_what_only_its_crc_rejects(pristine: Path, tmp_path: Path) -> None:
    """The walk without CRCs (checkCRCOnRecover=false) takes a record whose body CRC is wrong; a
    verify scan reports it and stops there, and the valid end is the walk's (past it)."""
    root = tmp_path / "s"
    shutil.copytree(pristine, root)
    _crc_middle(root)
    cfg = _cfg(False)
    st = RocketMQStore(root, cfg, read_only=True, defer_valid_end=True)
    try:
        cl = st.commit_log
        batches = list(cl.scan(cl.min_offset, cl.max_offset, check_crc=True, skip_length_mismatch=False))
        assert batches[-1].stop == "invalid" and batches[-1].error
        assert st.recovery.commit_log_end > batches[-1].next_offset
    finally:
        st.close()
    rep = verify_store(root, cfg)
    assert any("invalid record" in p for p in rep.problems)
    assert rep.problems == verify_store_reference(root, cfg).problems


def test_deferred_open_of_an_empty_store(tmp_path: Path) -> None:
    root = tmp_path / "s"
    (root / "commitlog").mkdir(parents=True)
    st = RocketMQStore(root, _cfg(), read_only=True, defer_valid_end=True)
    try:
        assert list(st.commit_log.scan(0)) == []
        assert st.recovery.commit_log_end == 0 and st.commit_log.max_offset == 0
    finally:
        st.close()
    assert verify_store(root, _cfg()).ok
    res = CliRunner().invoke(cli, ["rocketmq", "dump", str(root), "--json"])
    assert res.exit_code == 0 and res.output == ""


@pytest.mark.parametrize("damage", ["clean", "torn_tail", "crc_middle", "size_middle"])
def test_dump_json_is_the_records_the_eager_open_reads(pristine: Path, tmp_path: Path, damage: str) -> None:
    root = tmp_path / "s"
    shutil.copytree(pristine, root)
    DAMAGE[damage](root)
    before = _digest(root)
    res = CliRunner().invoke(cli, ["rocketmq", "dump", str(root), "--json"])
    assert res.exit_code == 0, res.output
    offsets = [json.loads(line)["commitLogOffset"] for line in res.stdout.splitlines()]
    with MessageStore.open(root, _cfg(), read_only=True) as s:  # the eager open (walk, then scan)
        cl = s.engine.commit_log
        want = [o for b in cl.scan(cl.min_offset, cl.max_offset) for o in b.commit_log_offset.tolist()]
    assert offsets == want
    # from an offset: the walk is done first, then the scan from there
    mid = want[len(want) // 2]
    res = CliRunner().invoke(cli, ["rocketmq", "dump", str(root), "--json", "--from-offset", str(mid)])
    assert [json.loads(line)["commitLogOffset"] for line in res.stdout.splitlines()] == [o for o in want if o >= mid]
    assert _digest(root) == before
