"""Before/after of the single ``put`` and of ``query_by_key`` in one process (issue 15).

    python benchmarks/bench_put_query_ab.py --base-src OLD/src put [--messages N] [--rounds R]
    python benchmarks/bench_put_query_ab.py --base-src OLD/src query STORE SEGMENT_BYTES [--rounds R]
    python benchmarks/bench_put_query_ab.py --base-src OLD/src put-batch [--messages N] [--rounds R]

``OLD/src`` is the ``src`` directory of an earlier checkout (e.g. ``git archive 947c608 src | tar -x
-C /tmp/old``).  The functions of the path being measured are taken from its text and executed over
this tree's modules, so both versions run in the same process on the same data and the ratio does
not depend on the machine's load at the time of each run: ``put`` swaps ``MessageStore.put``;
``query`` swaps ``MessageStore.query_by_key`` and ``_query_by_key`` (with the old eager ``_messages_of_matches``),
``IndexService.exact_matches`` and ``RocketMQStore.dispatch_pending``.  Rounds alternate old/new;
the figures are medians (query: CPU time of the thread; put: wall and process CPU of fresh stores
under ``/tmp``, async flush, background services on, 1 KiB bodies, KEYS + TAGS + generated
UNIQ_KEY, 8 queues).  ``query`` first checks that both give equal results on 500 keys.
``put-batch`` (``put_batch`` of 1000 dicts) compares the store's two batch encoders in this tree:
old = the column encoder (bodies joined, ``crc32_spans``, ``put.encode_records_into``; what every
batch took before the native list encoder), new = ``put_one.encode_common_into``.  ``put-batch-gather`` compares ``put_batch`` with the dicts' fields
gathered by C-level passes (old) and by one native pass (``put_one.gather_plain``, new).
``put-batch-text`` compares ``put_batch`` with the keys and tags columns
built by C-level passes (old) and by one native pass (``put.text_column``, new).
``put-batch-main`` compares ``put_batch`` of the base version (its ``_put_fast``,
``_text_column`` and ``_assign_queue_offsets`` texts, on this tree's native kernels) with this tree's.
``put-batch-scan`` compares ``put_batch`` with the reput scan's columns sized for 160-byte rows
(old) and for half the mean record size seen (new, ``scan.LEARN_ROW_BYTES``); ``put-batch-cq``
with the reput's ConsumeQueue appends through the mapping below 16 KiB (old) and all through the
file (new, ``consumequeue.APPEND_THROUGH_FILE``); ``put-batch-dispatch`` both together.  ``put-columns-gather`` compares ``put_columns`` with its
bodies, queue ids and flags checked by C-level passes (old) and one native pass (new,
``put_one.gather_columns``).  Every ``put-batch*`` mode also gives the CPU per
message of the reput thread.
``query-direct`` compares the base version's ``query_by_key`` text (Python argument checks, then the
native whole-query call) with this tree's (``key_match.KeyQuery``, the checks in the same native
call), both on this tree's native modules: rounds of the same 20,000 keys alternating, thread CPU
per call.
``put-batch-base`` compares ``put_batch`` of the base version
(its ``_put_fast`` text, ``build_common_props`` and ``queue_ranks`` on numba, as they were) with this
tree's (native properties and queue ranks), both on the native encoder.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import textwrap
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from mqstore import MessageStore, StoreConfig  # noqa: E402
from mqstore.api import rocketmq as api  # noqa: E402
from mqstore.storage.rocketmq import index as index_mod  # noqa: E402
from mqstore.storage.rocketmq import store as store_mod  # noqa: E402


def grab(path: Path, start: str, stop: str, ns: dict[str, Any]) -> dict[str, Any]:
    """Execute the text of ``path`` from ``start`` to ``stop`` (a function, dedented) in ``ns``."""
    src = path.read_text()
    a = src.index(start)
    b = src.index(stop, a)
    exec("from __future__ import annotations\n" + textwrap.dedent(src[a:b]), ns)
    return ns


def bench_put(base: Path, n: int, rounds: int) -> None:
    """The base version's ``MessageStore.put`` and ``RocketMQStore.append_common`` (its locked
    section in Python) against this tree's ``put`` (one native ``put_one.put_plain`` call)."""
    import numpy as np

    from mqstore.kernels.rocketmq import put_one

    ns = dict(vars(store_mod))
    ns["_encode_one_v1"] = put_one.encode_one_v1  # what the base version's section called
    old_common = grab(base / "mqstore/storage/rocketmq/store.py", "    def append_common(self, topic: str",
                      "    def append_columns(", ns)["append_common"]
    api._UniqKeyGenerator().next(0)  # fills api._HEX4 (a module global the copied namespace must see filled)
    ans = dict(vars(api))
    ans["_ONE_V1_FIXED"] = put_one.ONE_V1_FIXED
    old_put = grab(base / "mqstore/api/rocketmq.py", "    def put(self, topic: str, body: bytes",
                   "    def _put_checked(", ans)["put"]
    new_put = MessageStore.put

    def on_open(s: MessageStore, mode: str) -> None:
        if mode == "old":
            s.engine.append_common = types.MethodType(old_common, s.engine)  # type: ignore[method-assign]
    body = np.random.default_rng(5).bytes(1024)
    keys = [f"order-{i} user-{i % 977}" for i in range(n)]
    res: dict[str, list[tuple[float, float, float]]] = {"old": [], "new": []}
    for r in range(rounds):
        for mode in ("old", "new") if r % 2 == 0 else ("new", "old"):
            MessageStore.put = old_put if mode == "old" else new_put  # type: ignore[method-assign]
            d = Path(tempfile.mkdtemp(prefix="mqstore-ab-", dir="/tmp"))
            try:
                with MessageStore.open(d / "store", StoreConfig(hash_slot_num=500_000, index_num=2_000_000)) as s:
                    on_open(s, mode)
                    s.put("BenchTopic", b"w", keys="w")
                    s.flush()
                    s.engine.commit_log.warm_ahead()
                    put = s.put
                    t, c, th = time.perf_counter(), time.process_time(), time.thread_time()
                    for i in range(n):
                        put("BenchTopic", body, i & 7, keys=keys[i], tags="TagA")
                    res[mode].append((n / (time.perf_counter() - t), n / (time.process_time() - c),
                                      n / (time.thread_time() - th)))
            finally:
                MessageStore.put = new_put  # type: ignore[method-assign]
                shutil.rmtree(d, ignore_errors=True)
    ow, nw = (statistics.median(x[0] for x in res[m]) for m in ("old", "new"))
    oc, nc = (statistics.median(x[1] for x in res[m]) for m in ("old", "new"))
    ot, nt = (statistics.median(x[2] for x in res[m]) for m in ("old", "new"))
    print(f"put, single (1 KiB, async): old {ow:,.0f} msgs/s, new {nw:,.0f} msgs/s wall ({nw / ow:.2f}x); "
          f"per process CPU-s old {oc:,.0f}, new {nc:,.0f} ({nc / oc:.2f}x); per CPU-s of the putting thread old "
          f"{ot:,.0f} ({1e6 / ot:.2f} us), new {nt:,.0f} ({1e6 / nt:.2f} us) ({nt / ot:.2f}x); {rounds} rounds of {n:,}")


def _thread_cpu(native_id: int) -> float:
    """CPU seconds (user + system) of a thread of this process, from ``/proc`` (Linux)."""
    with open(f"/proc/self/task/{native_id}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ab_put_batch(label: str, use: Callable[[str], None], n: int, rounds: int,
                  on_open: Callable[[MessageStore, str], None] | None = None, *, columns: bool = False) -> None:
    """``put_batch`` of 1000 dicts of 1 KiB in fresh stores, ``use("old")`` / ``use("new")``
    alternating (the order swapped every round; ``use("new")`` again at the end; ``on_open(store,
    mode)`` after each open): medians of wall and process-CPU throughput and their ratios, the
    CPU per message of the putting thread and of the reput thread (the dispatch up to the
    round's end included: ``flush`` dispatches what is left).  ``columns``: ``put_columns`` of
    the same 1000 messages per call instead (one topic, a list of bodies, of queue ids and of
    keys, one tag)."""
    import numpy as np

    body = np.random.default_rng(5).bytes(1024)
    dicts = [{"topic": "BenchTopic", "body": body, "queue_id": i & 7, "keys": f"order-{i} user-{i % 977}",
              "tags": "TagA"} for i in range(n)]
    bodies, qids, keys = [body] * 1000, [d["queue_id"] for d in dicts], [d["keys"] for d in dicts]
    res: dict[str, list[tuple[float, float, float, float]]] = {"old": [], "new": []}
    for r in range(rounds):
        for mode in ("old", "new") if r % 2 == 0 else ("new", "old"):
            use(mode)
            d = Path(tempfile.mkdtemp(prefix="mqstore-ab-", dir="/tmp"))
            try:
                with MessageStore.open(d / "store", StoreConfig(hash_slot_num=500_000, index_num=2_000_000)) as s:
                    if on_open is not None:
                        on_open(s, mode)
                    s.put_batch(dicts[:4])
                    s.flush()
                    s.engine.commit_log.warm_ahead()
                    reput = next(t.native_id for t in s.engine._threads if t.name == "mqstore-reput")
                    t, c, th = time.perf_counter(), time.process_time(), time.thread_time()
                    c_reput = _thread_cpu(reput)
                    if columns:
                        for i in range(0, n, 1000):
                            s.put_columns("BenchTopic", bodies, qids[i : i + 1000], keys=keys[i : i + 1000], tags="TagA")
                    else:
                        for i in range(0, n, 1000):
                            s.put_batch(dicts[i : i + 1000])
                    wall, cpu, tcpu = time.perf_counter() - t, time.process_time() - c, time.thread_time() - th
                    s.engine.dispatch_pending()
                    res[mode].append((n / wall, n / cpu, n / tcpu, (_thread_cpu(reput) - c_reput) / n))
            finally:
                use("new")
                shutil.rmtree(d, ignore_errors=True)
    ow, nw = (statistics.median(x[0] for x in res[m]) for m in ("old", "new"))
    oc, nc = (statistics.median(x[1] for x in res[m]) for m in ("old", "new"))
    ot, nt = (statistics.median(x[2] for x in res[m]) for m in ("old", "new"))
    orp, nrp = (statistics.median(x[3] for x in res[m]) * 1e6 for m in ("old", "new"))
    print(f"{label}, 1000 {'per put_columns' if columns else 'dicts'} (1 KiB, async): old {ow:,.0f} msgs/s, new {nw:,.0f} msgs/s wall ({nw / ow:.2f}x); "
          f"per process CPU-s old {oc:,.0f}, new {nc:,.0f} ({nc / oc:.2f}x); putting thread old {1e6 / ot:.2f} us, "
          f"new {1e6 / nt:.2f} us per message ({nt / ot:.2f}x); reput thread old {orp:.2f} us, new {nrp:.2f} us "
          f"per message (the dispatch of the round, its page warming included); {rounds} rounds of {n:,}")


def bench_put_batch(n: int, rounds: int) -> None:
    native = api.encode_common_into
    if native is None:
        raise SystemExit("the native module is not built: nothing to compare")

    def use(mode: str) -> None:
        api.encode_common_into = None if mode == "old" else native  # type: ignore[assignment]

    _ab_put_batch("put_batch", use, n, rounds)


def bench_put_batch_gather(n: int, rounds: int) -> None:
    gather = api._gather_plain
    if gather is None:
        raise SystemExit("the native module is not built: nothing to compare")

    def use(mode: str) -> None:
        api._gather_plain = None if mode == "old" else gather  # type: ignore[assignment]

    _ab_put_batch("put_batch, fields gathered in one C pass", use, n, rounds)


def bench_put_batch_base(base: Path, n: int, rounds: int) -> None:
    from mqstore.kernels.rocketmq import put as put_mod

    old_fast = grab(base / "mqstore/api/rocketmq.py", "    def _put_fast(self, topic: list[Any]", "    def put_batch(",
                    dict(vars(api)))["_put_fast"]
    new_fast = MessageStore._put_fast
    kernels = {"old": (put_mod.build_common_props_numba, put_mod.queue_ranks_numba),
               "new": (put_mod.build_common_props, put_mod.queue_ranks)}

    def use(mode: str) -> None:
        MessageStore._put_fast = old_fast if mode == "old" else new_fast  # type: ignore[method-assign]
        put_mod.build_common_props, put_mod.queue_ranks = kernels[mode]  # type: ignore[assignment]

    _ab_put_batch("put_batch vs base", use, n, rounds)


def bench_put_batch_text(n: int, rounds: int) -> None:
    """``put_batch`` with the keys and tags columns built by C-level passes (old, what main had)
    and by one native pass (``put.text_column``, new)."""
    from mqstore.kernels.rocketmq import put as put_mod

    new = api._text_column
    if put_mod.text_column is not put_mod.text_column_native:
        raise SystemExit("the native module is not built: nothing to compare")

    def use(mode: str) -> None:
        api._text_column = put_mod.text_column_passes if mode == "old" else new  # type: ignore[assignment]

    _ab_put_batch("put_batch, keys/tags columns in one C pass", use, n, rounds)


def bench_put_batch_main(base: Path, n: int, rounds: int) -> None:
    """``put_batch`` of the base version (its ``_put_fast`` and ``_text_column`` texts and the
    store's ``_assign_queue_offsets``, on this tree's native kernels) against this tree's."""
    ans = dict(vars(api))
    grab(base / "mqstore/api/rocketmq.py", "def _text_column(values", "def _check_text(", ans)
    old_fast = grab(base / "mqstore/api/rocketmq.py", "    def _put_fast(self, topic: list[Any]", "    def put_batch(",
                    ans)["_put_fast"]
    old_assign = grab(base / "mqstore/storage/rocketmq/store.py", "    def _assign_queue_offsets(self,",
                      "    def _assign_queue_offsets_sorted(", dict(vars(store_mod)))["_assign_queue_offsets"]
    impls = {"old": (old_fast, old_assign),
             "new": (MessageStore._put_fast, store_mod.RocketMQStore._assign_queue_offsets)}

    def use(mode: str) -> None:
        MessageStore._put_fast, store_mod.RocketMQStore._assign_queue_offsets = impls[mode]  # type: ignore[method-assign]

    _ab_put_batch("put_batch vs base (native kernels both)", use, n, rounds)


def bench_put_batch_scan(n: int, rounds: int) -> None:
    """``put_batch`` with the reput scan's columns sized for rows of 160 bytes (old) and for half
    the mean record size seen (new, ``scan.LEARN_ROW_BYTES``)."""
    from mqstore.kernels.rocketmq import scan as scan_mod

    def use(mode: str) -> None:
        scan_mod.LEARN_ROW_BYTES = mode == "new"

    _ab_put_batch("put_batch, reput scan columns sized from the records seen", use, n, rounds)


def bench_put_batch_cq(n: int, rounds: int) -> None:
    """``put_batch`` with the reput's ConsumeQueue appends through the mapping below 16 KiB
    (old) and all through the file (new, ``consumequeue.APPEND_THROUGH_FILE``)."""
    from mqstore.storage.rocketmq import consumequeue as cq_mod

    def use(mode: str) -> None:
        cq_mod.APPEND_THROUGH_FILE = mode == "new"

    _ab_put_batch("put_batch, ConsumeQueue appends through the file", use, n, rounds)


def bench_put_batch_dispatch(n: int, rounds: int) -> None:
    """``put_batch`` with both dispatch changes off (old) and on (new): ``put-batch-cq`` and
    ``put-batch-scan`` together."""
    from mqstore.kernels.rocketmq import scan as scan_mod
    from mqstore.storage.rocketmq import consumequeue as cq_mod

    def use(mode: str) -> None:
        cq_mod.APPEND_THROUGH_FILE = scan_mod.LEARN_ROW_BYTES = mode == "new"

    _ab_put_batch("put_batch, the dispatch changes (ConsumeQueue through the file, scan columns)", use, n, rounds)


def bench_put_columns_gather(n: int, rounds: int) -> None:
    """``put_columns`` with its bodies, queue ids and flags checked by C-level passes (old) and by
    one native pass (new, ``put_one.gather_columns``)."""
    from mqstore.kernels.rocketmq import put_one

    if put_one.gather_columns_native is None:
        raise SystemExit("the native module is not built: nothing to compare")

    def use(mode: str) -> None:
        api._gather_columns = put_one.gather_columns_passes if mode == "old" else put_one.gather_columns_native

    _ab_put_batch("put_columns, columns checked in one C pass", use, n, rounds, columns=True)


def _query_keys(s: MessageStore) -> list[tuple[str, str]]:
    """The bench row's 20,000 (topic, key) pairs: the first key of messages spread over the first
    64 MiB of the store (as bench_commands' query row picks them)."""
    cl = s.engine.commit_log
    batch = next(cl.scan(0, min(cl.max_offset, 64 << 20)))
    picks = batch.commit_log_offset[:: max(1, len(batch) // 20000)][:20000]
    return [(m.topic, m.keys[0]) for m in (s.get_by_offset(o, check_crc=False) for o in picks.tolist())]


def bench_query(base: Path, root: str, seg: int, rounds: int) -> None:
    from mqstore.formats.rocketmq import properties
    from mqstore.kernels.rocketmq import chain_walk, columns, key_match

    ans = dict(vars(api))
    ans.update({"_" + k: getattr(columns, k) for k in ("F_BODY_START", "F_BODY_LEN", "F_PROPS_START", "F_PROPS_LEN")})
    ans["parse_properties"] = properties.parse_properties
    for start, stop in (("def _message_of(", "_MESSAGE_FIELDS = ("), ("def _messages_of_matches(", "class KeyOffsets:"),
                        ("    def query_by_key(self, topic: str", "    def iter_query_by_key("),
                        ("    def _query_by_key(self, topic: str", "    def _query_by_key_records(")):
        grab(base / "mqstore/api/rocketmq.py", start, stop, ans)
    ins = dict(vars(index_mod))
    ins.update({k: getattr(key_match, k) for k in ("EXACT_ROOM", "EXACT_UNCLEAN", "MATCH_COLUMNS", "exact_key_files")})
    ins["SELECT_FILES_CYCLE"] = chain_walk.SELECT_FILES_CYCLE
    # the old exact_matches calls the kernel it finds in ``_WALKS``: give it the numba kernel (what it
    # ran on before the native one), whatever this tree binds ``key_match.exact_key_files`` to
    old_km = types.SimpleNamespace(**{k: getattr(key_match, k) for k in ("EXACT_ROOM", "EXACT_UNCLEAN", "MATCH_COLUMNS")},
                                   exact_key_files=key_match.exact_key_files_numba)  # fmt: skip
    ins["_WALKS"] = [chain_walk, old_km]
    ins["exact_key_files"] = key_match.exact_key_files_numba
    grab(base / "mqstore/storage/rocketmq/index.py", "    def exact_matches(self, topic: str", "    def _make_plan(", ins)
    sns = grab(base / "mqstore/storage/rocketmq/store.py", "    def dispatch_pending(self)", "    def _dispatch_range(",
               dict(vars(store_mod)))
    impls = {"old": (ans["query_by_key"], ans["_query_by_key"], ins["exact_matches"], sns["dispatch_pending"]),
             "new": (MessageStore.query_by_key, MessageStore._query_by_key, index_mod.IndexService.exact_matches,
                     store_mod.RocketMQStore.dispatch_pending)}

    pools: list[Any] = []

    def use(name: str) -> None:
        qk, q, em, dp = impls[name]
        MessageStore.query_by_key = qk  # type: ignore[method-assign]
        MessageStore._query_by_key = q  # type: ignore[method-assign]
        index_mod.IndexService.exact_matches = em  # type: ignore[method-assign]
        store_mod.RocketMQStore.dispatch_pending = dp  # type: ignore[method-assign]
        for ix in pools:  # the versions pool different buffers: start each one's rounds empty
            ix._match_pool.clear()

    with MessageStore.open(root, StoreConfig(commit_log_file_size=seg, background_services=False), read_only=True) as s:
        s.engine.index._topic_bytes = {}  # type: ignore[attr-defined]  # the old exact_matches' cache
        pools.append(s.engine.index)
        keys = _query_keys(s)
        try:
            got = {}
            for name in ("old", "new"):
                use(name)
                for t, k in keys[:3000]:
                    s.query_by_key(t, k)
                got[name] = [s.query_by_key(t, k) for t, k in keys[:500]]
            if got["old"] != got["new"]:
                raise SystemExit("old and new query_by_key differ")
            rates: dict[str, list[float]] = {"old": [], "new": []}
            for r in range(rounds):
                part = keys[(r % 10) * 2000 : (r % 10 + 1) * 2000]
                for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
                    use(name)
                    q = s.query_by_key
                    c = time.thread_time()
                    for t, k in part:
                        q(t, k)
                    rates[name].append(len(part) / (time.thread_time() - c))
        finally:
            use("new")
    mo, mn = statistics.median(rates["old"]), statistics.median(rates["new"])
    print(f"query_by_key, exact, single key: old {mo:,.0f}/s, new {mn:,.0f}/s CPU ({mn / mo:.2f}x); best rounds "
          f"{max(rates['old']):,.0f} / {max(rates['new']):,.0f}; {rounds} rounds of 2,000 keys")


def bench_query_direct(base: Path, root: str, seg: int, rounds: int) -> None:
    """The base version's ``MessageStore.query_by_key`` (its text: argument checks in Python, then the
    native whole-query call) against this tree's (``key_match.KeyQuery``: the checks in the same
    native call), on this tree's native modules, rounds of the same 20,000 keys alternating."""
    ans = dict(vars(api))
    old_q = grab(base / "mqstore/api/rocketmq.py", "    def query_by_key(self, topic: str",
                 "    _query_by_key = query_by_key", ans)["query_by_key"]
    impls = {"old": old_q, "new": MessageStore.query_by_key}
    with MessageStore.open(root, StoreConfig(commit_log_file_size=seg, background_services=False), read_only=True) as s:
        keys = _query_keys(s)
        try:
            got = {}
            for name in ("old", "new"):
                MessageStore.query_by_key = impls[name]  # type: ignore[method-assign]
                got[name] = [s.query_by_key(t, k) for t, k in keys[:3000]]
            if got["old"] != got["new"]:
                raise SystemExit("old and new query_by_key differ")
            us: dict[str, list[float]] = {"old": [], "new": []}
            for r in range(rounds):
                for name in ("old", "new") if r % 2 == 0 else ("new", "old"):
                    MessageStore.query_by_key = impls[name]  # type: ignore[method-assign]
                    q = s.query_by_key
                    c = time.thread_time()
                    for t, k in keys:
                        q(t, k)
                    us[name].append((time.thread_time() - c) / len(keys) * 1e6)
        finally:
            MessageStore.query_by_key = impls["new"]  # type: ignore[method-assign]
    mo, mn = statistics.median(us["old"]), statistics.median(us["new"])
    ratios = [o / n for o, n in zip(us["old"], us["new"], strict=True)]
    print(f"query_by_key, exact, single key: old {mo:.3f} us, new {mn:.3f} us CPU per call ({1e6 / mo:,.0f} -> "
          f"{1e6 / mn:,.0f}/s, {mo / mn:.2f}x; median of the rounds' ratios {statistics.median(ratios):.2f}x); "
          f"best rounds {min(us['old']):.3f} / {min(us['new']):.3f} us; {rounds} rounds of {len(keys):,} keys")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-src", type=Path, required=True, help="the src directory of the earlier version")
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("put")
    p.add_argument("--messages", type=int, default=50_000)
    p.add_argument("--rounds", type=int, default=6)
    pb = sub.add_parser("put-batch")
    pb.add_argument("--messages", type=int, default=200_000)
    pb.add_argument("--rounds", type=int, default=6)
    pbg = sub.add_parser("put-batch-gather")
    pbg.add_argument("--messages", type=int, default=200_000)
    pbg.add_argument("--rounds", type=int, default=6)
    pbb = sub.add_parser("put-batch-base")
    pbb.add_argument("--messages", type=int, default=200_000)
    pbb.add_argument("--rounds", type=int, default=6)
    pbt = sub.add_parser("put-batch-text")
    pbt.add_argument("--messages", type=int, default=200_000)
    pbt.add_argument("--rounds", type=int, default=6)
    pbm = sub.add_parser("put-batch-main")
    pbm.add_argument("--messages", type=int, default=200_000)
    pbm.add_argument("--rounds", type=int, default=6)
    pcg = sub.add_parser("put-columns-gather")
    pcg.add_argument("--messages", type=int, default=200_000)
    pcg.add_argument("--rounds", type=int, default=6)
    pbd = sub.add_parser("put-batch-dispatch")
    pbd.add_argument("--messages", type=int, default=200_000)
    pbd.add_argument("--rounds", type=int, default=6)
    pbc = sub.add_parser("put-batch-cq")
    pbc.add_argument("--messages", type=int, default=200_000)
    pbc.add_argument("--rounds", type=int, default=6)
    pbs = sub.add_parser("put-batch-scan")
    pbs.add_argument("--messages", type=int, default=200_000)
    pbs.add_argument("--rounds", type=int, default=6)
    q = sub.add_parser("query")
    q.add_argument("store")
    q.add_argument("segment_bytes", type=int)
    q.add_argument("--rounds", type=int, default=40)
    qd = sub.add_parser("query-direct")
    qd.add_argument("store")
    qd.add_argument("segment_bytes", type=int)
    qd.add_argument("--rounds", type=int, default=41)
    args = ap.parse_args()
    if args.what == "put":
        bench_put(args.base_src, args.messages, args.rounds)
    elif args.what == "put-batch":
        bench_put_batch(args.messages, args.rounds)
    elif args.what == "put-batch-gather":
        bench_put_batch_gather(args.messages, args.rounds)
    elif args.what == "put-batch-text":
        bench_put_batch_text(args.messages, args.rounds)
    elif args.what == "put-batch-main":
        bench_put_batch_main(args.base_src, args.messages, args.rounds)
    elif args.what == "put-columns-gather":
        bench_put_columns_gather(args.messages, args.rounds)
    elif args.what == "put-batch-dispatch":
        bench_put_batch_dispatch(args.messages, args.rounds)
    elif args.what == "put-batch-cq":
        bench_put_batch_cq(args.messages, args.rounds)
    elif args.what == "put-batch-scan":
        bench_put_batch_scan(args.messages, args.rounds)
    elif args.what == "put-batch-base":
        bench_put_batch_base(args.base_src, args.messages, args.rounds)
    elif args.what == "query-direct":
        bench_query_direct(args.base_src, args.store, args.segment_bytes, args.rounds)
    else:
        bench_query(args.base_src, args.store, args.segment_bytes, args.rounds)


if __name__ == "__main__":
    main()
