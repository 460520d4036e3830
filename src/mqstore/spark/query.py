"""``query_keys``: many message keys looked up across many RocketMQ stores at once, on Spark.

The semantics are exactly :meth:`mqstore.api.rocketmq.MessageStore.query_by_key` for every key
and store: the IndexFiles give candidate physical offsets (a batch chain walk per index file,
:func:`mqstore.kernels.rocketmq.chain_walk.select_many`, keys hashed with the vectorised Java
``String.hashCode`` kernel), and each candidate record is read from the CommitLog and kept only
when its topic is the topic, its store time lies in ``[begin, end]`` and the key really is one of
its ``KEYS`` or its unique key (hash collisions and second-granularity index times are filtered).

Distribution: one group of tasks per (store, index file) and key bucket (the keys DataFrame is
cross-joined with the list of index files and repartitioned), then the candidates are grouped by
store and CommitLog segment and read in offset order.  Nothing relies on driver-local state: the
driver only lists the index files; executors open the files themselves.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from mqstore.errors import GeometryMismatchError, InvalidArgumentError, InvalidKeyError, StoreNotFoundError

if TYPE_CHECKING:  # pragma: no cover
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

LONG_MAX = 2**63 - 1
CANDIDATE_SCHEMA = "storeIndex INT, segmentBase BIGINT, key STRING, commitLogOffset BIGINT"


def result_schema() -> str:
    """The columns of the result: the ``rocketmq`` source's columns plus the matched ``key``."""
    from mqstore.spark.rocketmq_source import ROCKETMQ_SCHEMA

    return f"{ROCKETMQ_SCHEMA}, key STRING"


# =============================================================================== planning (driver)
def _store_geometry(root: Path, hash_slot_num: int | None, index_num: int | None) -> tuple[int, int, int]:
    """(CommitLog segment size, slots, items) of a store: given, or detected from the files by
    :func:`mqstore.storage.rocketmq.layout.resolve_config`; every IndexFile must fit it."""
    from mqstore.formats.rocketmq.indexfile import index_file_size
    from mqstore.storage.rocketmq.layout import commitlog_segments, index_files, resolve_config

    if not (root / "commitlog").is_dir():
        raise StoreNotFoundError(f"{root} is not a RocketMQ store (no commitlog/ directory)")
    segs = commitlog_segments(root)
    if not segs:
        raise StoreNotFoundError(f"{root}/commitlog has no segments")
    cfg = resolve_config(root, None, hash_slot_num=hash_slot_num, index_num=index_num)
    slots, items = cfg.hash_slot_num, cfg.index_num
    for p in index_files(root):
        if p.stat().st_size != index_file_size(slots, items):
            raise GeometryMismatchError(
                f"index file is {p.stat().st_size} bytes, not {index_file_size(slots, items)} "
                f"({slots} slots x {items} items): pass the store's hash_slot_num/index_num", path=str(p))
    return segs[0].size, slots, items


def _file_tasks(root: Path, begin: int, end: int) -> list[str]:
    """Index files of a store that may hold keys stored in [begin, end] (the index keeps times
    rounded down to seconds: the window is widened by one second, as the local query does)."""
    from mqstore.formats.rocketmq.indexfile import time_matched
    from mqstore.storage.rocketmq.layout import index_files, read_index_header

    wbegin = max(0, begin - 1000)
    out = []
    for p in index_files(root):
        h = read_index_header(p)
        if h.index_count <= 1:
            continue
        if not time_matched(h, wbegin, end):  # the IndexService's rule
            continue
        out.append(p.name)
    return out


def _keys_frame(spark: SparkSession, keys: Any) -> DataFrame:
    """A one-column (``key STRING``) DataFrame of distinct, non-empty keys."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    if isinstance(keys, DataFrame):
        fields = keys.schema.fields
        named = [f for f in fields if f.name == "key"]
        strings = [f for f in fields if isinstance(f.dataType, StringType)]
        field = named[0] if named else (strings[0] if len(strings) == 1 else None)
        if field is None or not isinstance(field.dataType, StringType):
            raise InvalidArgumentError("the keys DataFrame needs a string column named 'key' (or exactly one string column)")
        df = keys.select(F.col(f"`{field.name}`").alias("key"))
    elif isinstance(keys, str | os.PathLike):
        path = os.fspath(keys)
        if "://" in path:  # a cluster file system: read by the executors
            df = spark.read.text(path).select(F.trim(F.col("value")).alias("key"))
        else:
            df = spark.createDataFrame([(k,) for k in read_keys_file(path)], "key STRING")
    elif isinstance(keys, Sequence):
        values = list(keys)
        bad = [k for k in values if not isinstance(k, str) or not k]
        if bad:
            raise InvalidKeyError(f"keys must be non-empty strings, got {bad[0]!r}")
        if not values:
            raise InvalidArgumentError("no keys to look up")
        df = spark.createDataFrame([(k,) for k in dict.fromkeys(values)], "key STRING")
    else:
        raise InvalidArgumentError(f"keys must be a DataFrame, a list of strings or a path, not {type(keys).__name__}")
    return df.where(F.col("key").isNotNull() & (F.length("key") > 0)).distinct()


def _broker_names(stores: list[Path], names: Sequence[str] | None) -> list[str]:
    if names is None:
        names = [p.name or str(p) for p in stores]
    names = list(names)
    if len(names) != len(stores):
        raise InvalidArgumentError(f"{len(names)} broker names given for {len(stores)} stores")
    if len(set(names)) != len(names):
        raise InvalidArgumentError("two stores have the same broker name: give each one with broker_names")
    return names


# =============================================================================== executors
def _candidates(batches: Iterator[pa.RecordBatch], *, stores: tuple[str, ...], topic: str, begin: int, end: int,
                geometry: tuple[tuple[int, int, int], ...]) -> Iterator[pa.RecordBatch]:
    """(storeIndex, file, key) rows → candidates (storeIndex, segmentBase, key, commitLogOffset),
    one chain walk per index file for all its keys."""
    import pyarrow as pa

    from mqstore.kernels.javahash import index_hash_strings
    from mqstore.storage.rocketmq.index import IndexFile
    from mqstore.storage.rocketmq.layout import index_dir

    wbegin = max(0, begin - 1000)
    out_schema = pa.schema([("storeIndex", pa.int32()), ("segmentBase", pa.int64()), ("key", pa.string()),
                            ("commitLogOffset", pa.int64())])
    for rb in batches:
        if rb.num_rows == 0:
            continue
        store_idx = rb.column("storeIndex").to_numpy(zero_copy_only=False)
        files = rb.column("file").to_pylist()
        keys = rb.column("key").to_pylist()
        groups: dict[tuple[int, str], list[int]] = {}
        for i, (s, f) in enumerate(zip(store_idx.tolist(), files, strict=True)):
            groups.setdefault((s, f), []).append(i)
        for (s, f), rows in groups.items():
            _, slots, items = geometry[s]
            path = index_dir(stores[s]) / f
            try:
                ixf = IndexFile(path, slots, items, read_only=True)
            except FileNotFoundError:
                continue  # deleted by retention since planning: its messages are gone too
            try:
                gkeys = [keys[i] for i in rows]
                hashes = index_hash_strings([f"{topic}#{k}" for k in gkeys])
                offsets, splits = ixf.select_many(hashes, wbegin, end)
            finally:
                ixf.close()
            counts = np.diff(splits)
            if not len(offsets):
                continue
            key_col = [k for k, c in zip(gkeys, counts.tolist(), strict=True) for _ in range(c)]
            seg = geometry[s][0]
            yield pa.RecordBatch.from_arrays(
                [pa.array(np.full(len(offsets), s, np.int32)), pa.array(offsets - offsets % seg, pa.int64()),
                 pa.array(key_col, pa.string()), pa.array(offsets, pa.int64())],
                schema=out_schema)


def _fetch(batches: Iterator[pa.RecordBatch], *, stores: tuple[str, ...], broker_names: tuple[str, ...], topic: str,
           begin: int, end: int, geometry: tuple[tuple[int, int, int], ...], include_body: bool) -> Iterator[pa.RecordBatch]:
    """Candidate rows → the exactly matching messages.  All candidates of a CommitLog segment are
    in one partition, so duplicates (a key listed twice in one message, the same key in two
    index files) are dropped here, without a shuffle."""
    import pyarrow as pa

    from mqstore.kernels.rocketmq.columns import decode_columns
    from mqstore.spark._rocketmq_read import close_map, columns_to_arrow, open_segment
    from mqstore.storage.rocketmq.layout import commitlog_dir, segment_name

    seen: set[tuple[int, str, int]] = set()  # over the whole partition
    for rb in batches:
        if rb.num_rows == 0:
            continue
        sidx = rb.column("storeIndex").to_numpy(zero_copy_only=False).astype(np.int64)
        offs = rb.column("commitLogOffset").to_numpy(zero_copy_only=False).astype(np.int64)
        keys = rb.column("key").to_pylist()
        if len(keys):
            uniq = []
            for r, (s_, k_, o_) in enumerate(zip(sidx.tolist(), keys, offs.tolist(), strict=True)):
                if (s_, k_, o_) not in seen:
                    seen.add((s_, k_, o_))
                    uniq.append(r)
            if len(uniq) < len(keys):
                sel = np.array(uniq, np.int64)
                sidx, offs, keys = sidx[sel], offs[sel], [keys[r] for r in uniq]
        seg_sizes = np.array([geometry[int(s)][0] for s in sidx.tolist()], np.int64) if len(sidx) else np.zeros(0, np.int64)
        bases = offs - offs % np.maximum(seg_sizes, 1)
        order = np.lexsort((offs, bases, sidx))
        i = 0
        n = len(order)
        while i < n:
            s, base = int(sidx[order[i]]), int(bases[order[i]])
            j = i
            while j < n and int(sidx[order[j]]) == s and int(bases[order[j]]) == base:
                j += 1
            rows = order[i:j]
            i = j
            path = str(commitlog_dir(stores[s]) / segment_name(base))
            if not os.path.exists(path):
                continue  # the segment was deleted by retention: its messages are gone (as locally)
            mm, u8 = open_segment(path)
            try:
                pos = offs[rows] - base
                ok = (pos >= 0) & (pos + 4 <= len(u8))
                rows, pos = rows[ok], pos[ok]
                if not len(rows):
                    continue
                cols = decode_columns(u8, base, pos, include_body=include_body)
            finally:
                del u8
                close_map(mm)
            keep = []
            for r, (t, ts, ks, uk) in enumerate(zip(cols["topic"], cols["storeTimestamp"].tolist(), cols["keys"],
                                                    cols["uniqKey"], strict=True)):
                k = keys[int(rows[r])]
                if t == topic and begin <= ts <= end and (k in ks or uk == k):
                    keep.append(r)
            if not keep:
                continue
            sel = np.array(keep, np.int64)
            picked = {name: (v[sel] if isinstance(v, np.ndarray) else [v[r] for r in keep]) for name, v in cols.items()}
            out = columns_to_arrow(picked, broker_names[s], include_body=include_body)
            yield pa.RecordBatch.from_arrays(
                [*out.columns, pa.array([keys[int(rows[r])] for r in keep], pa.string())],
                names=[*out.schema.names, "key"])


# =============================================================================== the job
def query_keys(spark: SparkSession, stores: str | os.PathLike[str] | Sequence[str | os.PathLike[str]], topic: str,
               keys: DataFrame | Sequence[str] | str | os.PathLike[str], *, begin: int | None = None,
               end: int | None = None, broker_names: Sequence[str] | None = None,
               hash_slot_num: int | None = None, index_num: int | None = None,
               key_partitions: int | None = None, include_body: bool = True, sort: bool = True) -> DataFrame:
    """The messages of ``topic`` in any of ``stores`` whose ``KEYS`` contain one of ``keys`` (or
    whose unique key is one), stored in ``[begin, end]`` (ms, inclusive): the ``rocketmq``
    source's columns plus the matched ``key``.  ``keys``: a DataFrame (column ``key``), a list of
    strings or the path of a text file with one key per line.  ``sort``: per key and broker,
    newest first (as ``MessageStore.query_by_key``)."""
    from pyspark.sql import functions as F

    from mqstore.storage.rocketmq.config import validate_topic

    validate_topic(topic)
    b = 0 if begin is None else int(begin)
    e = LONG_MAX if end is None else int(end)
    if b < 0 or e < b:
        raise InvalidArgumentError(f"invalid time window [{begin}, {end}]")
    if key_partitions is not None and key_partitions <= 0:
        raise InvalidArgumentError("key_partitions must be positive")
    paths = [stores] if isinstance(stores, str | os.PathLike) else list(stores)
    if not paths:
        raise InvalidArgumentError("no stores given")
    roots = [Path(p).resolve() for p in paths]
    from mqstore.spark.cluster import preflight

    preflight(spark, read={"store": roots})
    names = _broker_names([Path(p) for p in paths], broker_names)
    geometry = tuple(_store_geometry(r, hash_slot_num, index_num) for r in roots)
    keys_df = _keys_frame(spark, keys)

    tasks = [(i, name) for i, r in enumerate(roots) for name in _file_tasks(r, b, e)]
    schema = result_schema()
    if not tasks:
        return spark.createDataFrame([], schema)
    kp = key_partitions or max(1, spark.sparkContext.defaultParallelism)
    files_df = spark.createDataFrame(tasks, "storeIndex INT, file STRING")
    pairs = (files_df.crossJoin(keys_df.withColumn("bucket", F.abs(F.hash("key")) % F.lit(kp)))
             .repartition(min(len(tasks) * kp, 4 * kp * max(1, len(roots))), "storeIndex", "file", "bucket")
             .sortWithinPartitions("storeIndex", "file"))
    store_strs = tuple(str(r) for r in roots)
    cand = pairs.mapInArrow(
        functools.partial(_candidates, stores=store_strs, topic=topic, begin=b, end=e, geometry=geometry),
        CANDIDATE_SCHEMA,
    )
    found = (cand.repartition(kp, "storeIndex", "segmentBase").sortWithinPartitions("storeIndex", "segmentBase")
             .mapInArrow(functools.partial(_fetch, stores=store_strs, broker_names=tuple(names), topic=topic,
                                           begin=b, end=e, geometry=geometry, include_body=include_body), schema))
    if sort:
        found = found.orderBy("key", "brokerName", F.desc("storeTimestamp"), F.desc("commitLogOffset"))
    return found


def read_keys_file(path: str | os.PathLike[str]) -> list[str]:
    """Keys of a local text file (one per line, surrounding blanks ignored); a typed error when the
    file is missing or holds no key."""
    p = Path(path)
    if not p.is_file():
        raise InvalidArgumentError(f"keys file {p} does not exist")
    keys = [line.strip() for line in p.read_text(encoding="utf-8").splitlines()]
    keys = [k for k in keys if k]
    if not keys:
        raise InvalidArgumentError(f"keys file {p} holds no key")
    bad = [k for k in keys if re.search(r"\s", k)]
    if bad:
        raise InvalidKeyError(f"key {bad[0]!r} contains blanks: KEYS are split on spaces, it can never match")
    return list(dict.fromkeys(keys))
