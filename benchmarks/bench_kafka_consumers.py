"""Benchmark of the offline ``__consumer_offsets`` replay (``mqstore kafka consumers``).

    python benchmarks/bench_kafka_consumers.py [--commits N]   (default 200000)

Writes one ``__consumer_offsets-0`` partition of N offset commits (batches of 100, 50 groups × 32
partitions) under ``benchmarks/data/kafka-consumers/`` (gitignored) and times
``consumer_groups`` against a baseline measured in the same process: the same replay done record
by record with the generic schema decoder (what the compiled kernels replace).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from mqstore.formats.kafka import SimpleRecord, encode_batch, iter_records  # noqa: E402
from mqstore.formats.kafka.batch import decode_batch_header, walk_batches  # noqa: E402
from mqstore.formats.kafka.coordinator_records import (  # noqa: E402
    decode_coordinator_record,
    encode_coordinator_key,
    encode_coordinator_value,
)
from mqstore.storage.kafka.internal import consumer_groups  # noqa: E402
from mqstore.storage.kafka.log import PartitionLog  # noqa: E402


def build(root: Path, commits: int) -> None:
    shutil.rmtree(root, ignore_errors=True)
    with PartitionLog.open(root / "orders-0") as log:
        log.append_records([SimpleRecord(value=b"x")] * 10)
    with PartitionLog.open(root / "__consumer_offsets-0") as log:
        for b in range(commits // 100):
            recs = []
            for i in range(100):
                k = encode_coordinator_key("offsets", 1, {"group": f"g{i % 50}", "topic": "orders",
                                                          "partition": i % 32})
                v = encode_coordinator_value("offsets", 1, 3, {"offset": b * 100 + i, "leaderEpoch": 0,
                                                               "metadata": "", "commitTimestamp": 1})
                recs.append(SimpleRecord(value=v, key=k, timestamp=1))
            log.append(encode_batch(recs))


def baseline(root: Path) -> int:
    state: dict[tuple[str, str, int], int] = {}
    for f in sorted((root / "__consumer_offsets-0").glob("*.log")):
        data = f.read_bytes()
        for ref in walk_batches(data):
            h = decode_batch_header(data, ref.position)
            for r in iter_records(data, h):
                d = decode_coordinator_record("offsets", r.key, r.value)
                k = d["key"]
                state[(k["group"], k["topic"], k["partition"])] = d["value"]["offset"]
    return len(state)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--commits", type=int, default=200_000)
    args = ap.parse_args()
    root = ROOT / "data" / "kafka-consumers"
    build(root, args.commits)
    consumer_groups(root)  # compile / warm the caches
    t = time.perf_counter()
    rep = consumer_groups(root)
    fast = time.perf_counter() - t
    n_fast = sum(len(g.offsets) for g in rep.groups.values())
    t = time.perf_counter()
    n_base = baseline(root)
    base = time.perf_counter() - t
    assert n_fast == n_base
    print(f"consumers replay of {args.commits} commits: {fast:.3f} s; record-by-record generic decoder "
          f"{base:.3f} s; ratio {base / fast:.1f}x ({n_fast} keys)")


if __name__ == "__main__":
    main()
