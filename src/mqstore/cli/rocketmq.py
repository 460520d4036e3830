"""`mqstore rocketmq ...`: inspect, dump, query, verify and rebuild a RocketMQ store directory."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mqstore.cli.common import echo_json_lines, handle_errors, json_option, print_table, progress, to_json

store_arg = click.argument("store", type=click.Path(file_okay=False, path_type=Path))
LONG_MAX = 2**63 - 1


def _geometry_options(f):
    f = click.option("--cq-file-size", type=click.IntRange(min=20), default=None, help="ConsumeQueue segment size (bytes).")(f)
    f = click.option("--items", type=click.IntRange(min=2), default=None, help="IndexFile items per file.")(f)
    f = click.option("--slots", type=click.IntRange(min=1), default=None, help="IndexFile hash slots.")(f)
    return click.option("--commitlog-file-size", type=click.IntRange(min=4096), default=None,
                        help="CommitLog segment size (default: detected from the files).")(f)


def _config(store: Path, commitlog_file_size=None, slots=None, items=None, cq_file_size=None):
    """The store's configuration: the options given, the rest of the geometry detected from the
    files (:func:`mqstore.storage.rocketmq.layout.resolve_config`)."""
    from mqstore.errors import StoreNotFoundError
    from mqstore.storage.rocketmq.layout import resolve_config

    if not store.is_dir():
        raise StoreNotFoundError(f"store directory {store} does not exist")
    return resolve_config(store, None, background_services=False, commit_log_file_size=commitlog_file_size,
                          hash_slot_num=slots, index_num=items, consume_queue_file_size=cq_file_size)


def _open(store: Path, read_only: bool = True):
    from mqstore.api.rocketmq import MessageStore

    return MessageStore.open(store, _config(store), read_only=read_only, create=False)


def _print_messages(messages, as_json: bool, title: str, decode: str | None = None) -> None:
    if as_json:
        echo_json_lines(_json_message(m, decode) for m in messages)
        return
    if decode is not None:
        from mqstore.cli.filters import decode_text

        bodies = [decode_text(m.body, decode)[:64] for m in messages]
    else:
        bodies = [m.body[:32] for m in messages]
    rows = [(m.commit_log_offset, m.topic[:40], m.queue_id, m.queue_offset, m.store_timestamp, " ".join(m.keys)[:40],
             m.tags or "", m.size, b) for m, b in zip(messages, bodies, strict=True)]
    print_table(title, ["commitLogOffset", "topic", "queueId", "queueOffset", "storeTimestamp", "keys", "tags", "size", "body"], rows)


@click.group(name="rocketmq")
def group() -> None:
    """Inspect, query, verify and rebuild RocketMQ store directories (read-only unless asked)."""


@group.command()
@store_arg
@json_option
@handle_errors
def inspect(store: Path, as_json: bool) -> None:
    """Files, topics, queues, message counts, index files, checkpoint, clean/unclean shutdown."""
    with _open(store) as s:
        eng = s.engine
        cl = eng.commit_log
        info = {
            "store": str(store),
            "cleanShutdown": eng.last_exit_ok,
            "commitLog": {"segmentSize": cl.file_size, "segments": [f.path.name for f in cl.queue.files],
                          "minOffset": cl.min_offset, "maxOffset": cl.max_offset},
            "queues": [{"topic": t, "queueId": q, "minOffset": cq.min_offset_in_queue, "maxOffset": cq.max_offset_in_queue,
                        "messages": cq.max_offset_in_queue - cq.min_offset_in_queue, "files": len(cq.queue.files)}
                       for (t, q), cq in sorted(eng.consume_queues.items())],
            "indexFiles": [{"name": f.name, "beginTimestamp": f.header.begin_timestamp, "endTimestamp": f.header.end_timestamp,
                            "beginPhyOffset": f.header.begin_phy_offset, "endPhyOffset": f.header.end_phy_offset,
                            "hashSlotCount": f.header.hash_slot_count, "indexCount": f.header.index_count,
                            "full": f.is_write_full()} for f in eng.index.files],
            "indexGeometry": {"slots": eng.config.hash_slot_num, "items": eng.config.index_num},
            "checkpoint": {"physicMsgTimestamp": eng.checkpoint.values.physic_msg_timestamp,
                           "logicsMsgTimestamp": eng.checkpoint.values.logics_msg_timestamp,
                           "indexMsgTimestamp": eng.checkpoint.values.index_msg_timestamp,
                           "masterFlushedOffset": eng.checkpoint.values.master_flushed_offset,
                           "confirmPhyOffset": eng.checkpoint.values.confirm_phy_offset},
        }
    if as_json:
        click.echo(to_json(info))
        return
    click.echo(f"store {store}: {'clean' if info['cleanShutdown'] else 'UNCLEAN'} shutdown")
    c = info["commitLog"]
    click.echo(f"commitlog: {len(c['segments'])} segments of {c['segmentSize']} bytes, offsets [{c['minOffset']}, {c['maxOffset']})")
    print_table("queues", ["topic", "queueId", "minOffset", "maxOffset", "messages", "files"],
                [(q["topic"], q["queueId"], q["minOffset"], q["maxOffset"], q["messages"], q["files"]) for q in info["queues"]])
    print_table("index files", ["name", "beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset", "hashSlotCount", "indexCount", "full"],
                [tuple(f.values()) for f in info["indexFiles"]])
    print_table("checkpoint", list(info["checkpoint"]), [tuple(info["checkpoint"].values())])


@group.command()
@store_arg
@click.option("--topic", default=None, help="Only messages of this topic.")
@click.option("--from-offset", type=click.IntRange(min=0), default=0, help="CommitLog offset to start at.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many messages.")
@click.option("--from-time", default=None, help="Store time from (inclusive): ISO 8601 or epoch ms.")
@click.option("--to-time", default=None, help="Store time to (inclusive): ISO 8601 or epoch ms.")
@click.option("--key", default=None, help="Only messages with this key (a KEYS piece or the unique key).")
@click.option("--tag", default=None, help="Only messages with this tag (A||B: either).")
@click.option("--decode", default=None, help="Show bodies as utf8, hex or json (JSON output: in place of base64).")
@json_option
@handle_errors
def dump(store: Path, topic: str | None, from_offset: int, limit: int | None, from_time: str | None,
         to_time: str | None, key: str | None, tag: str | None, decode: str | None, as_json: bool) -> None:
    """Every message of the CommitLog with every record field (optionally filtered)."""
    from mqstore.api.rocketmq import Message
    from mqstore.cli.filters import check_decoder, check_time_range, parse_time
    from mqstore.storage.rocketmq.dump import candidate_rows, matches

    lo, hi = parse_time(from_time, "--from-time"), parse_time(to_time, "--to-time")
    check_time_range(lo, hi)
    check_decoder(decode)
    tags = [t.strip() for t in tag.split("||") if t.strip()] if tag is not None else None
    with _open(store) as s, progress("dump") as prog:
        cl = s.engine.commit_log
        out: list = []
        n = 0
        start = max(from_offset, cl.min_offset)
        total = max(cl.max_offset - start, 0)
        for batch in cl.scan(start, cl.max_offset, max_records=1 << 16):
            for off in batch.commit_log_offset[candidate_rows(batch, topic, lo, hi, key, tags)].tolist():
                rec = cl.read_record(off)
                if not matches(rec, key, tags):
                    continue
                m = Message.from_record(rec)
                if as_json:
                    click.echo(to_json(_json_message(m, decode)))
                else:
                    out.append(m)
                n += 1
                if limit is not None and n >= limit:
                    break
            if prog is not None:
                prog(batch.next_offset - start, total)
            if limit is not None and n >= limit:
                break
            if batch.error:
                click.echo(f"error: invalid record at offset {batch.next_offset}: {batch.error}", err=True)
        if not as_json:
            _print_messages(out, False, f"messages of {store}", decode)


def _json_message(m, decode: str | None) -> dict:
    d = m.to_json_dict()
    if decode is not None:
        from mqstore.cli.filters import decode_value

        d["body"] = decode_value(m.body, decode)
    return d


@group.command()
@store_arg
@click.option("--topic", required=True)
@click.option("--queue", "queue_id", type=click.IntRange(min=0), required=True)
@click.option("--offset", type=click.IntRange(min=0), required=True, help="Queue offset.")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True)
@json_option
@handle_errors
def get(store: Path, topic: str, queue_id: int, offset: int, count: int, as_json: bool) -> None:
    """Messages of a queue by queue offset."""
    with _open(store) as s:
        _print_messages(s.get(topic, queue_id, offset, count), as_json, f"{topic}/{queue_id} from {offset}")


@group.command("query-key")
@store_arg
@click.option("--topic", required=True)
@click.option("--key", required=True)
@click.option("--begin", type=int, default=None, help="Store time from (ms, inclusive).")
@click.option("--end", type=int, default=None, help="Store time to (ms, inclusive).")
@click.option("--max", "max_num", type=click.IntRange(min=1), default=None, help="At most this many messages.")
@click.option("--semantics", type=click.Choice(["exact", "broker"]), default="exact", show_default=True,
              help="exact: true key matches, ms window, no cap; broker: what IndexService.queryOffset returns.")
@json_option
@handle_errors
def query_key(store: Path, topic: str, key: str, begin: int | None, end: int | None, max_num: int | None,
              semantics: str, as_json: bool) -> None:
    """Messages by key (or unique key)."""
    with _open(store) as s:
        if semantics == "broker":
            offsets = s.query_offsets_broker(topic, key, max_num or 64, begin or 0, LONG_MAX if end is None else end)
            messages = [s.get_by_offset(o, check_crc=False) for o in offsets]
        else:
            messages = s.query_by_key(topic, key, begin, end, max_num)
        _print_messages(messages, as_json, f"{topic}#{key} ({semantics})")


@group.command("query-time")
@store_arg
@click.option("--topic", required=True)
@click.option("--queue", "queue_id", type=click.IntRange(min=0), required=True)
@click.option("--timestamp", type=int, required=True, help="Store time (ms).")
@click.option("--boundary", type=click.Choice(["lower", "upper"]), default="lower", show_default=True)
@json_option
@handle_errors
def query_time(store: Path, topic: str, queue_id: int, timestamp: int, boundary: str, as_json: bool) -> None:
    """The queue offset for a store time (ConsumeQueue time search)."""
    with _open(store) as s:
        off = s.offset_for_time(topic, queue_id, timestamp, boundary)
        if as_json:
            click.echo(to_json({"topic": topic, "queueId": queue_id, "timestamp": timestamp, "boundary": boundary,
                                "queueOffset": off}))
        else:
            click.echo(off)


@group.command()
@store_arg
@json_option
@handle_errors
def verify(store: Path, as_json: bool) -> None:
    """CRC of every record, ConsumeQueue units and IndexFile items against the CommitLog.
    Exit code 0 only when clean."""
    from mqstore.storage.rocketmq.verify import verify_store

    with progress("verify") as prog:
        rep = verify_store(store, _config(store), progress=prog)
    if as_json:
        click.echo(to_json({"ok": rep.ok, "messages": rep.messages, "cqUnits": rep.cq_units,
                            "indexItems": rep.index_items, "problems": rep.problems}))
    else:
        for p in rep.problems:
            click.echo(p)
        click.echo(f"{rep.messages} messages, {rep.cq_units} ConsumeQueue units, {rep.index_items} index items: "
                   f"{'clean' if rep.ok else f'{len(rep.problems)} problems'}")
    sys.exit(0 if rep.ok else 1)


@group.command("rebuild-index")
@store_arg
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Write consumequeue/, index/ and checkpoint here (default: in place).")
@_geometry_options
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Threads for the scan and the index build (default: CPUs less the one the read-ahead "
                   "scan keeps busy, at least 1, at most 4; 1 = sequential).")
@json_option
@handle_errors
def rebuild_index(store: Path, out: Path | None, commitlog_file_size: int | None, slots: int | None,
                  items: int | None, cq_file_size: int | None, threads: int | None, as_json: bool) -> None:
    """Regenerate consumequeue/ and index/ from the CommitLog alone."""
    import time

    from mqstore.storage.rocketmq.rebuild import rebuild_indexes

    cfg = _config(store, commitlog_file_size, slots, items, cq_file_size)
    t0 = time.perf_counter()
    # (an in-place rebuild takes the store's writer lock itself)
    with progress("rebuilding") as prog:
        stats = rebuild_indexes(store, out, config=cfg, progress=prog, threads=threads)
    dt = time.perf_counter() - t0
    result = {"messages": stats.messages, "keys": stats.keys, "consumeQueues": stats.consume_queues,
              "indexFiles": stats.index_files, "commitLogEnd": stats.commit_log_end, "seconds": round(dt, 3),
              "out": str(out or store)}
    if stats.stop_error:
        result["stoppedAt"] = stats.stop_error
    if as_json:
        click.echo(to_json(result))
    else:
        click.echo(f"rebuilt {stats.consume_queues} ConsumeQueues and {stats.index_files} index files from "
                   f"{stats.messages} messages ({stats.keys} keys) in {dt:.2f} s into {out or store}")
        if stats.stop_error:
            click.echo(f"warning: the CommitLog scan stopped early: {stats.stop_error}", err=True)


def _register_more() -> None:
    """Commands that live in their own modules (report, get-by-msgid)."""
    from mqstore.cli.report import rocketmq_report
    from mqstore.cli.rocketmq_msgid import get_by_msgid

    group.add_command(rocketmq_report)
    group.add_command(get_by_msgid)


_register_more()
