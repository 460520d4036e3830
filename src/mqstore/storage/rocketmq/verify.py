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


def verify_store(root: str | Path, config=None, *, max_problems: int = 1000,
                 progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """CRC of every record, every ConsumeQueue unit against the CommitLog, every IndexFile item
    against the CommitLog (offset of a real record with a matching key hash) and chain links.
    ``progress(done, total)`` is called after each scanned batch with CommitLog bytes."""
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
            for item in range(1, max(h.index_count, 1)):
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
        for c in list_config_files(Path(root)):
            if c.error is not None:
                problem(f"config/{c.name}: {c.error}")
        # timer messages (5.x): timerlog units against these records, the wheel's slot chains
        from mqstore.formats.rocketmq.timer import TIMER_TOPIC
        from mqstore.storage.rocketmq.timer import verify_timer

        order = np.argsort(all_starts, kind="stable")
        timer_starts = np.array(sorted(o for o, f in fields_of.items() if f[0] == TIMER_TOPIC), np.int64)
        for text in verify_timer(Path(root), all_starts[order], all_sizes[order].astype(np.int64), timer_starts,
                                 cl.min_offset, end):
            problem(text)
    finally:
        store.close()
    return rep
