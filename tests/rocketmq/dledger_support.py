"""DLedger CommitLog stores for the tests: messages made by the project's RocketMQ encoder,
wrapped in DLedger entries by :class:`mqstore.storage.rocketmq.dledger.DLedgerWriter`, and the
ConsumeQueue / IndexFile bytes the broker's dispatch writes for them, computed here from the
written entries by the broker's rules (not by the scan under test)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.formats.rocketmq.javahash import DEFAULT_DELAY_TABLE, index_key_hash, tags_code
from mqstore.formats.rocketmq.properties import encode_properties, split_keys
from mqstore.formats.rocketmq.record import (
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    Host,
    MessageRecord,
)
from mqstore.storage.rocketmq.dledger import DLedgerWriter, WrittenEntry

from .helpers import build_consume_queues, build_index_files, index_inputs

BASE_TS = 1_760_000_000_000
DATA_FILE = 16 * 1024  # small data files: several, each closed by a blank filler
INDEX_FILE = 32 * 64  # 64 units per index file
CQ_FILE = 20 * 40
SLOTS, ITEMS = 16, 64


def make_records(n: int, *, seed: int = 7) -> list[MessageRecord]:
    """``n`` messages over two topics and four queues with keys, tags, unique keys, a few
    transaction messages (PREPARED/ROLLBACK/COMMIT), an IPv6 store host, a v2 (long) topic."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        topic = ("TopicA", "TopicB", "T" * 130)[0 if i % 2 else 1 if i % 17 else 2]
        props: dict[str, str] = {"KEYS": f"k{i} shared{i % 5}", "TAGS": f"Tag{i % 3}", "UNIQ_KEY": f"UNIQ{i:08d}"}
        sys_flag = 0
        if i % 11 == 3:
            sys_flag = TRANSACTION_PREPARED_TYPE
        elif i % 11 == 5:
            sys_flag = TRANSACTION_ROLLBACK_TYPE
        elif i % 11 == 7:
            sys_flag = TRANSACTION_COMMIT_TYPE
        body = bytes(rng.integers(0, 256, int(rng.integers(10, 400)), dtype=np.uint8))
        out.append(MessageRecord(
            topic=topic, body=body, queue_id=i % 4, sys_flag=sys_flag, born_timestamp=BASE_TS + i,
            store_timestamp=BASE_TS + 10 * i + 5,
            store_host=Host("::1", 10911) if i % 13 == 0 else Host("10.0.0.1", 10911),
            born_host=Host("192.168.0.9", 50000 + i % 100),
            properties_text=encode_properties(props)))
    return out


def build_dledger_store(root: Path, records: list[MessageRecord], *, self_id: str = "n0",
                        file_size: int = DATA_FILE, index_file_size: int = INDEX_FILE,
                        terms: tuple[int, ...] = (1, 2), legacy_group: str | None = None,
                        committed_index: int | None = None) -> list[WrittenEntry]:
    """A store root holding only a DLedger CommitLog (no consumequeue/ nor index/ yet); the
    messages are split evenly over the leader ``terms``."""
    w = DLedgerWriter(root, self_id, file_size=file_size, index_file_size=index_file_size, term=terms[0],
                      legacy_group=legacy_group)
    out: list[WrittenEntry] = []
    per = max(1, -(-len(records) // len(terms)))
    for k, term in enumerate(terms):
        w.term = term
        out += w.append(records[k * per : (k + 1) * per])
    w.close(committed_index=committed_index)
    return out


def expected_columns(records: list[MessageRecord], entries: list[WrittenEntry]) -> dict[str, Any]:
    """The dispatch columns of the written messages by the broker's rules: the physical offset
    is the entry position + 48, the tags code the hash of the tags, the index keys the unique
    key then every KEYS piece, each hashed as ``topic#key``."""
    cols: dict[str, Any] = {k: [] for k in ("off", "size", "qid", "qoff", "sys", "ts", "tags", "topic")}
    key_row: list[int] = []
    key_hash: list[int] = []
    for row, (rec, e) in enumerate(zip(records, entries, strict=True)):
        assert e.offset == e.pos + 48
        cols["off"].append(e.offset)
        cols["size"].append(e.size)
        cols["qid"].append(rec.queue_id)
        cols["qoff"].append(e.queue_offset)
        cols["sys"].append(rec.sys_flag)
        cols["ts"].append(rec.store_timestamp)
        props = dict(p.split("\x01", 1) for p in rec.properties_text.split("\x02") if p)
        cols["tags"].append(tags_code(rec.topic, props.get("TAGS"), None, rec.store_timestamp, DEFAULT_DELAY_TABLE))
        cols["topic"].append(rec.topic)
        for k in [props["UNIQ_KEY"], *split_keys(props.get("KEYS"))]:
            key_row.append(row)
            key_hash.append(index_key_hash(f"{rec.topic}#{k}"))
    cols["key_row"] = np.array(key_row, np.int64)
    cols["key_hash"] = np.array(key_hash, np.int32)
    return cols


def expected_index_tree(records: list[MessageRecord], entries: list[WrittenEntry], *, cq_file: int = CQ_FILE,
                        slots: int = SLOTS, items: int = ITEMS) -> dict[str, bytes]:
    """Relative path → bytes of the consumequeue/ and index/ files the broker's dispatch writes."""
    cols = expected_columns(records, entries)
    out = build_consume_queues(cols, cq_file)
    for name, data in build_index_files(*index_inputs(cols), slots, items):
        out[f"index/{name}"] = data
    return out


def tree(root: Path, subdirs: tuple[str, ...] = ("consumequeue", "index")) -> dict[str, bytes]:
    out = {}
    for sub in subdirs:
        base = root / sub
        if base.is_dir():
            for p in sorted(base.rglob("*")):
                if p.is_file():
                    out[str(p.relative_to(root))] = p.read_bytes()
    return out


def tree_hash(root: Path) -> dict[str, tuple[str, float]]:
    """Every file of a directory with its content hash and modification time."""
    return {str(p.relative_to(root)): (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime)
            for p in sorted(root.rglob("*")) if p.is_file()}
