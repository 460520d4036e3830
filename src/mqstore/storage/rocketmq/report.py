"""The figures of ``mqstore rocketmq report``: what an operator looks at to judge a store's health.

Everything is computed from columns, never per message in Python: one bounded CommitLog scan
(the dispatch scan kernel, no CRC: ``verify`` checks CRCs) gives per-batch numpy columns that are
reduced at once (traffic per queue and second, body sizes gathered from the mapped records, index
keys per message, backward steps of the store time); every IndexFile is read as two numpy views
(slot table, items) and its hash chains are measured by pointer jumping
(:func:`mqstore.kernels.report.chain_depths`).  Read-only: no file is changed.

The result is a plain dict of JSON values (camelCase keys) that ``--json`` prints as is and the
HTML renderer draws.  Consumer offsets come from ``config/consumerOffset.json`` beside the store's
``commitlog/`` (the broker's ``storePathRootDir``), read by :func:`mqstore.storage.rocketmq.config_files.consumer_offsets`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from mqstore.errors import CorruptDataError
from mqstore.formats.rocketmq.consumequeue import CQ_DTYPE, CQ_UNIT_SIZE, INT_MAX
from mqstore.kernels.arrays import unique
from mqstore.kernels.report import backward_steps, chain_depths, log2_edges, log2_histogram
from mqstore.storage.rocketmq.config import StoreConfig
from mqstore.storage.rocketmq.config_files import consumer_offsets
from mqstore.storage.rocketmq.store import RocketMQStore

ProgressFn = Callable[[int, int], None]

SERIES_BINS = 60  # time bins of the traffic series
TOP_SERIES = 10  # topics / queues drawn one by one; the rest are summed as "(other)"
TOP_CHAINS = 10  # longest hash chains listed
SIZE_BINS = 33  # body sizes: < 1 byte, then powers of two up to 2 GiB

_BORN_V6 = 0x10
_STORE_V6 = 0x20
_ITEM_DTYPE = np.dtype([("hash", ">i4"), ("phy", ">i8"), ("diff", ">i4"), ("prev", ">i4")])


# ----------------------------------------------------------------------------- consumer offsets
# ----------------------------------------------------------------------------- helpers
def _be32(a: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """Big-endian int32 at each byte position of ``a`` (uint8)."""
    v = (a[pos].astype(np.int64) << 24) | (a[pos + 1].astype(np.int64) << 16) | \
        (a[pos + 2].astype(np.int64) << 8) | a[pos + 3].astype(np.int64)
    return np.where(v >= 1 << 31, v - (1 << 32), v)


def _time_bins(t0: int, t1: int) -> tuple[int, int]:
    """(bin width ms, bin count) covering [t0, t1] with at most SERIES_BINS bins of whole seconds."""
    span = max(t1 - t0 + 1, 1)
    width = max(1000, -(-span // SERIES_BINS))
    width = -(-width // 1000) * 1000
    return width, -(-span // width)


def _series(names: list[str], totals: np.ndarray, key_idx: np.ndarray, bins: np.ndarray,
            weights: np.ndarray, nbins: int) -> dict[str, list[int]]:
    """Series per name for the TOP_SERIES names by ``totals``, the rest summed as ``(other)``."""
    order = np.argsort(-totals, kind="stable")
    top = order[:TOP_SERIES]
    rank = np.full(len(names), len(top), np.int64)
    rank[top] = np.arange(len(top))
    ncols = len(top) + (1 if len(names) > len(top) else 0)
    grid = np.bincount(rank[key_idx] * nbins + bins, weights=weights, minlength=ncols * nbins)
    grid = grid.reshape(ncols, nbins).round().astype(np.int64)
    out = {names[int(k)]: grid[i].tolist() for i, k in enumerate(top)}
    if ncols > len(top):
        out["(other)"] = grid[-1].tolist()
    return out


# ----------------------------------------------------------------------------- the report
def rocketmq_report(root: str | Path, config: StoreConfig | None = None, *, progress: ProgressFn | None = None,
                    file_reserved_hours: float | None = None) -> dict[str, Any]:
    """Every figure of the store report of the RocketMQ store at ``root`` (see the module doc)."""
    root = Path(root)
    store = RocketMQStore(root, config, read_only=True)
    try:
        return _report(store, root, progress, file_reserved_hours)
    finally:
        store.close()


def _report(store: RocketMQStore, root: Path, progress: ProgressFn | None,
            file_reserved_hours: float | None) -> dict[str, Any]:
    cfg = store.config
    cl = store.commit_log
    end = store.recovery.commit_log_end
    start = cl.min_offset if cl.queue.files else 0
    topic_gid: dict[str, int] = {}
    queue_gid: dict[tuple[int, int], int] = {}
    # per batch, reduced: (queue gid, second) -> messages, bytes
    agg_key: list[np.ndarray] = []
    agg_msgs: list[np.ndarray] = []
    agg_bytes: list[np.ndarray] = []
    size_hist = np.zeros(SIZE_BINS, np.int64)
    keys_hist: np.ndarray = np.zeros(1, np.int64)
    body_total = 0
    body_max = 0
    messages = 0
    total_bytes = 0
    cl_next_qoff: dict[int, int] = {}  # queue gid -> max QUEUEOFFSET + 1 of CQ-dispatched records
    seg_stats: dict[int, dict[str, Any]] = {}
    backwards: list[dict[str, Any]] = []
    last_ts: dict[int, int] = {}  # segment -> store time of its last scanned record
    stop_error: str | None = None
    t_min = None
    t_max = None
    last_record_ts = -1
    if cl.queue.files and end > start:
        for batch in cl.scan_bounded(start, end, batch_records=1 << 16):
            if batch.error:
                stop_error = f"invalid record at offset {batch.next_offset}: {batch.error}"
            n = len(batch)
            if progress is not None:
                progress(batch.next_offset - start, end - start)
            if n == 0:
                continue
            offs = batch.commit_log_offset
            mf = cl.queue.find(int(offs[0]))
            if mf is None:
                continue
            seg = mf.file_from_offset
            ts = batch.store_timestamp
            sizes = batch.size.astype(np.int64)
            messages += n
            total_bytes += int(sizes.sum())
            # time going backwards inside a segment (the batch boundary included)
            prev = last_ts.get(seg)
            tcat = ts if prev is None else np.concatenate(([prev], ts))
            steps = backward_steps(tcat)
            st = seg_stats.setdefault(seg, {"messages": 0, "bytes": 0, "first": int(ts[0]), "last": int(ts[-1]),
                                            "min": int(ts.min()), "max": int(ts.max()), "backwards": 0})
            st["messages"] += n
            st["bytes"] += int(sizes.sum())
            st["last"] = int(ts[-1])
            st["min"] = min(st["min"], int(ts.min()))
            st["max"] = max(st["max"], int(ts.max()))
            st["backwards"] += int(steps.shape[0])
            shift = 0 if prev is None else 1
            for i in steps[: max(0, 20 - len(backwards))].tolist():
                backwards.append({"segment": f"{seg:020d}", "commitLogOffset": int(offs[i - shift]),
                                  "storeTimestamp": int(tcat[i]), "previousStoreTimestamp": int(tcat[i - 1])})
            last_ts[seg] = int(ts[-1])
            last_record_ts = int(ts[-1])
            t_min = int(ts.min()) if t_min is None else min(t_min, int(ts.min()))
            t_max = int(ts.max()) if t_max is None else max(t_max, int(ts.max()))
            # global topic / queue ids
            tmap = np.array([topic_gid.setdefault(t, len(topic_gid)) for t in batch.topics], np.int64)
            tg = tmap[batch.topic_id] if tmap.shape[0] else np.zeros(n, np.int64)
            qcode = (tg << 32) | batch.queue_id.astype(np.int64)
            ucodes, inv = unique(qcode, return_inverse=True)
            qmap = np.array([queue_gid.setdefault((int(c) >> 32, int(c) & 0xFFFFFFFF), len(queue_gid))
                             for c in ucodes.tolist()], np.int64)
            qg = qmap[inv]
            # traffic per (queue, second)
            code = (qg << 40) | (ts // 1000)
            uc, ui = unique(code, return_inverse=True)
            agg_key.append(uc)
            agg_msgs.append(np.bincount(ui, minlength=uc.shape[0]))
            agg_bytes.append(np.bincount(ui, weights=sizes, minlength=uc.shape[0]).astype(np.int64))
            # next queue offset per queue seen in the CommitLog (dispatched kinds only)
            m = batch.cq_mask()
            if m.any():
                qo = np.full(len(queue_gid), -1, np.int64)
                np.maximum.at(qo, qg[m], batch.queue_offset[m])
                for g in np.flatnonzero(qo >= 0).tolist():
                    cl_next_qoff[g] = max(cl_next_qoff.get(g, 0), int(qo[g]) + 1)
            # body sizes, gathered from the mapped records
            a = np.frombuffer(mf.mm, np.uint8)
            sf = batch.sys_flag
            pos = (offs - seg) + 68 + np.where(sf & _BORN_V6, 20, 8) + np.where(sf & _STORE_V6, 20, 8)
            body = _be32(a, pos)
            del a
            size_hist += log2_histogram(body, SIZE_BINS)
            body_total += int(body.sum())
            body_max = max(body_max, int(body.max()))
            # index keys per message (the unique key and each KEYS piece)
            kc = np.bincount(batch.key_row, minlength=n) if batch.key_row.shape[0] else np.zeros(n, np.int64)
            h = np.bincount(kc)
            if h.shape[0] > keys_hist.shape[0]:
                h, keys_hist = keys_hist, h
            keys_hist[: h.shape[0]] += h
    if progress is not None:
        progress(max(end - start, 0), max(end - start, 0))

    topics = sorted(topic_gid, key=topic_gid.__getitem__)
    queues = sorted(queue_gid, key=queue_gid.__getitem__)
    nq = len(queues)
    traffic: dict[str, Any] = {"binMs": 0, "start": t_min, "bins": 0, "topics": {}, "queues": {}}
    q_msgs = np.zeros(nq, np.int64)
    q_bytes = np.zeros(nq, np.int64)
    if agg_key:
        keys = np.concatenate(agg_key)
        km = np.concatenate(agg_msgs)
        kb = np.concatenate(agg_bytes)
        qg_all = keys >> 40
        sec = keys & ((1 << 40) - 1)
        q_msgs = np.bincount(qg_all, weights=km, minlength=nq).astype(np.int64)
        q_bytes = np.bincount(qg_all, weights=kb, minlength=nq).astype(np.int64)
        assert t_min is not None and t_max is not None
        width, nbins = _time_bins(t_min, t_max)
        bins = np.minimum((sec * 1000 - (t_min // 1000) * 1000) // width, nbins - 1)
        bins = np.maximum(bins, 0)
        qnames = [f"{topics[t]}/{q}" for t, q in queues]
        q_topic = np.array([t for t, _ in queues], np.int64)
        t_bytes = np.bincount(q_topic, weights=q_bytes, minlength=len(topics))
        traffic = {
            "binMs": width, "start": (t_min // 1000) * 1000, "bins": nbins,
            "topics": {"messages": _series(topics, t_bytes, q_topic[qg_all], bins, km, nbins),
                       "bytes": _series(topics, t_bytes, q_topic[qg_all], bins, kb, nbins)},
            "queues": {"messages": _series(qnames, q_bytes.astype(np.float64), qg_all, bins, km, nbins),
                       "bytes": _series(qnames, q_bytes.astype(np.float64), qg_all, bins, kb, nbins)},
        }

    # ConsumeQueues: what they hold against what the CommitLog says
    queue_rows = []
    cq_end = -1
    last_cq_ts = -1
    cq_max: dict[tuple[str, int], int] = {}
    for (topic, qid), cq in sorted(store.consume_queues.items()):
        cq_max[(topic, qid)] = cq.max_offset_in_queue
        cq_end = max(cq_end, cq.max_physic_offset)
        if getattr(cq, "kind", "file") == "rocksdb":  # the RocksDB ConsumeQueue: its max entry's unit
            u = cq.get_unit(cq.max_offset_in_queue - 1) if cq.max_offset_in_queue > 0 else None
            if u is not None:
                last_cq_ts = max(last_cq_ts, cl.pickup_store_timestamp(u.commit_log_offset, u.size))
            continue
        last = cq.queue.last()
        if last is not None and last.wrote_position >= CQ_UNIT_SIZE:
            units = np.frombuffer(last.mm, dtype=CQ_DTYPE, count=last.wrote_position // CQ_UNIT_SIZE)
            real = np.flatnonzero(~((units["offset"] == 0) & (units["size"] == INT_MAX)))
            if real.shape[0]:
                u = units[int(real[-1])]
                last_cq_ts = max(last_cq_ts, cl.pickup_store_timestamp(int(u["offset"]), int(u["size"])))
            del units
    seen = set()
    for g, (t, q) in enumerate(queues):
        name = topics[t]
        seen.add((name, q))
        cqm = cq_max.get((name, q))
        nxt = cl_next_qoff.get(g)
        queue_rows.append({"topic": name, "queueId": q, "messages": int(q_msgs[g]), "bytes": int(q_bytes[g]),
                           "commitLogNextOffset": nxt, "consumeQueueMaxOffset": cqm,
                           "dispatchBehind": None if nxt is None else max(0, nxt - (cqm or 0))})
    for (name, q), cqm in sorted(cq_max.items()):
        if (name, q) not in seen:  # a queue with no traffic in the CommitLog (or only deleted segments)
            queue_rows.append({"topic": name, "queueId": q, "messages": 0, "bytes": 0, "commitLogNextOffset": None,
                               "consumeQueueMaxOffset": cqm, "dispatchBehind": 0})
    # consumer groups
    consumers: dict[str, Any] = {"file": None, "groups": [], "error": None}
    co_path = root / "config" / "consumerOffset.json"
    if co_path.is_file():
        consumers["file"] = str(co_path)
        try:
            table = consumer_offsets(root).table
        except CorruptDataError as exc:
            consumers["error"] = str(exc)
            table = {}
        for (topic, group), offs in sorted(table.items()):
            for qid, off in sorted(offs.items()):
                # a queue without a ConsumeQueue has max offset 0 (what the broker answers)
                mx = cq_max.get((topic, qid), 0)
                consumers["groups"].append({"group": group, "topic": topic, "queueId": qid, "offset": off,
                                            "maxOffset": mx, "lag": mx - off})
                if (topic, qid) not in seen and (topic, qid) not in cq_max:
                    seen.add((topic, qid))  # a queue consumers know of that has no traffic at all
                    queue_rows.append({"topic": topic, "queueId": qid, "messages": 0, "bytes": 0,
                                       "commitLogNextOffset": None, "consumeQueueMaxOffset": None,
                                       "dispatchBehind": 0})

    topic_rows = []
    for name in sorted({r["topic"] for r in queue_rows}):
        rows = [r for r in queue_rows if r["topic"] == name]
        topic_rows.append({"topic": name, "queues": len(rows), "messages": sum(r["messages"] for r in rows),
                           "bytes": sum(r["bytes"] for r in rows)})

    # IndexFiles
    index = _index_figures(store)

    cp = store.checkpoint.values
    checkpoint = {
        "physicMsgTimestamp": cp.physic_msg_timestamp, "lastCommitLogTimestamp": last_record_ts,
        "logicsMsgTimestamp": cp.logics_msg_timestamp, "lastConsumeQueueTimestamp": last_cq_ts,
        "indexMsgTimestamp": cp.index_msg_timestamp,
        "lastIndexTimestamp": max((f["endTimestamp"] for f in index["files"]), default=-1),
    }

    hours = cfg.file_reserved_time_hours if file_reserved_hours is None else file_reserved_hours
    segments = []
    for mf in cl.queue.files:
        st = seg_stats.get(mf.file_from_offset)
        mtime = int(mf.path.stat().st_mtime * 1000)
        segments.append({
            "name": mf.path.name, "fromOffset": mf.file_from_offset, "wrotePosition": mf.wrote_position,
            "messages": st["messages"] if st else 0, "bytes": st["bytes"] if st else 0,
            "firstStoreTimestamp": st["first"] if st else None, "lastStoreTimestamp": st["last"] if st else None,
            "minStoreTimestamp": st["min"] if st else None, "maxStoreTimestamp": st["max"] if st else None,
            "timeBackwards": st["backwards"] if st else 0,
            "modifiedMs": mtime, "expiresMs": mtime + int(hours * 3_600_000),
        })
    return {
        "layout": "rocketmq", "store": str(root),
        "commitLog": {"segmentSize": cl.file_size, "minOffset": start, "validEnd": end, "messages": messages,
                      "bytes": total_bytes, "firstStoreTimestamp": t_min, "lastStoreTimestamp": t_max,
                      "segments": segments, "timeBackwards": sum(s["timeBackwards"] for s in segments),
                      "timeBackwardsAt": backwards, "scanStoppedAt": stop_error},
        "topics": topic_rows, "queues": queue_rows, "traffic": traffic,
        "bodySize": {"edges": log2_edges(SIZE_BINS), "counts": size_hist.tolist(), "max": body_max,
                     "mean": round(body_total / messages, 1) if messages else 0},
        "keysPerMessage": {str(k): int(v) for k, v in enumerate(keys_hist.tolist()) if v},
        "dispatch": {"commitLogEnd": end, "consumeQueueEnd": cq_end,
                     "behindBytes": max(0, end - cq_end) if cq_end >= 0 else end - start,
                     "behindMessages": sum(r["dispatchBehind"] or 0 for r in queue_rows)},
        "consumers": consumers, "index": index, "checkpoint": checkpoint,
        "retention": {"fileReservedHours": hours, "oldestStoreTimestamp": t_min,
                      "oldestSegmentExpiresMs": segments[0]["expiresMs"] if segments else None},
    }


def _index_figures(store: RocketMQStore) -> dict[str, Any]:
    files = []
    chain_hist = np.zeros(1, np.int64)
    longest: list[dict[str, Any]] = []
    for f in store.index.files:
        h = f.header
        slots_n = f.buffer.hash_slot_num
        items_n = f.buffer.index_num
        count = max(1, min(h.index_count, items_n))
        slots = np.frombuffer(f.mm, dtype=">i4", count=slots_n, offset=40).astype(np.int64)
        items = np.frombuffer(f.mm, dtype=_ITEM_DTYPE, count=count, offset=40 + 4 * slots_n)
        used = (slots > 0) & (slots < count)
        heads = slots[used]
        depth = chain_depths(items["prev"])
        lengths = depth[heads]
        hist = np.bincount(lengths) if lengths.shape[0] else np.zeros(1, np.int64)
        if hist.shape[0] > chain_hist.shape[0]:
            hist, chain_hist = chain_hist, hist
        chain_hist[: hist.shape[0]] += hist
        hashes = np.abs(items["hash"][1:].astype(np.int64))
        item_slot = hashes % slots_n
        pairs = unique((item_slot << 32) | hashes)
        distinct = np.bincount(pairs >> 32, minlength=slots_n)
        collision_slots = int((distinct >= 2).sum())
        n_used = int(used.sum())
        files.append({
            "name": f.name, "beginTimestamp": h.begin_timestamp, "endTimestamp": h.end_timestamp,
            "slots": slots_n, "slotsUsed": n_used, "slotFill": round(n_used / slots_n, 6),
            "items": count - 1, "itemCapacity": items_n - 1, "itemFill": round((count - 1) / max(items_n - 1, 1), 6),
            "hashSlotCount": h.hash_slot_count, "maxChain": int(lengths.max(initial=0)),
            "meanChain": round(float(lengths.mean()), 3) if lengths.shape[0] else 0.0,
            "collisionSlots": collision_slots,
            "collisionRate": round(collision_slots / n_used, 6) if n_used else 0.0,
        })
        top = np.argsort(-lengths, kind="stable")[:TOP_CHAINS]
        used_slots = np.flatnonzero(used)
        for i in top.tolist():
            s = int(used_slots[i])
            members = np.flatnonzero(item_slot == s)
            uh, uc = unique(hashes[members], return_counts=True)
            order = np.argsort(-uc, kind="stable")[:5]
            longest.append({"file": f.name, "slot": s, "length": int(lengths[i]), "distinctHashes": int(uh.shape[0]),
                            "hashes": [{"hash": int(uh[j]), "items": int(uc[j])} for j in order.tolist()]})
        del slots, items
    longest.sort(key=lambda c: (-c["length"], c["file"], c["slot"]))
    total_used = sum(f["slotsUsed"] for f in files)
    return {
        "geometry": {"slots": store.config.hash_slot_num, "items": store.config.index_num},
        "files": files,
        "chainLengths": {str(k): int(v) for k, v in enumerate(chain_hist.tolist()) if v and k},
        "longestChains": longest[:TOP_CHAINS],
        "collisionRate": round(sum(f["collisionSlots"] for f in files) / total_used, 6) if total_used else 0.0,
    }


# ----------------------------------------------------------------------------- verify summary
_AT_OFFSET = re.compile(r"at offset (\d+)")


def report_with_verify(root: str | Path, config: StoreConfig | None = None, *, verify: bool = True,
                       progress: ProgressFn | None = None, file_reserved_hours: float | None = None,
                       then: Callable[[dict[str, Any]], Any] | None = None,
                       ) -> tuple[dict[str, Any], dict[str, Any] | None, Any]:
    """:func:`rocketmq_report` and (unless ``verify`` is false) :func:`verify_summary` of one store,
    computed side by side: the figures in a second thread while this one verifies.  Both are scans
    and checks in compiled or numpy code that release the GIL, each over its own read-only view of
    the store, so on two CPUs the report costs about the longer of the two plus the page instead of
    their sum (1 GiB store: 1.66-1.90x the time of verify alone, against 2.04-2.46x one after the
    other, measured under load).  ``then(figures)``, when given, runs in the figures' thread as soon
    as they are ready (the CLI draws the plots there) and its result is the third item returned.
    ``progress`` follows the verification (the longer part); an error of either is raised as it
    would be alone, the verification's first."""
    from concurrent.futures import ThreadPoolExecutor, wait

    def figures_then() -> tuple[dict[str, Any], Any]:
        report = rocketmq_report(root, config, file_reserved_hours=file_reserved_hours)
        return report, then(report) if then is not None else None

    if not verify:
        report, extra = figures_then()
        return report, None, extra
    with ThreadPoolExecutor(1, thread_name_prefix="mqstore-report") as pool:
        work = pool.submit(figures_then)
        try:
            summary = verify_summary(root, config, progress=progress)
        except BaseException:
            wait([work])  # its own error, if any, gives way to the verification's
            raise
        report, extra = work.result()
        return report, summary, extra


def verify_summary(root: str | Path, config: StoreConfig | None = None, *,
                   progress: ProgressFn | None = None) -> dict[str, Any]:
    """``verify`` of the store, its problems grouped by file: every CommitLog segment, every
    ConsumeQueue (``consumequeue/TOPIC/QUEUE``) and every IndexFile gets an entry, ``ok`` when no
    problem names it.  A CommitLog problem is placed in the segment holding the offset it names."""
    from mqstore.storage.rocketmq.verify import verify_store

    root = Path(root)
    rep = verify_store(root, config, progress=progress)
    seg_size = config.commit_log_file_size if config is not None else StoreConfig().commit_log_file_size
    files: dict[str, list[str]] = {}
    for p in sorted((root / "commitlog").glob("*")) if (root / "commitlog").is_dir() else []:
        if p.is_file() and p.name.isdigit():
            files[f"commitlog/{p.name}"] = []
    cq_base = root / "consumequeue"
    if cq_base.is_dir():
        for p in sorted(cq_base.glob("*/*")):
            if p.is_dir():
                files[f"consumequeue/{p.parent.name}/{p.name}"] = []
    if (root / "index").is_dir():
        for p in sorted((root / "index").iterdir()):
            if p.is_file() and p.name.isdigit():
                files[f"index/{p.name}"] = []
    from mqstore.storage.rocketmq.timeindex import TIMEINDEX_DIR

    tix_base = root / TIMEINDEX_DIR  # the sidecars of a queue: one entry, like its ConsumeQueue
    if tix_base.is_dir():
        for p in sorted(tix_base.glob("*/*")):
            if p.is_dir():
                files[f"{TIMEINDEX_DIR}/{p.parent.name}/{p.name}"] = []
    other: list[str] = []
    for text in rep.problems:
        head = text.split(":", 1)[0]
        if head == "commitlog":
            m = _AT_OFFSET.search(text)
            if m:
                files.setdefault(f"commitlog/{(int(m.group(1)) // seg_size) * seg_size:020d}", []).append(text)
            else:
                other.append(text)
        elif head in files:
            files[head].append(text)
        elif head.startswith(TIMEINDEX_DIR + "/") and head.rsplit("/", 1)[0] in files:
            files[head.rsplit("/", 1)[0]].append(text)
        else:
            other.append(text)
    return {"ok": rep.ok, "messages": rep.messages, "cqUnits": rep.cq_units, "indexItems": rep.index_items,
            "problems": len(rep.problems), "otherProblems": other,
            "files": [{"file": k, "ok": not v, "problems": v} for k, v in files.items()]}
