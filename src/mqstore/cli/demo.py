"""`mqstore demo`: the main job on the embedded default (a store under ./mqstore-data, local Spark).

1. put sample messages into a RocketMQ-layout store and query it locally (key, offset, id, time);
2. rebuild its indexes offline, locally and on Spark, and show both are byte-identical to the
   live store's;
3. reopen the store as a plain CommitLog writer and let a Structured Streaming query dispatch it
   (the broker's reput service) while more messages are appended; show the indexes equal a
   local rebuild;
4. look many keys up on Spark (query-keys) and compare with the local query, and count the
   messages after a point in time both with the ConsumeQueue time search and on Spark;
5. write the store's health report (``mqstore rocketmq report --html``) to ``DATA/report.html``.
"""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path
from typing import Any

import click

from mqstore.cli.common import handle_errors
from mqstore.cli.spark import handle_spark_errors, open_session, spark_options

TOPICS = ("orders", "payments", "audit")


def _message(rng: random.Random, i: int) -> dict[str, Any]:
    return dict(topic=rng.choice(TOPICS), queue_id=i % 4, body=f"message {i} ".encode() * rng.randint(1, 20),
                keys=[f"order-{i % 5000}", f"user-{i % 97}"], tags=rng.choice(["TagA", "TagB"]))


def _put(store: Any, rng: random.Random, start: int, count: int, progress: Any, task: Any) -> None:
    batch = []
    for i in range(start, start + count):
        batch.append(_message(rng, i))
        if len(batch) == 1000:
            store.put_batch(batch)
            progress.advance(task, len(batch))
            batch = []
    if batch:
        store.put_batch(batch)
        progress.advance(task, len(batch))


def _write_report(root: Path, base: Path, config: Any, rng: random.Random) -> Path:
    """``mqstore rocketmq report --html`` of the demo store into ``base/report.html``, with a
    sample consumer group's offsets in ``config/consumerOffset.json`` (as the broker writes them:
    integer queue ids unquoted) so that the lag figures have something to show."""
    from mqstore.api.rocketmq import MessageStore
    from mqstore.cli.report_html import render_html
    from mqstore.storage.rocketmq.report import rocketmq_report, verify_summary

    with MessageStore.open(root, config, read_only=True) as ro:
        table = {f"{t}@demo-consumers": {q: rng.randint(0, ro.max_offset(t, q)) for q in qs}
                 for t, qs in sorted(ro.topics().items())}
    cfg_dir = root / "config"
    cfg_dir.mkdir(exist_ok=True)
    entries = ",".join(f'"{name}":{{' + ",".join(f"{q}:{o}" for q, o in offs.items()) + "}"
                       for name, offs in table.items())
    (cfg_dir / "consumerOffset.json").write_text('{"offsetTable":{' + entries + "}}")
    out = base / "report.html"
    out.write_text(render_html(rocketmq_report(root, config), verify_summary(root, config)), encoding="utf-8")
    return out


def _verdict(diff: list[str]) -> str:
    return "[green]yes[/]" if not diff else "[red]NO[/]: " + ", ".join(diff[:5])


@click.command()
@click.option("--data", default="./mqstore-data", show_default=True, help="Where the sample store is created.")
@click.option("--messages", default=20_000, show_default=True, type=click.IntRange(min=10),
              help="How many sample messages to put (the streaming part appends a quarter more).")
@click.option("--keep", is_flag=True, help="Keep an existing store instead of starting afresh.")
@spark_options
@handle_errors
@handle_spark_errors
def demo(data: str, messages: int, keep: bool, master: str, conf: tuple[str, ...]) -> None:
    """Create a sample RocketMQ-layout store, query it, rebuild its indexes locally and on Spark,
    dispatch new messages with a Spark streaming query, and look keys up on Spark."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    from mqstore.api.rocketmq import MessageStore, StoreConfig
    from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes

    console = Console()
    started = time.perf_counter()
    base = Path(data)
    root = base / "rocketmq"
    if root.exists() and not keep:
        shutil.rmtree(root)
    geometry = dict(commit_log_file_size=8 * 1024 * 1024, consume_queue_file_size=60_000,
                    hash_slot_num=50_000, index_num=200_000)
    config = StoreConfig(**geometry)
    rng = random.Random(7)

    def progress() -> Progress:
        return Progress("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=console, transient=True)

    # ------------------------------------------------------------------ 1. put and query locally
    console.rule("[bold]1. a RocketMQ-layout store")
    t0 = time.perf_counter()
    with MessageStore.open(root, config) as store:
        first = sum(store.max_offset(t, q) for t, qs in store.topics().items() for q in qs)
        with progress() as prog:
            _put(store, rng, first, messages, prog, prog.add_task("putting messages", total=messages))
        store.flush()
        put_s = time.perf_counter() - t0
        console.print(f"[bold]put[/] {messages:,} messages in {put_s:.2f} s ({messages / put_s:,.0f} msgs/s) into {root}")
        for topic, qids in store.topics().items():
            console.print(f"  topic {topic}: queues {qids}, messages {sum(store.max_offset(topic, q) for q in qids):,}")
        found = store.query_by_key("orders", "user-42")
        console.print(f"[bold]query by key[/] orders#user-42 → {len(found)} messages, newest first: "
                      + escape(str([(m.commit_log_offset, m.queue_id, m.queue_offset) for m in found[:5]])))
        got = store.get("payments", 1, 0, 3)
        console.print("[bold]get[/] payments/1 from queue offset 0 → " + escape(str([m.body[:20] for m in got])))
        if got:
            m = store.get_by_msg_id(got[0].msg_id)
            console.print(f"[bold]by message id[/] {got[0].msg_id} → commitLogOffset {m.commit_log_offset}")
            off = store.offset_for_time("payments", 1, got[-1].store_timestamp)
            console.print(f"[bold]query by time[/] payments/1 at {got[-1].store_timestamp} → queue offset {off}")

    # ------------------------------------------------------------------ 2. rebuilds
    console.rule("[bold]2. offline index rebuilds")
    local_out = base / "rocketmq-rebuilt"
    if local_out.exists():
        shutil.rmtree(local_out)
    t1 = time.perf_counter()
    stats = rebuild_indexes(root, local_out, config=config)
    dt = time.perf_counter() - t1
    diff = compare_trees(root, local_out)
    console.print(f"[bold]local rebuild[/] of consumequeue/ and index/: {stats.messages:,} messages, {stats.keys:,} keys "
                  f"in {dt:.2f} s; identical to the live store: {_verdict(diff)}")
    failures = list(diff)

    with console.status("starting Spark"):
        spark = open_session(master, conf, "mqstore demo")
    console.print(f"[bold]Spark[/] {spark.version} on {spark.sparkContext.master}")
    try:
        from mqstore.spark.rebuild import rebuild_rocketmq
    except ImportError:  # pragma: no cover - the Spark rebuild module is not installed
        rebuild_rocketmq = None
    if rebuild_rocketmq is not None:
        spark_out = base / "rocketmq-rebuilt-spark"
        if spark_out.exists():
            shutil.rmtree(spark_out)
        t2 = time.perf_counter()
        with console.status("rebuilding on Spark"):
            sstats = rebuild_rocketmq(spark, root, spark_out, hash_slot_num=config.hash_slot_num,
                                      index_num=config.index_num, cq_file_size=config.consume_queue_file_size,
                                      commit_log_file_size=config.commit_log_file_size)
        dt2 = time.perf_counter() - t2
        diff = compare_trees(local_out, spark_out)
        console.print(f"[bold]Spark rebuild[/]: {sstats.messages:,} messages in {dt2:.2f} s; byte-identical to the "
                      f"local rebuild: {_verdict(diff)}")
        failures += diff

    # ------------------------------------------------------------------ 3. streaming dispatch
    console.rule("[bold]3. streaming dispatch (the reput service on Spark)")
    from mqstore.spark.dispatch import start_dispatch

    checkpoint = base / "dispatch-checkpoint"
    if checkpoint.exists():
        shutil.rmtree(checkpoint)
    more = max(messages // 4, 10)
    writer = MessageStore.open(root, StoreConfig(**geometry, dispatch_enabled=False))
    query = start_dispatch(spark, root, checkpoint, trigger_interval="500 milliseconds", config=config)
    try:
        try:
            with console.status("starting the streaming query"):
                query.processAllAvailable()  # up and at the end of what the store had indexed
            t3 = time.perf_counter()
            start = messages + (0 if not keep else first)
            rounds = 5
            with progress() as prog:
                task = prog.add_task("appending while the query dispatches", total=more)
                for r in range(rounds):
                    n = more // rounds + (1 if r < more % rounds else 0)
                    _put(writer, rng, start, n, prog, task)
                    start += n
                    time.sleep(1.0)
        finally:
            writer.close()
        with console.status("waiting for the query to catch up"):
            query.processAllAvailable()
        batches = [p for p in query.recentProgress if p["numInputRows"]]
        rows_read = sum(p["numInputRows"] for p in batches)
        console.print(f"[bold]dispatched[/] {more:,} messages appended while the query ran: {rows_read:,} records read "
                      f"in {len(batches)} micro-batches ({time.perf_counter() - t3:.2f} s, checkpoint {checkpoint})")
    finally:
        query.stop()
    live_out = base / "rocketmq-rebuilt-after-stream"
    if live_out.exists():
        shutil.rmtree(live_out)
    rebuild_indexes(root, live_out, config=config)
    diff = compare_trees(root, live_out)
    console.print(f"[bold]indexes kept by the stream[/] equal a local rebuild of the grown CommitLog: {_verdict(diff)}")
    failures += diff

    # ------------------------------------------------------------------ 4. queries on Spark
    console.rule("[bold]4. queries on Spark and locally")
    from pyspark.sql import functions as F

    from mqstore.spark.query import query_keys

    keys = [f"order-{i}" for i in range(0, 5000, 97)] + ["user-42", "no-such-key"]
    t4 = time.perf_counter()
    with console.status(f"query-keys: {len(keys)} keys on Spark"):
        rows = query_keys(spark, [root], "orders", keys, include_body=False, sort=False).collect()
    spark_s = time.perf_counter() - t4
    spark_hits = sorted((r.key, r.commitLogOffset) for r in rows)
    t5 = time.perf_counter()
    with MessageStore.open(root, config, read_only=True) as ro:
        local_hits = sorted((k, m.commit_log_offset) for k in keys for m in ro.query_by_key("orders", k))
        local_s = time.perf_counter() - t5
        same = spark_hits == local_hits
        console.print(f"[bold]query-keys[/] {len(keys)} keys → {len(rows):,} messages on Spark in {spark_s:.2f} s, "
                      f"locally in {local_s:.2f} s; same answer: {'[green]yes[/]' if same else '[red]NO[/]'}")
        if not same:
            failures.append("query-keys differs from the local query")
        qids = ro.topics().get("payments", [])
        ts = None
        for q in qids:
            got = ro.get("payments", q, max(ro.max_offset("payments", q) // 2, 0), 1)
            if got:
                ts = got[0].store_timestamp
                break
        if ts is not None:
            local_count = sum(ro.max_offset("payments", q) - ro.offset_for_time("payments", q, ts) for q in qids)
            spark_count = (spark.read.format("rocketmq").option("topics", "payments").load(str(root.resolve()))
                           .where(F.col("storeTimestamp") >= ts).count())
            ok = local_count == spark_count
            console.print(f"[bold]query by time[/] payments stored at or after {ts}: {local_count:,} by the ConsumeQueue "
                          f"time search, {spark_count:,} on Spark; same: {'[green]yes[/]' if ok else '[red]NO[/]'}")
            if not ok:
                failures.append("time query differs")
    # ------------------------------------------------------------------ 5. health report
    console.rule("[bold]5. store health report")
    report_path = _write_report(root, base, config, rng)
    console.print(f"[bold]report[/] (verify summary, IndexFile fill, hash chains, traffic, consumer lag, ...): "
                  f"{report_path}")
    console.rule(f"done in {time.perf_counter() - started:.1f} s")
    if failures:
        raise SystemExit(1)
