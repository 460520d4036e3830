"""Benchmarks of Kafka transactions (read_committed and the .txnindex replay).

    python benchmarks/bench_kafka_txn.py [--batches N]   (default 200000 batches)

Columns of N batches from 8 interleaved transactional producers (a third of the transactions
aborted) and plain batches.  Printed with ratios against baselines measured in the same process:
the pure-Python twins of the vectorised kernels (``classify_batches_py``; a per-row range test
for ``in_ranges``; the per-batch broker replay ``ProducerStateReplay`` for
``aborted_transactions``).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from mqstore.kernels.kafka.txn import (  # noqa: E402
    ProducerStateReplay,
    aborted_transactions,
    classify_batches,
    classify_batches_py,
    excluded_ranges,
    in_ranges,
)


def columns(n: int, seed: int = 7) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    pid = np.full(n, -1, np.int64)
    attrs = np.zeros(n, np.int64)
    marker = np.full(n, -1, np.int64)
    open_len = np.zeros(8, np.int64)
    for i in range(n):
        p = int(rng.integers(0, 9))
        if p == 8:
            continue  # a plain batch
        pid[i] = 1000 + p
        if open_len[p] >= 3 and rng.random() < 0.4:
            attrs[i] = 0x30
            marker[i] = 0 if rng.random() < 1 / 3 else 1
            open_len[p] = 0
        else:
            attrs[i] = 0x10
            open_len[p] += 1
    base = np.arange(n, dtype=np.int64) * 4
    return {"pid": pid, "attrs": attrs, "marker": marker, "base": base, "last": base + np.where(attrs & 0x20, 0, 3)}


def timed(fn, *a):  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    out = fn(*a)
    return time.perf_counter() - t, out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, default=200_000)
    n = ap.parse_args().batches
    c = columns(n)
    classify_batches(c["pid"][:100], c["attrs"][:100], c["marker"][:100])  # warm-up
    t_fast, st = timed(classify_batches, c["pid"], c["attrs"], c["marker"])
    t_py, st_py = timed(classify_batches_py, c["pid"], c["attrs"], c["marker"])
    assert np.array_equal(st, st_py)
    print(f"classify_batches  {n} batches: {t_fast * 1e3:8.1f} ms   python twin {t_py * 1e3:8.1f} ms   "
          f"ratio {t_py / t_fast:6.1f}x")
    s, e = excluded_ranges(c["base"], c["last"], st)
    offsets = np.arange(0, int(c["last"][-1]) + 1, dtype=np.int64)
    t_mask, _ = timed(in_ranges, offsets, s, e)
    sample = offsets[:: max(1, offsets.shape[0] // 20_000)]
    t_loop, _ = timed(lambda: [bool(((s <= o) & (o <= e)).any()) for o in sample.tolist()])
    per_row_loop = t_loop / sample.shape[0]
    print(f"in_ranges         {offsets.shape[0]} rows: {t_mask * 1e3:8.1f} ms   per-row numpy loop (extrapolated) "
          f"{per_row_loop * offsets.shape[0] * 1e3:8.1f} ms   ratio {per_row_loop * offsets.shape[0] / t_mask:6.1f}x")

    def replay() -> int:
        r = ProducerStateReplay()
        k = 0
        for i in np.nonzero(c["pid"] >= 0)[0].tolist():
            if r.append(base_offset=int(c["base"][i]), last_offset=int(c["last"][i]), producer_id=int(c["pid"][i]),
                        epoch=0, last_sequence=0, max_timestamp=0, transactional=True,
                        control=bool(c["attrs"][i] & 0x20), marker=int(c["marker"][i])) is not None:
                k += 1
        return k

    t_rep, aborted = timed(replay)
    t_vec, (_rows, txns) = timed(aborted_transactions, c["base"], c["pid"], c["attrs"], c["marker"])
    assert len(txns) == aborted
    print(f".txnindex entries {n} batches: aborted_transactions {t_vec * 1e3:8.1f} ms   per-batch "
          f"ProducerStateReplay {t_rep * 1e3:8.1f} ms   ratio {t_rep / t_vec:6.1f}x   ({aborted} aborted txns)")


if __name__ == "__main__":
    main()
