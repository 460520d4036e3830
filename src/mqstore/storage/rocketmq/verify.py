"""``verify``: check a RocketMQ store's files against each other without changing them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mqstore.errors import MqStoreError
from mqstore.formats.rocketmq.consumequeue import CQ_DTYPE, CQ_UNIT_SIZE, INT_MAX
from mqstore.formats.rocketmq.consumequeue_ext import MAX_ADDR, undecorate
from mqstore.formats.rocketmq.indexfile import time_diff_seconds
from mqstore.kernels.rocketmq.scan import STOP_INVALID
from mqstore.storage.rocketmq.config_files import list_config_files
from mqstore.storage.rocketmq.dledger import DLedgerCommitLog
from mqstore.storage.rocketmq.store import RocketMQStore


@dataclass(slots=True)
class VerifyReport:
    messages: int = 0
    cq_units: int = 0
    ext_units: int = 0
    index_items: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(slots=True)
class _Records:
    """What the CommitLog says of its records, as columns sorted by offset."""

    starts: np.ndarray  # int64
    sizes: np.ndarray  # int64
    topic_id: np.ndarray  # int64, index into ``topics``
    queue_id: np.ndarray  # int64
    queue_offset: np.ndarray  # int64
    tags_code: np.ndarray  # int64
    store_ts: np.ndarray  # int64
    topics: dict[str, int]
    pair_keys: np.ndarray  # sorted ``record index << 32 | key hash`` of every (record, IndexFile key)
    has_keys: np.ndarray  # bool per record: at least one key

    n: int  # records; every column has one more row, a sentinel that matches nothing

    def find(self, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index of the record starting at each offset — the sentinel row where none does —,
        whether there is one)."""
        i = np.minimum(np.searchsorted(self.starts[:self.n], offsets), self.n)
        ok = (i < self.n) & (self.starts[i] == offsets)
        return i, ok


def _pair_key(rec: np.ndarray, key_hash: np.ndarray) -> np.ndarray:
    return (rec.astype(np.int64) << 32) | (key_hash.astype(np.int64) & 0xFFFFFFFF)


def _java_div_1000(d: np.ndarray) -> np.ndarray:
    return np.where(d >= 0, d // 1000, -((-d) // 1000))


def _time_diffs(store_ts: np.ndarray, begin: int) -> np.ndarray:
    """:func:`~mqstore.formats.rocketmq.indexfile.time_diff_seconds` of many store times."""
    if begin <= 0:
        return np.zeros(store_ts.shape[0], np.int64)
    return np.clip(_java_div_1000(store_ts - begin), 0, INT_MAX)


_ITEM_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])


def verify_store(root: str | Path, config=None, *, max_problems: int = 1000,
                 progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """CRC of every record, every ConsumeQueue unit against the CommitLog, every IndexFile item
    against the CommitLog (offset of a real record with a matching key hash) and chain links.
    ``progress(done, total)`` is called after each scanned batch with CommitLog bytes.

    Every check runs over columns (the CommitLog scan's, the ConsumeQueue units', the IndexFile
    items'): Python only formats the problems.  :func:`verify_store_reference` is the same
    verification one element at a time (the tests hold the two equal)."""
    rep = VerifyReport()
    store = RocketMQStore(root, config, read_only=True)

    def problem(text: str) -> None:
        if len(rep.problems) < max_problems:
            rep.problems.append(text)

    try:
        cl = store.commit_log
        recs = _scan_records(cl, rep, problem, progress)
        end = store.recovery.commit_log_end
        if isinstance(cl, DLedgerCommitLog):  # the DLedger files themselves: index units, fillers
            for text in cl.problems(max_problems):
                problem(text)
        for (topic, qid), cq in sorted(store.consume_queues.items()):
            for mf in cq.queue.files:
                _check_cq_file(mf, topic, qid, cq, recs, cl.min_offset, end, rep, problem)
        for f in store.index.files:
            _check_index_file(f, recs, cl.min_offset, rep, problem)
        for text in store.index.verify_chains():
            problem(f"index/{text}")
        from mqstore.formats.rocketmq.timer import TIMER_TOPIC

        n = recs.n
        tid = recs.topics.get(TIMER_TOPIC, -1)
        _verify_config_and_timer(Path(root), recs.starts[:n], recs.sizes[:n], recs.starts[:n][recs.topic_id[:n] == tid],
                                 cl.min_offset, end, problem)
    finally:
        store.close()
    return rep


def _scan_records(cl, rep: VerifyReport, problem: Callable[[str], None],
                  progress: Callable[[int, int], None] | None) -> _Records:
    topics: dict[str, int] = {}
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("starts", "sizes", "topic_id", "queue_id", "queue_offset",
                                                         "tags_code", "store_ts", "key_off", "key_hash")}
    for batch in cl.scan(cl.min_offset, cl.max_offset, check_crc=True, skip_length_mismatch=False):
        rep.messages += len(batch)
        if progress is not None:
            progress(batch.next_offset - cl.min_offset, cl.max_offset - cl.min_offset)
        remap = np.array([topics.setdefault(t, len(topics)) for t in batch.topics] or [0], np.int64)
        cols["starts"].append(batch.commit_log_offset.astype(np.int64))
        cols["sizes"].append(batch.size.astype(np.int64))
        cols["topic_id"].append(remap[batch.topic_id] if len(batch) else np.empty(0, np.int64))
        cols["queue_id"].append(batch.queue_id.astype(np.int64))
        cols["queue_offset"].append(batch.queue_offset.astype(np.int64))
        cols["tags_code"].append(batch.tags_code.astype(np.int64))
        cols["store_ts"].append(batch.store_timestamp.astype(np.int64))
        cols["key_off"].append(batch.commit_log_offset[batch.key_row].astype(np.int64))
        cols["key_hash"].append(batch.key_hash.astype(np.int64))
        if batch.stop == STOP_INVALID:
            problem(f"commitlog: invalid record at offset {batch.next_offset}: {batch.error}")
    c = {k: np.concatenate(v) if v else np.empty(0, np.int64) for k, v in cols.items()}
    n = int(c["starts"].shape[0])
    order = np.argsort(c["starts"], kind="stable")

    def col(name: str) -> np.ndarray:  # sorted by offset, plus the sentinel row
        return np.append(c[name][order], -1)

    recs = _Records(col("starts"), col("sizes"), col("topic_id"), col("queue_id"), col("queue_offset"),
                    col("tags_code"), col("store_ts"), topics, np.empty(0, np.int64), np.zeros(n + 1, bool), n)
    recs.topic_id[n] = -2  # no topic
    rec_of_key, _ = recs.find(c["key_off"])
    recs.pair_keys = np.sort(_pair_key(rec_of_key, c["key_hash"]))  # (duplicates do not matter)
    recs.has_keys[rec_of_key] = True
    return recs


def _check_cq_file(mf, topic: str, qid: int, cq, recs: _Records, cl_min: int, end: int, rep: VerifyReport,
                   problem: Callable[[str], None]) -> None:
    n = mf.wrote_position // CQ_UNIT_SIZE
    units = np.frombuffer(mf.mm, dtype=CQ_DTYPE, count=n)
    rep.cq_units += n
    off = units["offset"].astype(np.int64)
    size = units["size"].astype(np.int64)
    tags = units["tags_code"].astype(np.int64)
    del units
    live = ~((off == 0) & (size == INT_MAX)) & (off >= cl_min)
    ri, found = recs.find(off)
    is_rec = live & found & (recs.sizes[ri] == size)
    ext = is_rec & (tags <= MAX_ADDR)
    rep.ext_units += int(ext.sum())
    first = mf.file_from_offset // CQ_UNIT_SIZE
    qoff = first + np.arange(n, dtype=np.int64)
    tid = recs.topics.get(topic, -1)
    same = (recs.topic_id[ri] == tid) & (recs.queue_id[ri] == qid) & (recs.queue_offset[ri] == qoff)
    wrong = is_rec & ~ext & ~(same & (recs.tags_code[ri] == tags))
    names = {v: k for k, v in recs.topics.items()}
    for i in np.nonzero((live & ~is_rec) | ext | wrong)[0].tolist():
        o, sz, tag, q, r = int(off[i]), int(size[i]), int(tags[i]), first + i, int(ri[i])
        where = f"consumequeue/{topic}/{qid}: unit {q}"
        if not is_rec[i]:
            problem(f"consumequeue/{topic}/{qid}: unit {q} points at offset {o} size {sz}, "
                    f"which is not a record of the CommitLog (valid end {end})")
            continue
        if ext[i]:
            try:
                e = cq.ext.get(tag) if cq.ext is not None else None
            except MqStoreError as exc:
                problem(f"{where}: ext address {tag} (ext offset {undecorate(tag)}): {exc.message}")
                continue
            if e is None:
                problem(f"{where}: tags code {tag} is a ConsumeQueueExt address but the store has no "
                        f"consumequeue_ext/{topic}/{qid} files")
                continue
            if e.msg_store_time != int(recs.store_ts[r]):
                problem(f"{where}: ext unit at {undecorate(tag)} has store time {e.msg_store_time}, "
                        f"the message at offset {o} {int(recs.store_ts[r])}")
            tag = e.tags_code
        if not same[i] or int(recs.tags_code[r]) != tag:
            problem(f"{where} (tags code {tag}) points at offset {o}, a record of "
                    f"{names[int(recs.topic_id[r])]}/{int(recs.queue_id[r])} queue offset "
                    f"{int(recs.queue_offset[r])} tags code {int(recs.tags_code[r])}")


def _check_index_file(f, recs: _Records, cl_min: int, rep: VerifyReport, problem: Callable[[str], None]) -> None:
    h = f.header
    buf = f.buffer
    count = max(min(h.index_count, buf.index_num), 1) - 1  # items 1 .. count
    items = np.frombuffer(f.mm, dtype=_ITEM_DTYPE, count=count, offset=buf.item_position(1))
    rep.index_items += count
    key_hash = items["hash"].astype(np.int64)
    phy = items["phy"].astype(np.int64)
    diff = items["diff"].astype(np.int64)
    prev = items["prev"].astype(np.int64)
    del items
    item_no = np.arange(1, count + 1, dtype=np.int64)
    live = phy >= cl_min
    ri, found = recs.find(phy)
    keyed = found & recs.has_keys[ri]
    pk = _pair_key(ri, key_hash)
    pairs = np.append(recs.pair_keys, -1)  # a sentinel again: no key pair is negative
    j = np.minimum(np.searchsorted(recs.pair_keys, pk), recs.pair_keys.shape[0])
    hash_ok = keyed & (pairs[j] == pk)
    time_bad = hash_ok & (item_no >= 2) & (diff != _time_diffs(recs.store_ts[ri], h.begin_timestamp))
    bad = (live & (~keyed | ~hash_ok | time_bad)) | (prev < 0) | (prev >= item_no) | (diff < 0)
    for k in np.nonzero(bad)[0].tolist():
        item, p, d = k + 1, int(phy[k]), int(diff[k])
        if live[k]:
            if not keyed[k]:
                problem(f"index/{f.name}: item {item} points at offset {p}, which is not a record start")
            elif not hash_ok[k]:
                problem(f"index/{f.name}: item {item} hash {int(key_hash[k])} matches no key of the message at {p}")
            elif time_bad[k]:
                problem(f"index/{f.name}: item {item} time difference {d} s does not match the store time "
                        f"of the message at {p}")
        if prev[k] < 0 or prev[k] >= item:
            problem(f"index/{f.name}: item {item} links to item {int(prev[k])} (must be older)")
        if d < 0:
            problem(f"index/{f.name}: item {item} has a negative time difference")


def verify_store_reference(root: str | Path, config=None, *, max_problems: int = 1000,
                           progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """:func:`verify_store` one record, unit and item at a time with dictionaries: the plain
    statement of every check, and the twin the vectorised version is tested against (same
    problems, same order, same counts)."""
    rep = VerifyReport()
    store = RocketMQStore(root, config, read_only=True)

    def problem(text: str) -> None:
        if len(rep.problems) < max_problems:
            rep.problems.append(text)

    try:
        cl = store.commit_log
        starts: list[np.ndarray] = []
        sizes: list[np.ndarray] = []
        key_sets: dict[int, set[int]] = {}
        # what the CommitLog says of each record: the ConsumeQueue units and index items must agree
        fields_of: dict[int, tuple[str, int, int, int, int]] = {}
        for batch in cl.scan(cl.min_offset, cl.max_offset, check_crc=True, skip_length_mismatch=False):
            rep.messages += len(batch)
            if progress is not None:
                progress(batch.next_offset - cl.min_offset, cl.max_offset - cl.min_offset)
            for r, off in enumerate(batch.commit_log_offset.tolist()):
                fields_of[off] = (batch.topic_of(r), int(batch.queue_id[r]), int(batch.queue_offset[r]),
                                  int(batch.tags_code[r]), int(batch.store_timestamp[r]))
            starts.append(batch.commit_log_offset)
            sizes.append(batch.size)
            for row, h in zip(batch.key_row.tolist(), batch.key_hash.tolist(), strict=True):
                key_sets.setdefault(int(batch.commit_log_offset[row]), set()).add(int(h))
            if batch.stop == STOP_INVALID:
                problem(f"commitlog: invalid record at offset {batch.next_offset}: {batch.error}")
        end = store.recovery.commit_log_end
        if isinstance(cl, DLedgerCommitLog):  # the DLedger files themselves: index units, fillers
            for text in cl.problems(max_problems):
                problem(text)
        all_starts = np.concatenate(starts) if starts else np.empty(0, np.int64)
        all_sizes = np.concatenate(sizes) if sizes else np.empty(0, np.int32)
        size_of = dict(zip(all_starts.tolist(), all_sizes.tolist(), strict=True))
        for (topic, qid), cq in sorted(store.consume_queues.items()):
            for mf in cq.queue.files:
                n = mf.wrote_position // CQ_UNIT_SIZE
                units = np.frombuffer(mf.mm, dtype=CQ_DTYPE, count=n)
                tags = units["tags_code"].tolist()
                for i, (off, size) in enumerate(zip(units["offset"].tolist(), units["size"].tolist(), strict=True)):
                    rep.cq_units += 1
                    if off == 0 and size == INT_MAX:
                        continue
                    if off < cl.min_offset:
                        continue  # points into a deleted segment (retention)
                    qoff = (mf.file_from_offset // CQ_UNIT_SIZE) + i
                    if size_of.get(off) != size:
                        problem(f"consumequeue/{topic}/{qid}: unit {qoff} points at offset {off} size {size}, "
                                f"which is not a record of the CommitLog (valid end {end})")
                        continue
                    tag = tags[i]
                    where = f"consumequeue/{topic}/{qid}: unit {qoff}"
                    if tag <= MAX_ADDR:  # a ConsumeQueueExt address: the ext unit holds the tags code
                        rep.ext_units += 1
                        try:
                            ext = cq.ext.get(tag) if cq.ext is not None else None
                        except MqStoreError as exc:
                            problem(f"{where}: ext address {tag} (ext offset {undecorate(tag)}): {exc.message}")
                            continue
                        if ext is None:
                            problem(f"{where}: tags code {tag} is a ConsumeQueueExt address but the store has no "
                                    f"consumequeue_ext/{topic}/{qid} files")
                            continue
                        if ext.msg_store_time != fields_of[off][4]:
                            problem(f"{where}: ext unit at {undecorate(tag)} has store time {ext.msg_store_time}, "
                                    f"the message at offset {off} {fields_of[off][4]}")
                        tag = ext.tags_code
                    if fields_of[off][:3] != (topic, qid, qoff) or fields_of[off][3] != tag:
                        t, q, o, tc, _ = fields_of[off]
                        problem(f"{where} (tags code {tag}) points at offset "
                                f"{off}, a record of {t}/{q} queue offset {o} tags code {tc}")
                del units
        for f in store.index.files:
            h = f.header
            buf = f.buffer
            for item in range(1, max(min(h.index_count, buf.index_num), 1)):
                key_hash, phy, diff, prev = buf.read_item(item)
                rep.index_items += 1
                if phy < cl.min_offset:
                    continue
                hashes = key_sets.get(phy)
                if hashes is None:
                    problem(f"index/{f.name}: item {item} points at offset {phy}, which is not a record start")
                elif key_hash not in hashes:
                    problem(f"index/{f.name}: item {item} hash {key_hash} matches no key of the message at {phy}")
                elif item >= 2 and diff != time_diff_seconds(fields_of[phy][4], h.begin_timestamp):
                    problem(f"index/{f.name}: item {item} time difference {diff} s does not match the store time "
                            f"of the message at {phy}")
                if prev < 0 or prev >= item:
                    problem(f"index/{f.name}: item {item} links to item {prev} (must be older)")
                if diff < 0:
                    problem(f"index/{f.name}: item {item} has a negative time difference")
        for text in store.index.verify_chains():
            problem(f"index/{text}")
        from mqstore.formats.rocketmq.timer import TIMER_TOPIC

        order = np.argsort(all_starts, kind="stable")
        timer_starts = np.array(sorted(o for o, f in fields_of.items() if f[0] == TIMER_TOPIC), np.int64)
        _verify_config_and_timer(Path(root), all_starts[order], all_sizes[order].astype(np.int64), timer_starts,
                                 cl.min_offset, end, problem)
    finally:
        store.close()
    return rep


def _verify_config_and_timer(root: Path, starts: np.ndarray, sizes: np.ndarray, timer_starts: np.ndarray,
                             cl_min: int, end: int, problem: Callable[[str], None]) -> None:
    """The ``config/`` files, then the timer files (5.x: timerlog units against the CommitLog
    records, ``starts``/``sizes`` sorted by offset, and the wheel's slot chains)."""
    from mqstore.storage.rocketmq.timer import verify_timer

    for c in list_config_files(root):
        if c.error is not None:
            problem(f"config/{c.name}: {c.error}")
    for text in verify_timer(root, starts, sizes, timer_starts, cl_min, end):
        problem(text)
