"""`mqstore demo`: the main job on the embedded default (a store under ./mqstore-data)."""

from __future__ import annotations

import random
import shutil
import time
from pathlib import Path

import click

from mqstore.cli.common import handle_errors


@click.command()
@click.option("--data", default="./mqstore-data", show_default=True, help="Where the sample store is created.")
@click.option("--messages", default=20_000, show_default=True, help="How many sample messages to put.")
@click.option("--keep", is_flag=True, help="Keep an existing store instead of starting afresh.")
@handle_errors
def demo(data: str, messages: int, keep: bool) -> None:
    """Create a sample RocketMQ-layout store, put messages with keys and tags, then query them by
    key, offset and time, and rebuild its indexes offline to show they are byte-identical."""
    from rich.console import Console
    from rich.progress import Progress

    from mqstore.api.rocketmq import MessageStore, StoreConfig

    console = Console()
    root = Path(data) / "rocketmq"
    if root.exists() and not keep:
        shutil.rmtree(root)
    config = StoreConfig(commit_log_file_size=8 * 1024 * 1024, consume_queue_file_size=60_000,
                         hash_slot_num=50_000, index_num=200_000)
    rng = random.Random(7)
    t0 = time.perf_counter()
    with MessageStore.open(root, config) as store:
        with Progress(console=console, transient=True) as progress:
            task = progress.add_task("putting messages", total=messages)
            batch = []
            for i in range(messages):
                batch.append(dict(topic=rng.choice(["orders", "payments", "audit"]), queue_id=i % 4,
                                  body=f"message {i} ".encode() * rng.randint(1, 20),
                                  keys=[f"order-{i % 5000}", f"user-{i % 97}"], tags=rng.choice(["TagA", "TagB"])))
                if len(batch) == 1000:
                    store.put_batch(batch)
                    progress.advance(task, len(batch))
                    batch = []
            if batch:
                store.put_batch(batch)
            progress.advance(task, len(batch))
        store.flush()
        put_s = time.perf_counter() - t0
        console.print(f"[bold]put[/] {messages} messages in {put_s:.2f} s ({messages / put_s:,.0f} msgs/s) into {root}")
        topics = store.topics()
        for topic, qids in topics.items():
            console.print(f"  topic {topic}: queues {qids}, messages {sum(store.max_offset(topic, q) for q in qids)}")
        from rich.markup import escape

        found = store.query_by_key("orders", "user-42")
        console.print(f"[bold]query by key[/] orders#user-42 → {len(found)} messages, newest first: "
                      + escape(str([(m.commit_log_offset, m.queue_id, m.queue_offset) for m in found[:5]])))
        first = store.get("payments", 1, 0, 3)
        console.print("[bold]get[/] payments/1 from queue offset 0 → " + escape(str([m.body[:20] for m in first])))
        if first:
            m = store.get_by_msg_id(first[0].msg_id)
            console.print(f"[bold]by message id[/] {first[0].msg_id} → commitLogOffset {m.commit_log_offset}")
            off = store.offset_for_time("payments", 1, first[-1].store_timestamp)
            console.print(f"[bold]query by time[/] payments/1 at {first[-1].store_timestamp} → queue offset {off}")
    from mqstore.storage.rocketmq.rebuild import compare_trees, rebuild_indexes

    out = Path(data) / "rocketmq-rebuilt"
    if out.exists():
        shutil.rmtree(out)
    t1 = time.perf_counter()
    stats = rebuild_indexes(root, out, config=config)
    dt = time.perf_counter() - t1
    diff = compare_trees(root, out)
    console.print(f"[bold]offline rebuild[/] of consumequeue/ and index/: {stats.messages} messages, {stats.keys} keys "
                  f"in {dt:.2f} s; identical to the live store: {'yes' if not diff else 'NO: ' + ', '.join(diff[:5])}")
    if diff:
        raise SystemExit(1)
