"""Test-only writers of the RocketMQ RocksDB files, following docs/formats/rocketmq-rocksdb-consumequeue.md:
the RocksDB ConsumeQueue (``consumequeue/`` as one database, families ``default`` and ``offset``)
made from a store's CommitLog as the broker's dispatch makes it, and the RocksDB config stores of
consumer offsets (v1 ``config/consumerOffsets/``, v2 ``config/rdb/``).  The product never writes
RocksDB; only these fixtures do (through rocksdict, writable)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

from rocksdict import (
    BlockBasedOptions,
    DataBlockIndexType,
    DBCompactionStyle,
    DBCompressionType,
    Options,
    Rdict,
    WriteBatch,
)

from mqstore.formats.rocketmq import rocksdb_cq as fmt
from mqstore.storage.rocketmq.commitlog import CommitLog
from mqstore.storage.rocketmq.layout import commitlog_segments


def _broker_cq_options() -> Options:
    """The table and compaction settings of the broker's ConsumeQueue family (RocksDBOptionsFactory):
    block-based format 5, binary-and-hash data block index, 32 KiB blocks, a 16-bit Bloom filter,
    LZ4 with ZSTD at the bottommost level, universal compaction."""
    opt = Options(raw_mode=True)
    table = BlockBasedOptions()
    table.set_format_version(5)
    table.set_data_block_index_type(DataBlockIndexType.binary_and_hash())
    table.set_block_size(32 * 1024)
    table.set_bloom_filter(16, False)
    opt.set_block_based_table_factory(table)
    opt.set_compression_type(DBCompressionType.lz4())
    opt.set_bottommost_compression_type(DBCompressionType.zstd())
    opt.set_compaction_style(DBCompactionStyle.universal())
    return opt


def _open_writable(path: Path, families: dict[str, Options], default: Options | None = None) -> Rdict:
    opt = default if default is not None else Options(raw_mode=True)
    opt.create_if_missing(True)
    opt.create_missing_column_families(True)
    return Rdict(str(path), opt, column_families=families)


def _finish(path: Path) -> None:
    """What a broker-made database does not have: the binding's own config file."""
    try:
        (path / "rocksdict-config.json").unlink()
    except FileNotFoundError:
        pass


def write_rocksdb_consumequeue(store: Path, *, remove_files: bool = True, min_entries: bool = False,
                               batch_rows: int = 16, flush: bool = True) -> dict[tuple[str, int], int]:
    """Write ``store/consumequeue/`` as the broker's RocksDB ConsumeQueue from the CommitLog (every
    dispatchable record: one ``default`` entry, the queue's ``max`` entry and the dispatch
    checkpoint, written in batches of ``batch_rows`` as the broker's group commit does).  The
    classic queue directories are removed first unless ``remove_files`` is false (a combined
    store).  ``min_entries`` adds the ``min`` entries the broker writes when it corrects a
    minimum.  Returns the max queue offset + 1 of every queue."""
    store = Path(store)
    cq_dir = store / "consumequeue"
    if remove_files and cq_dir.exists():
        shutil.rmtree(cq_dir)
    cq_dir.mkdir(exist_ok=True)
    segs = commitlog_segments(store)
    cl = CommitLog(store / "commitlog", segs[0].size if segs else 1 << 20, read_only=True)
    cl.load()
    offset_opt = Options(raw_mode=True)  # the broker's offset family: no compression, level compaction
    offset_opt.set_compression_type(DBCompressionType.none())
    db = _open_writable(cq_dir, {fmt.CF_OFFSET: offset_opt}, _broker_cq_options())
    off_cf = db.get_column_family_handle(fmt.CF_OFFSET)
    ends: dict[tuple[str, int], int] = {}
    firsts: dict[tuple[str, int], tuple[int, int]] = {}
    try:
        for batch in cl.scan(cl.min_offset, cl.max_offset):
            mask = batch.cq_mask()
            rows = [int(r) for r in mask.nonzero()[0]]
            for i in range(0, len(rows), batch_rows):
                wb = WriteBatch(raw_mode=True)
                maxes: dict[tuple[str, int], tuple[int, int]] = {}
                end_phy = 0
                for r in rows[i : i + batch_rows]:
                    topic = batch.topics[int(batch.topic_id[r])]
                    qid, qoff = int(batch.queue_id[r]), int(batch.queue_offset[r])
                    off, size = int(batch.commit_log_offset[r]), int(batch.size[r])
                    wb.put(fmt.encode_cq_key(topic, qid, qoff),
                           fmt.encode_cq_value(off, size, int(batch.tags_code[r]), int(batch.store_timestamp[r])))
                    maxes[(topic, qid)] = (off, qoff)
                    firsts.setdefault((topic, qid), (off, qoff))
                    end_phy = max(end_phy, off + size)
                    ends[(topic, qid)] = qoff + 1
                wb.set_default_column_family(off_cf)
                for (topic, qid), (off, qoff) in maxes.items():
                    wb.put(fmt.encode_offset_key(topic, qid, fmt.MAX), fmt.encode_offset_value(off, qoff))
                wb.put(fmt.CHECKPOINT_KEY, fmt.encode_checkpoint_value(end_phy))
                db.write(wb)
        if min_entries:
            offd = db.get_column_family(fmt.CF_OFFSET)
            for (topic, qid), (off, qoff) in firsts.items():
                offd[fmt.encode_offset_key(topic, qid, fmt.MIN)] = fmt.encode_offset_value(off, qoff)
        if flush:
            db.flush()
    finally:
        db.close()
        cl.close()
    _finish(cq_dir)
    return ends


def write_v1_consumer_offsets(store: Path, table: dict[tuple[str, str], dict[int, int]]) -> Path:
    """``config/consumerOffsets/``: key ``topic@group``, value ``{"offsetTable":{"<qid>":<offset>}}``
    (fastjson with BrowserCompatible quotes the number keys), and the ``kvDataVersion`` family."""
    path = Path(store) / "config" / "consumerOffsets"
    path.mkdir(parents=True, exist_ok=True)
    db = _open_writable(path, {fmt.V1_VERSION_CF: Options(raw_mode=True)})
    try:
        for (topic, group), queues in table.items():
            value = json.dumps({"offsetTable": {str(q): o for q, o in queues.items()}}, separators=(",", ":"))
            db[fmt.encode_v1_offset_key(topic, group)] = value.encode()
        db.get_column_family(fmt.V1_VERSION_CF)[fmt.V1_VERSION_KEY] = \
            b'{"counter":3,"stateVersion":0,"timestamp":1700000000000}'
        db.flush()
    finally:
        db.close()
    _finish(path)
    return path


def write_v2_consumer_offsets(store: Path, table: dict[tuple[str, str], dict[int, int]],
                              pull: dict[tuple[str, str], dict[int, int]] | None = None) -> Path:
    """``config/rdb/``: one entry per (group, topic, queue) in table 1 (consumer offsets), table 2
    for pull offsets, a data-version record per table."""
    path = Path(store) / "config" / "rdb"
    path.mkdir(parents=True, exist_ok=True)
    db = _open_writable(path, {})
    try:
        for table_id, rows in ((fmt.V2_CONSUMER_OFFSET, table), (fmt.V2_PULL_OFFSET, pull or {})):
            for (topic, group), queues in rows.items():
                for q, o in queues.items():
                    db[fmt.encode_v2_offset_key(group, topic, q, table_id)] = fmt.encode_v2_offset_value(o)
            version_key = bytes([fmt.V2_TABLE_PREFIX]) + table_id.to_bytes(2, "big") + \
                bytes([fmt.V2_RECORD_DATA_VERSION]) + b"data_version"
            db[version_key] = (0).to_bytes(8, "big") + (1700000000000).to_bytes(8, "big") + (5).to_bytes(8, "big")
        db.flush()
    finally:
        db.close()
    _finish(path)
    return path


def tree_digest(root: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``root`` with its size, mtime and digest (to prove a command wrote nothing)."""
    out: dict[str, tuple[int, int, str]] = {}
    for d, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(d) / name
            st = p.lstat()
            digest = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() and not p.is_symlink() else ""
            out[str(p.relative_to(root))] = (st.st_size if p.is_file() else 0, st.st_mtime_ns, digest)
    return out
