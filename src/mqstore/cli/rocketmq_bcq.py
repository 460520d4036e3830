"""`mqstore rocketmq bcq ...`: the BatchConsumeQueues (``queue.type=BatchCQ`` topics) and the
compaction store of a RocketMQ 5.x store: inspect, get by queue offset, dump the compacted
queues, verify.  Read-only; the batch queues are rebuilt by ``mqstore rocketmq rebuild-index``."""

from __future__ import annotations

import base64
import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from mqstore.cli.common import echo_json_lines, handle_errors, json_option, print_table, to_json
from mqstore.cli.rocketmq_store import commitlog_options, store_config

store_arg = click.argument("store", type=click.Path(path_type=Path))


_file_size = click.option("--bcq-file-size", type=click.IntRange(min=46), default=None,
                          help="Batch queue file size (default: detected from the files).")


@contextlib.contextmanager
def _commit_log(store: Path, cfg: Any) -> Iterator[Any]:
    from mqstore.storage.rocketmq.dledger import open_commit_log

    cl = open_commit_log(store, cfg)
    try:
        yield cl
    finally:
        cl.close()


def _unit_json(u: Any) -> dict[str, Any]:
    return {"phyOffset": u.commit_log_offset, "size": u.size, "tagsCode": u.tags_code, "storeTime": u.store_time,
            "msgBaseOffset": u.msg_base_offset, "batchSize": u.batch_size, "compactedOffset": u.compacted_offset}


def _record_json(rec: Any) -> dict[str, Any]:
    return {"commitLogOffset": rec.commit_log_offset, "topic": rec.topic, "queueId": rec.queue_id,
            "queueOffset": rec.queue_offset, "sysFlag": rec.sys_flag, "storeTimestamp": rec.store_timestamp,
            "bornTimestamp": rec.born_timestamp, "size": rec.total_size, "properties": rec.properties,
            "body": base64.b64encode(rec.body).decode("ascii")}


def _queue_json(q: Any) -> dict[str, Any]:
    return {"topic": q.topic, "queueId": q.queue_id, "files": len(q.files), "fileSize": q.file_size,
            "units": len(q.units), "minOffset": q.min_offset, "maxOffset": q.max_offset,
            "messages": q.messages, "problems": q.problems}


@click.group(name="bcq")
def bcq_group() -> None:
    """BatchConsumeQueues (queue.type=BatchCQ topics) and the compaction store (read-only)."""


@bcq_group.command()
@store_arg
@_file_size
@json_option
@handle_errors
def inspect(store: Path, bcq_file_size: int | None, as_json: bool) -> None:
    """Batch queues, compaction queues, the compaction position checkpoint and BatchCQ topics."""
    from mqstore.errors import StoreNotFoundError
    from mqstore.storage.rocketmq import batch_consumequeue as bcq

    if not store.is_dir():
        raise StoreNotFoundError(f"store directory {store} does not exist")
    doc = {"batchCqTopics": sorted(bcq.batch_cq_topics(store)),
           "batchQueues": [_queue_json(q) for _, q in sorted(bcq.load_batch_queues(store, bcq_file_size).items())],
           "compactionQueues": [_queue_json(q) for _, q in sorted(bcq.load_compaction_queues(store).items())],
           "positionCheckpoint": bcq.position_checkpoint(store)}
    if as_json:
        click.echo(to_json(doc))
        return
    click.echo(f"BatchCQ topics (config/topics.json): {', '.join(doc['batchCqTopics']) or '-'}")
    for title, key in (("batchconsumequeue", "batchQueues"), ("compaction/compactionCq", "compactionQueues")):
        print_table(title, ["topic", "queueId", "files", "units", "minOffset", "maxOffset", "messages", "problems"],
                    [(q["topic"], q["queueId"], q["files"], q["units"], q["minOffset"], q["maxOffset"], q["messages"],
                      len(q["problems"])) for q in doc[key]])
    for k, v in sorted(doc["positionCheckpoint"].items()):
        click.echo(f"compaction position {k}: {v}")


@bcq_group.command()
@store_arg
@commitlog_options
@click.option("--topic", required=True)
@click.option("--queue", "queue_id", type=click.IntRange(min=0), required=True)
@click.option("--offset", type=click.IntRange(min=0), required=True, help="Queue offset.")
@click.option("--compaction", is_flag=True, help="Look in compaction/compactionCq + compactionLog.")
@_file_size
@json_option
@handle_errors
def get(store: Path, topic: str, queue_id: int, offset: int, compaction: bool, bcq_file_size: int | None,
        as_json: bool) -> None:
    """The batch unit covering a queue offset and the record it points at."""
    from mqstore.storage.rocketmq import batch_consumequeue as bcq
    from mqstore.storage.rocketmq.config import validate_topic

    validate_topic(topic)
    if compaction:
        base = store / bcq.COMPACTION_DIR / bcq.COMPACTION_CQ_DIR
        q = bcq.load_queue(base / topic / str(queue_id), topic, queue_id, sparse=True)
        unit = q.lookup(offset)
        log = bcq.compaction_log(store, topic, queue_id)
        try:
            rec = log.read_record(unit.commit_log_offset)
        finally:
            log.close()
    else:
        q = bcq.load_queue(store / bcq.BCQ_DIR / topic / str(queue_id), topic, queue_id, bcq_file_size)
        unit = q.lookup(offset)
        with _commit_log(store, store_config(store)) as cl:
            rec = cl.read_record(unit.commit_log_offset)
    doc = {"queueOffset": offset, "unit": _unit_json(unit), "message": _record_json(rec)}
    if as_json:
        click.echo(to_json(doc))
        return
    u = doc["unit"]
    click.echo(f"{topic}/{queue_id} offset {offset}: unit msgBaseOffset {u['msgBaseOffset']} batchSize "
               f"{u['batchSize']} (message {offset - u['msgBaseOffset']} of the batch)")
    for k, v in doc["message"].items():
        click.echo(f"  {k}: {v}")


@bcq_group.command("dump-compaction")
@store_arg
@click.option("--topic", required=True)
@click.option("--queue", "queue_id", type=click.IntRange(min=0), required=True)
@json_option
@handle_errors
def dump_compaction(store: Path, topic: str, queue_id: int, as_json: bool) -> None:
    """Every message the compaction store kept for a queue (compactionCq -> compactionLog)."""
    from mqstore.storage.rocketmq import batch_consumequeue as bcq
    from mqstore.storage.rocketmq.config import validate_topic

    validate_topic(topic)
    base = store / bcq.COMPACTION_DIR / bcq.COMPACTION_CQ_DIR
    q = bcq.load_queue(base / topic / str(queue_id), topic, queue_id, sparse=True)
    log = bcq.compaction_log(store, topic, queue_id)
    try:
        recs = [log.read_record(q.unit(i).commit_log_offset) for i in range(len(q.units))]
    finally:
        log.close()
    if as_json:
        echo_json_lines(_record_json(r) for r in recs)
        return
    print_table(f"compaction {topic}/{queue_id}", ["queueOffset", "offset", "storeTimestamp", "keys", "size"],
                [(r.queue_offset, r.commit_log_offset, r.store_timestamp, " ".join(r.keys), r.total_size) for r in recs])


@bcq_group.command()
@store_arg
@commitlog_options
@_file_size
@json_option
@handle_errors
def verify(store: Path, bcq_file_size: int | None, as_json: bool) -> None:
    """Batch queue units against the CommitLog, compaction queues against their compactionLog.
    Exit code 0 only when clean."""
    from mqstore.storage.rocketmq import batch_consumequeue as bcq

    with _commit_log(store, store_config(store)) as cl:
        rep = bcq.verify_batch_store(store, cl, bcq_file_size=bcq_file_size)
    if as_json:
        click.echo(to_json({"ok": rep.ok, "queues": rep.queues, "units": rep.units, "messages": rep.messages,
                            "compactionQueues": rep.compaction_queues, "compactionUnits": rep.compaction_units,
                            "problems": rep.problems}))
    else:
        for p in rep.problems:
            click.echo(p)
        click.echo(f"{rep.queues} batch queues ({rep.units} units, {rep.messages} messages), "
                   f"{rep.compaction_queues} compaction queues ({rep.compaction_units} units): "
                   f"{'clean' if rep.ok else f'{len(rep.problems)} problems'}")
    sys.exit(0 if rep.ok else 1)


# ------------------------------------------------------- used by `rocketmq inspect / verify / get`
def has_batch_store(store: Path) -> bool:
    """Whether the store has batch queues, a compaction store or BatchCQ topics."""
    from mqstore.errors import MqStoreError
    from mqstore.storage.rocketmq import batch_consumequeue as bcq

    if (store / bcq.BCQ_DIR).is_dir() or (store / bcq.COMPACTION_DIR).is_dir():
        return True
    try:
        return bool(bcq.batch_cq_topics(store))
    except MqStoreError:
        return False  # the bad topics.json is reported with the config files


def inspect_section(store: Path) -> dict[str, Any] | None:
    """The batch queue part of ``rocketmq inspect`` (``None`` when the store has none); a file
    that cannot be read is shown as ``error``, the rest of inspect still runs."""
    from mqstore.errors import MqStoreError
    from mqstore.storage.rocketmq import batch_consumequeue as bcq

    if not has_batch_store(store):
        return None
    doc: dict[str, Any] = {}
    for key, fn in (("batchCqTopics", lambda: sorted(bcq.batch_cq_topics(store))),
                    ("batchQueues", lambda: [_queue_json(q) for _, q in sorted(bcq.load_batch_queues(store).items())]),
                    ("compactionQueues",
                     lambda: [_queue_json(q) for _, q in sorted(bcq.load_compaction_queues(store).items())]),
                    ("positionCheckpoint", lambda: bcq.position_checkpoint(store))):
        try:
            doc[key] = fn()
        except MqStoreError as exc:
            doc[key] = {"error": str(exc)}
    return doc


def print_inspect_section(doc: dict[str, Any]) -> None:
    for title, key in (("batchconsumequeue (queue.type=BatchCQ)", "batchQueues"),
                       ("compaction/compactionCq", "compactionQueues")):
        v = doc[key]
        if isinstance(v, dict):
            click.echo(f"{title}: error: {v['error']}")
        elif v:
            print_table(title, ["topic", "queueId", "files", "units", "minOffset", "maxOffset", "messages", "problems"],
                        [(q["topic"], q["queueId"], q["files"], q["units"], q["minOffset"], q["maxOffset"],
                          q["messages"], len(q["problems"])) for q in v])
    cp = doc["positionCheckpoint"]
    if isinstance(cp, dict) and "error" in cp and len(cp) == 1 and isinstance(cp["error"], str):
        click.echo(f"compaction/position-checkpoint: error: {cp['error']}")
    elif cp:
        click.echo("compaction/position-checkpoint: " + ", ".join(f"{k}={v}" for k, v in sorted(cp.items())))


def verify_problems(store: Path, config: Any) -> tuple[int, list[str]] | None:
    """``(units, problems)`` of the batch queues and compaction store for ``rocketmq verify``
    (``None`` when the store has none)."""
    from mqstore.errors import MqStoreError
    from mqstore.storage.rocketmq import batch_consumequeue as bcq

    if not has_batch_store(store):
        return None
    try:
        with _commit_log(store, config) as cl:
            rep = bcq.verify_batch_store(store, cl)
    except MqStoreError as exc:
        return 0, [f"batch queues: {exc}"]
    return rep.units + rep.compaction_units, rep.problems


def batch_get(store: Path, topic: str, queue_id: int, offset: int, count: int,
              config: Callable[[], Any]) -> list[dict[str, Any]] | None:
    """``rocketmq get`` of a batch queue: the records whose batches cover ``offset`` ..
    ``offset+count-1`` (each once), ``None`` when the queue is not a batch queue."""
    from mqstore.storage.rocketmq import batch_consumequeue as bcq
    from mqstore.storage.rocketmq.config import validate_topic

    validate_topic(topic)
    d = store / bcq.BCQ_DIR / topic / str(queue_id)
    if not d.is_dir():
        return None
    q = bcq.load_queue(d, topic, queue_id)
    first = q.find(offset)
    out = []
    with _commit_log(store, config()) as cl:
        i = first
        while i < len(q.units) and int(q.units["msg_base_offset"][i]) < offset + count:
            unit = q.unit(i)
            out.append({"unit": _unit_json(unit), "message": _record_json(cl.read_record(unit.commit_log_offset))})
            i += 1
    return out


def print_batch_get(rows: list[dict[str, Any]], as_json: bool, title: str) -> None:
    if as_json:
        echo_json_lines(rows)
        return
    print_table(title, ["msgBaseOffset", "batchSize", "commitLogOffset", "storeTimestamp", "tags", "size"],
                [(r["unit"]["msgBaseOffset"], r["unit"]["batchSize"], r["message"]["commitLogOffset"],
                  r["message"]["storeTimestamp"], r["message"]["properties"].get("TAGS", ""), r["message"]["size"])
                 for r in rows])
