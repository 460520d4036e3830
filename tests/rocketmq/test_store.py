"""MessageStore: put/get/query/recovery/retention/read-only/lock, and byte-identity with rebuild."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mqstore import MessageStore, StoreConfig
from mqstore.errors import (
    InvalidArgumentError,
    InvalidKeyError,
    InvalidTopicError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    PropertiesTooLargeError,
    ReadOnlyStoreError,
    StoreLockedError,
    StoreNotFoundError,
)
from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes
from mqstore.storage.rocketmq.verify import verify_store

SMALL = dict(commit_log_file_size=16384, consume_queue_file_size=320, hash_slot_num=100, index_num=50,
             background_services=False)


class Clock:
    def __init__(self, start: int = 1_700_000_000_000, step: int = 7) -> None:
        self.t = start
        self.step = step

    def __call__(self) -> int:
        self.t += self.step
        return self.t


def cfg(**kw) -> StoreConfig:
    values = dict(SMALL)
    values.update(kw)
    values.setdefault("clock", Clock())
    return StoreConfig(**values)


def fill(store: MessageStore, n: int, topics=("TopicA", "TopicB"), start: int = 0) -> list:
    out = []
    for i in range(start, start + n):
        out.append(store.put(topics[i % len(topics)], f"body-{i}".encode() * (1 + i % 5), queue_id=i % 3,
                             keys=[f"key-{i % 17}", f"k{i}"], tags=f"Tag{i % 4}"))
    return out


def test_put_get_roundtrip(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, cfg()) as s:
        res = fill(s, 200)
        assert [r.queue_offset for r in res[:6]] == [0, 0, 0, 0, 0, 0]
        assert res[6].queue_offset == 1
        msgs = s.get("TopicA", 0, 0, 5)
        assert [m.queue_offset for m in msgs] == [0, 1, 2, 3, 4]
        assert all(m.topic == "TopicA" and m.queue_id == 0 for m in msgs)
        m = s.get_by_offset(res[10].commit_log_offset)
        assert m.body == b"body-10"
        assert m.keys == ["key-10", "k10"] and m.tags == "Tag2"
        assert s.get_by_msg_id(res[10].msg_id).commit_log_offset == res[10].commit_log_offset
        total = sum(s.max_offset(t, q) for t in ("TopicA", "TopicB") for q in range(3))
        assert total == 200
        # segments rolled and every full one ends with a blank record
        assert len(s.engine.commit_log.queue.files) > 2


def test_query_by_key_exact_and_window(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, cfg()) as s:
        res = fill(s, 300)
        hits = s.query_by_key("TopicA", "key-3")
        expect = [r for i, r in enumerate(res) if i % 17 == 3 and i % 2 == 0]
        assert sorted(m.commit_log_offset for m in hits) == sorted(r.commit_log_offset for r in expect)
        assert [m.store_timestamp for m in hits] == sorted((m.store_timestamp for m in hits), reverse=True)
        # millisecond window: exactly one message
        one = expect[3]
        got = s.query_by_key("TopicA", "key-3", begin=one.store_timestamp, end=one.store_timestamp)
        assert [m.commit_log_offset for m in got] == [one.commit_log_offset]
        assert len(s.query_by_key("TopicA", "key-3", max_num=2)) == 2
        # unique key lookup
        assert s.query_by_key("TopicA", res[0].uniq_key)[0].commit_log_offset == res[0].commit_log_offset
        # broker semantics: capped, hash matches, newest first
        offs = s.query_offsets_broker("TopicA", "key-3")
        assert offs == sorted(offs, reverse=True)
        assert set(r.commit_log_offset for r in expect) <= set(offs) | set()


def test_no_cap_many_matches(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, cfg(index_num=1000, commit_log_file_size=65536)) as s:
        s.put_batch([dict(topic="T", body=b"x", keys="same") for _ in range(150)])
        assert len(s.query_by_key("T", "same")) == 150
        assert len(s.query_offsets_broker("T", "same")) == 64


def test_offset_for_time(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, cfg(clock=Clock(step=10))) as s:
        res = [s.put("T", b"m", queue_id=0) for _ in range(40)]
        for r in res:
            assert s.offset_for_time("T", 0, r.store_timestamp, "lower") == r.queue_offset
            assert s.offset_for_time("T", 0, r.store_timestamp - 2, "lower") == r.queue_offset
            assert s.offset_for_time("T", 0, r.store_timestamp + 2, "upper") == r.queue_offset
        assert s.offset_for_time("T", 0, res[0].store_timestamp - 20_000) == 0
        assert s.offset_for_time("T", 0, res[-1].store_timestamp + 1, "lower") == 40
        assert s.offset_for_time("T", 1, 0) == 0


def test_live_store_equals_rebuild(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MessageStore.open(store, cfg()) as s:
        fill(s, 400, topics=("A", "B", "C"))
        # transactions: PREPARED/ROLLBACK get no CQ unit, ROLLBACK no index key
        s.put("A", b"prep", keys="tx-1", sys_flag=0x4)
        s.put("A", b"rollback", keys="tx-2", sys_flag=0xC)
        s.put("A", b"commit", keys="tx-3", sys_flag=0x8)
        assert s.query_by_key("A", "tx-1") and not s.query_by_key("A", "tx-2") and s.query_by_key("A", "tx-3")
    out = tmp_path / "rebuilt"
    rebuild_indexes(store, out, config=cfg())
    assert compare_trees(store, out) == []
    assert len(list((store / "index").iterdir())) > 3  # rolled several index files
    assert verify_store(store, cfg()).ok


def test_reopen_keeps_everything(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, cfg()) as s:
        res = fill(s, 120)
    with MessageStore.open(tmp_path, cfg()) as s:
        assert s.recovery.clean_shutdown
        assert s.get_by_offset(res[-1].commit_log_offset).body == f"body-{119}".encode() * (1 + 119 % 5)
        more = fill(s, 30, start=120)
        # message 120 goes to TopicA queue 0, which holds the messages i % 6 == 0 of the first 120
        assert res[-6].queue_offset == 19
        assert more[0].queue_offset == sum(1 for i in range(120) if i % 6 == 0) == 20
        assert len(s.query_by_key("TopicA", "key-0")) == len([i for i in range(150) if i % 17 == 0 and i % 2 == 0])


def test_unclean_shutdown_repairs_index(tmp_path: Path) -> None:
    store = tmp_path / "s"
    s = MessageStore.open(store, cfg())
    fill(s, 200)
    s.engine.dispatch_pending()
    # simulate a crash: nothing flushed or closed, abort file left behind
    s.engine.commit_log.close()
    s.engine._release_lock()
    assert (store / "abort").exists()
    with MessageStore.open(store, cfg()) as s2:
        assert not s2.recovery.clean_shutdown
        assert len(s2.query_by_key("TopicA", "key-5")) == len([i for i in range(200) if i % 17 == 5 and i % 2 == 0])
    out = tmp_path / "rebuilt"
    rebuild_indexes(store, out, config=cfg())
    assert compare_trees(store, out) == []


def test_crash_inside_a_key_batch_does_not_self_link(tmp_path: Path) -> None:
    """A SIGKILL inside a batch of index keys leaves slots naming items the header does not count
    yet.  When that file's end timestamp is not newer than the checkpoint (keys of the same
    millisecond) the broker's rule keeps it, and the next puts linked those items to themselves
    (found by the crash campaign).  Such a file is rebuilt from the CommitLog instead."""
    store = tmp_path / "s"
    s = MessageStore.open(store, cfg())
    fill(s, 200)
    s.engine.dispatch_pending()
    s.flush()  # checkpoint: indexMsgTimestamp = end of the last full file
    cp_ts = s.engine.checkpoint.values.index_msg_timestamp
    last = sorted((store / "index").iterdir())[-1]
    count = int.from_bytes(last.read_bytes()[36:40], "big")
    assert count > 4
    s.engine.commit_log.close()  # crash: nothing closed, abort file left behind
    s.engine._release_lock()
    with open(last, "r+b") as fh:  # the header of a few keys back, slots as the batch left them
        fh.seek(8)
        fh.write(cp_ts.to_bytes(8, "big"))
        fh.seek(36)
        fh.write((count - 3).to_bytes(4, "big"))
    with MessageStore.open(store, cfg()) as s2:
        assert not s2.recovery.clean_shutdown
        assert s2.recovery.index_rebuilt_from is not None
        fill(s2, 60, start=200)
        assert len(s2.query_by_key("TopicA", "key-5")) == len([i for i in range(260) if i % 17 == 5 and i % 2 == 0])
    rep = verify_store(store, cfg())
    assert rep.ok, rep.problems[:5]
    out = tmp_path / "rebuilt"
    rebuild_indexes(store, out, config=cfg())
    assert compare_trees(store, out) == []


def test_torn_tail_is_truncated(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, cfg()) as s:
        res = fill(s, 50)
    last = res[-1]
    seg = sorted((tmp_path / "commitlog").iterdir())[-1]
    pos = last.commit_log_offset - int(seg.name)
    with open(seg, "r+b") as fh:  # zero 16 bytes at the topic length field (RocketMQ's testRecover)
        fh.seek(pos + 84)
        body_len = int.from_bytes(fh.read(4), "big")
        fh.seek(pos + 88 + body_len)
        fh.write(bytes(16))
    topic, qid = "TopicB", 49 % 3
    with MessageStore.open(tmp_path, cfg()) as s:
        assert s.engine.commit_log.max_offset == last.commit_log_offset
        assert s.recovery.truncated_bytes > 0
        with pytest.raises(OffsetOutOfRangeError):
            s.get_by_offset(last.commit_log_offset)
        assert s.max_offset(topic, qid) == last.queue_offset  # CQ max dropped by one
        s.flush()
    assert verify_store(tmp_path, cfg()).ok


def test_retention_deletes_old_segments(tmp_path: Path) -> None:
    clock = Clock()
    with MessageStore.open(tmp_path, cfg(clock=clock, file_reserved_time_hours=1)) as s:
        fill(s, 300)
        segs = sorted((tmp_path / "commitlog").iterdir())
        old = segs[:3]
        for p in old:
            os.utime(p, (1, 1))
        n = s.delete_expired(force=True)
        assert n == 3
        assert s.engine.commit_log.min_offset == int(segs[3].name)
        # queries never return messages of deleted segments
        for m in s.query_by_key("TopicA", "key-1"):
            assert m.commit_log_offset >= s.engine.commit_log.min_offset


def test_lock_and_read_only(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path, cfg()) as s:
        fill(s, 20)
        s.flush()
        with pytest.raises(StoreLockedError):
            MessageStore.open(tmp_path, cfg())
        with MessageStore.open(tmp_path, cfg(), read_only=True) as r:
            assert len(r.get("TopicA", 0, 0, 100)) == len([i for i in range(20) if i % 2 == 0 and i % 3 == 0])
            with pytest.raises(ReadOnlyStoreError):
                r.put("TopicA", b"x")


def test_bad_input(tmp_path: Path) -> None:
    with MessageStore.open(tmp_path / "s", cfg()) as s:
        for bad in ("", "a/b", "..", "../x", "a b", "x\x00y", 5):
            with pytest.raises((InvalidTopicError, InvalidArgumentError)):
                s.put(bad, b"x")  # type: ignore[arg-type]
        with pytest.raises(InvalidKeyError):
            s.put("T", b"x", keys=["a\x01b"])
        with pytest.raises(InvalidKeyError):
            s.put("T", b"x", keys=["two words"])
        with pytest.raises(PropertiesTooLargeError):
            s.put("T", b"x", properties={"p": "v" * 40000})
        with pytest.raises(MessageTooLargeError):
            s.put("T", b"x" * 20000)
        with pytest.raises(InvalidArgumentError):
            s.put("T", "not bytes")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            s.put("T", b"x", queue_id=-1)
        with pytest.raises(OffsetOutOfRangeError):
            s.get_by_offset(10**9)
        assert not (tmp_path / "x").exists()
    with pytest.raises(StoreNotFoundError):
        MessageStore.open(tmp_path / "missing", read_only=True)
    with pytest.raises(InvalidArgumentError):
        StoreConfig(flush_disk_type="sometimes")


def test_sync_flush_and_threads(tmp_path: Path) -> None:
    c = cfg(flush_disk_type="sync", background_services=True, flush_interval_consume_queue_ms=50)
    with MessageStore.open(tmp_path, c) as s:
        res = fill(s, 60)
        assert s.engine.commit_log.flushed_offset >= res[-1].commit_log_offset + res[-1].size
        assert len(s.query_by_key("TopicB", "k59")) == 1


def test_other_process_reads_while_writer_holds_lock(tmp_path: Path) -> None:
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys
        from mqstore import MessageStore, StoreConfig
        from mqstore.errors import StoreLockedError
        cfg = StoreConfig(commit_log_file_size=16384, consume_queue_file_size=320, hash_slot_num=100,
                          index_num=50, background_services=False)
        try:
            MessageStore.open(sys.argv[1], cfg)
            print("NOT LOCKED")
        except StoreLockedError:
            print("locked")
        with MessageStore.open(sys.argv[1], cfg, read_only=True) as r:
            print(len(r.get("TopicA", 0, 0, 1000)), len(r.query_by_key("TopicA", "key-0")))
        """
    )
    with MessageStore.open(tmp_path, cfg()) as s:
        fill(s, 60)
        s.flush()
        out = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        lines = out.stdout.split()
        assert lines[0] == "locked"
        assert int(lines[1]) == len([i for i in range(60) if i % 2 == 0 and i % 3 == 0])
        assert int(lines[2]) == len(s.query_by_key("TopicA", "key-0"))


def test_in_place_rebuild_takes_the_store_lock(tmp_path: Path) -> None:
    """The library's in-place rebuild (not only the CLI) refuses to swap files under a writer."""
    store = tmp_path / "s"
    with MessageStore.open(store, cfg()) as s:
        fill(s, 40)
        with pytest.raises(StoreLockedError):
            rebuild_indexes(store, config=cfg())
        with pytest.raises(StoreLockedError):
            rebuild_indexes(store, store, config=cfg())
        assert rebuild_indexes(store, tmp_path / "out", config=cfg()).messages == 40  # elsewhere: a reader
    assert rebuild_indexes(store, config=cfg()).messages == 40
    assert compare_trees(store, tmp_path / "out") == []
    with MessageStore.open(store, cfg()) as s:  # the rebuild released the lock
        assert len(s.query_by_key("TopicA", "key-0")) == len([i for i in range(40) if i % 17 == 0 and i % 2 == 0])
