"""``mqstore warm-up``: compile the kernels once, at set-up, instead of in a user's first command.

Where the native (C) kernels are built, the commands run those, and the warm-up then compiles the
numba kernels too, in a second process with ``MQSTORE_KERNELS=numba`` (the development path and the
twins the tests run).  The numba kernels are numba functions cached on disk (``cache=True``: machine code in the
package's ``__pycache__`` directories, reused by every later process while the sources are
unchanged).  A fresh install has no cache, so the first command that reaches a kernel compiles it
(the first ``put`` of the demo spent most of its timed part compiling).  This command drives every
common path once over a tiny store of each layout in a temporary directory: the RocketMQ put,
dispatch, queries, dump, verify and rebuild; the Kafka append (with the key index), reads, lookups, key lookups, dump, verify and
rebuild.  ``scripts/setup.sh`` runs it after installing, so the demo and the operator commands
start from compiled code.  It writes nothing outside its temporary directory.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import click

from mqstore.cli.common import handle_errors


def _quiet(fn: Callable[[], object]) -> None:
    """Run ``fn`` with its standard output swallowed (the commands print what they found)."""
    with contextlib.redirect_stdout(io.StringIO()):
        fn()


def _command(args: list[str]) -> None:
    """Run one ``mqstore`` command in this process; a non-zero exit is an error of the warm-up."""
    from mqstore.cli.main import cli

    try:
        _quiet(lambda: cli.main(args, prog_name="mqstore", standalone_mode=False))
    except SystemExit as exc:  # pragma: no cover - standalone_mode=False returns instead
        if exc.code:
            raise click.ClickException(f"warm-up: mqstore {' '.join(args)} exited {exc.code}") from None


def warm_rocketmq(root: Path) -> int:
    """Put, dispatch, query and check a small RocketMQ store; the number of messages put."""
    from mqstore.api.rocketmq import MessageStore, StoreConfig

    store_dir = root / "rocketmq"
    config = StoreConfig(commit_log_file_size=1 << 20, consume_queue_file_size=6_000,
                         hash_slot_num=64, index_num=256)
    n = 0
    with MessageStore.open(store_dir, config) as store:
        for i in range(200):
            store.put("warm", f"message {i}".encode(), i % 2, keys=[f"k{i % 50}"], tags="T")
            n += 1
        store.put_batch([dict(topic="warm", queue_id=i % 2, body=b"x" * (i % 90), keys=[f"b{i}"], tags="U")
                         for i in range(300)])
        n += 300
        store.flush()
        store.dispatch()
        store.query_by_key("warm", "k7")
        got = store.get("warm", 0, 0, 5)
        store.offset_for_time("warm", 0, got[-1].store_timestamp)
    commit = ["--commitlog", str(store_dir / "commitlog")]
    _command(["rocketmq", "verify", str(store_dir), *commit])
    _command(["rocketmq", "dump", str(store_dir), "--json", *commit])
    _command(["rocketmq", "query-key", str(store_dir), "--topic", "warm", "--key", "k7", *commit])
    _command(["rocketmq", "rebuild-index", str(store_dir), "--out", str(root / "rocketmq-rebuilt"), *commit])
    return n


def warm_kafka(root: Path) -> int:
    """Append to, read and check a small Kafka partition; the number of records appended."""
    from mqstore.formats.kafka.batch import SimpleRecord, encode_batch
    from mqstore.storage.kafka.log import LogConfig, PartitionLog

    part = root / "kafka" / "warm-0"
    n = 0
    log = PartitionLog.open(part, LogConfig(segment_bytes=1 << 16, index_interval_bytes=512, key_index=True))
    try:
        for b in range(60):
            recs = [SimpleRecord(value=b"v" * (i * 7 % 200), key=b"k%d" % i, timestamp=1_700_000_000_000 + b * 8 + i)
                    for i in range(8)]
            log.append(encode_batch(recs, compression=b % 5), assign_offsets=True)
            n += len(recs)
        log.flush()
        log.read(0, 1 << 16)
        list(log.iter_records(0, 100))
        log.offset_for_timestamp(1_700_000_000_100)
        log.offsets_for_keys([b"k1", b"k2"])
    finally:
        log.close()
    _command(["kafka", "verify", str(part)])
    _command(["kafka", "dump", str(part), "--json"])
    _command(["kafka", "lookup", str(part), "--offset", "100"])
    _command(["kafka", "query-key", str(part), "--key", "k3"])
    _command(["kafka", "rebuild-index", str(part), "--out", str(root / "kafka-rebuilt"), "--key-index"])
    _warm_kafka_numba(sorted(part.glob("*.log"))[0])
    return n


def _warm_kafka_numba(log_path: Path) -> None:
    """Compile the numba twins of the Kafka kernels the commands above ran natively (the numba
    kernels stay the development path and the fallback where the native modules are not built)."""
    import os

    import numpy as np

    from mqstore.kernels.kafka import batches, index_build, records
    from mqstore.storage.kafka.file_scan import scan_check_file_numba

    data = log_path.read_bytes()
    scan = batches.scan_batches_numba(data)
    index_build.build_index_entries_numba(scan, scan["count"], 0, 512, 1 << 16)
    kept = np.arange(scan["count"])
    buf, bstart, bend = records.batch_bodies(memoryview(data), scan, kept)
    records.parse_bodies_numba(buf, bstart, bend, scan["record_count"].astype(np.int64), scan["base_offset"],
                               scan["base_timestamp"], scan["max_timestamp"], np.zeros(kept.shape[0], bool),
                               -(1 << 63), (1 << 63) - 1)
    fd = os.open(log_path, os.O_RDONLY)
    try:
        scan_check_file_numba(fd, len(data), threads=2, min_part_bytes=1)
    finally:
        os.close(fd)


@click.command("warm-up")
@handle_errors
def warm_up() -> None:
    """Compile and cache the kernels (run by scripts/setup.sh after installing; safe to rerun)."""
    with tempfile.TemporaryDirectory(prefix="mqstore-warm-up-") as tmp:
        t = time.perf_counter()
        root = Path(tmp)
        messages = warm_rocketmq(root)
        records = warm_kafka(root)
        click.echo(f"warm-up: kernels compiled and cached ({messages} RocketMQ messages, "
                   f"{records} Kafka records, {time.perf_counter() - t:.1f} s)")
    from mqstore.kernels import backend

    click.echo(f"warm-up: {backend.describe()}")
    if backend.mode() != "numba" and any(backend.built(n) is not None for n in backend.native_sources()):
        # This process ran the native kernels where they are built: compile the numba twins of those
        # too (the development path, MQSTORE_KERNELS=numba, and the tests run them), in a process of
        # their own because a module binds its kernels at import.
        env = {**os.environ, backend.ENV: "numba"}
        done = subprocess.run([sys.executable, "-m", "mqstore.cli.main", "warm-up"], env=env, check=False)
        if done.returncode:
            raise click.ClickException(f"warm-up of the numba kernels exited {done.returncode}")
