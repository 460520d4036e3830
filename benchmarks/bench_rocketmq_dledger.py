"""DLedger CommitLog against the classic one, on the same messages.

    python benchmarks/bench_rocketmq_dledger.py [--messages N] [--body BYTES] [--dir DIR] [--keep]

Writes N messages (default 200,000 of 512-byte bodies, about 130 MB) twice: as a classic store
(``MessageStore.put_batch``, dispatch off) and as a DLedger store (``DLedgerWriter``: the same
records, each in a 48-byte-header entry), both with 64 MiB segments / data files.  Then, in the same
process and after one warm-up pass over each, measures on each: the dispatch scan of the whole log, ``rebuild_indexes`` (ConsumeQueues
and IndexFiles into a fresh directory) and ``verify``-style CRC scan; every DLedger figure is
printed with its ratio to the classic one (the baseline).  Data goes under ``--dir`` (default
``/tmp/mqstore-bench-dledger``) and is deleted unless ``--keep``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from mqstore.api.rocketmq import MessageStore  # noqa: E402
from mqstore.formats.rocketmq.properties import encode_properties  # noqa: E402
from mqstore.formats.rocketmq.record import MessageRecord  # noqa: E402
from mqstore.storage.rocketmq.config import StoreConfig  # noqa: E402
from mqstore.storage.rocketmq.dledger import DLedgerWriter, open_commit_log  # noqa: E402
from mqstore.storage.rocketmq.layout import resolve_config  # noqa: E402
from mqstore.storage.rocketmq.rebuild import rebuild_indexes  # noqa: E402

SEG = 64 << 20


def records(n: int, body: int) -> list[MessageRecord]:
    payload = bytes(range(256)) * (body // 256 + 1)
    out = []
    for i in range(n):
        props = encode_properties({"KEYS": f"order-{i}", "TAGS": f"T{i % 8}", "UNIQ_KEY": f"U{i:016X}"})
        out.append(MessageRecord(topic=f"Topic{i % 4}", body=payload[i % 256 : i % 256 + body], queue_id=i % 8,
                                 born_timestamp=1_700_000_000_000 + i, store_timestamp=1_700_000_000_000 + i,
                                 properties_text=props))
    return out


def timed(fn) -> tuple[float, object]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def scan_all(root: Path, check_crc: bool) -> int:
    cl = open_commit_log(root, resolve_config(root))
    try:
        return sum(len(b) for b in cl.scan(cl.min_offset, cl.max_offset, check_crc=check_crc, max_records=1 << 16))
    finally:
        cl.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--body", type=int, default=512)
    ap.add_argument("--dir", type=Path, default=Path("/tmp/mqstore-bench-dledger"))
    ap.add_argument("--keep", action="store_true")
    a = ap.parse_args()
    base = a.dir
    shutil.rmtree(base, ignore_errors=True)
    classic, dledger = base / "classic", base / "dledger"
    try:
        recs = records(a.messages, a.body)
        cfg = StoreConfig(commit_log_file_size=SEG, background_services=False, dispatch_enabled=False)
        with MessageStore.open(classic, cfg) as s:
            t_put, _ = timed(lambda: [s.engine.append(recs[i : i + 1000]) for i in range(0, len(recs), 1000)])
        w = DLedgerWriter(dledger, file_size=SEG, term=1)
        t_dl, _ = timed(lambda: w.append(recs))
        w.close()
        print(f"{a.messages} messages of {a.body} bytes; write: classic {t_put:.2f} s, DLedger writer {t_dl:.2f} s")
        for r in (classic, dledger):  # compile and cache the kernels, warm the page cache
            scan_all(r, True)
        rows = []
        for name, fn in (
            ("dispatch scan", lambda r: scan_all(r, False)),
            ("scan with body CRC", lambda r: scan_all(r, True)),
            ("rebuild-index --out", lambda r: rebuild_indexes(r, base / f"out-{r.name}", threads=1).messages),
        ):
            tc, nc = timed(lambda fn=fn: fn(classic))
            td, nd = timed(lambda fn=fn: fn(dledger))
            assert nc == nd == a.messages, (name, nc, nd)
            rows.append((name, tc, td))
            print(f"{name:22s} classic {tc:7.3f} s ({a.messages / tc / 1e6:5.2f} M msg/s)   DLedger {td:7.3f} s "
                  f"({a.messages / td / 1e6:5.2f} M msg/s)   ratio DLedger/classic {td / tc:5.2f}x")
        t_open, _ = timed(lambda: MessageStore.open(dledger, read_only=True).close())
        print(f"open read-only (entry walk) of the DLedger store: {t_open:.3f} s "
              f"({a.messages / t_open / 1e6:.2f} M entries/s)")
    finally:
        if not a.keep:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
