"""`mqstore rocketmq ...`: inspect, dump, query, verify and rebuild a RocketMQ store directory."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mqstore.cli.common import echo_json_lines, handle_errors, json_option, print_table, progress, to_json
from mqstore.cli.rocketmq_store import commitlog_options, open_store, store_config
from mqstore.errors import MqStoreError

# Any path: a file, an empty directory or another layout's directory is refused by the store
# itself with one error line (exit 2), not by click's usage message.
store_arg = click.argument("store", type=click.Path(path_type=Path))
LONG_MAX = 2**63 - 1


def _geometry_options(f):
    f = click.option("--cq-file-size", type=click.IntRange(min=20), default=None, help="ConsumeQueue segment size (bytes).")(f)
    f = click.option("--items", type=click.IntRange(min=2), default=None, help="IndexFile items per file.")(f)
    f = click.option("--slots", type=click.IntRange(min=1), default=None, help="IndexFile hash slots.")(f)
    return click.option("--commitlog-file-size", type=click.IntRange(min=4096), default=None,
                        help="CommitLog segment size (default: detected from the files).")(f)


# the store a command works on: one home for --commitlog and the configuration (cli.rocketmq_store)
_commitlog_options = commitlog_options


def _config(store: Path, commitlog_file_size=None, slots=None, items=None, cq_file_size=None):
    """The store's configuration: the options given, the rest detected from the files."""
    return store_config(store, commitlog_file_size, slots, items, cq_file_size)


def _open(store: Path, read_only: bool = True, *, defer_valid_end: bool = False):
    return open_store(store, read_only, defer_valid_end=defer_valid_end)


def _print_messages(messages, as_json: bool, title: str, decode: str | None = None) -> None:
    from mqstore.cli.filters import print_messages

    print_messages(messages, as_json, title, decode)


@click.group(name="rocketmq")
def group() -> None:
    """Inspect, query, verify and rebuild RocketMQ store directories (read-only unless asked)."""


@group.command()
@store_arg
@_commitlog_options
@json_option
@handle_errors
def inspect(store: Path, as_json: bool) -> None:
    """Files, topics, queues, message counts, index files, checkpoint, clean/unclean shutdown."""
    from mqstore.storage.rocketmq import config_files
    from mqstore.storage.rocketmq.layout import commit_log_dirs

    with _open(store) as s:
        eng = s.engine
        cl = eng.commit_log
        cfg = eng.config
        cl_dirs, cl_ro = commit_log_dirs(store, cfg.store_path_commit_log, cfg.read_only_commit_log_store_paths)
        rocks = eng.rocksdb_cq.describe() if eng.rocksdb_cq is not None else None
        from mqstore.storage.rocketmq.layout import consumequeue_dir, is_rocksdb_dir

        # a database beside the queue directories (a combined store, or one migrated back): named, not read
        unread_db = (sorted(p.name for p in consumequeue_dir(store).iterdir() if p.is_file())
                     if rocks is None and is_rocksdb_dir(consumequeue_dir(store)) else None)
        queues = [{"topic": t, "queueId": q, "minOffset": cq.min_offset_in_queue, "maxOffset": cq.max_offset_in_queue,
                   "messages": cq.max_offset_in_queue - cq.min_offset_in_queue,
                   "files": len(cq.queue.files) if rocks is None else 0,
                   "extFiles": len(cq.ext.queue.files) if cq.ext is not None else 0,
                   "lmq": t.startswith("%LMQ%")}
                  for (t, q), cq in sorted(eng.consume_queues.items())]
        conf = [{"name": c.name, "size": c.size, "kind": c.kind, "entries": c.entries, "error": c.error}
                for c in config_files.list_config_files(store)]
        try:
            delay_offsets = config_files.delay_offsets(store)
        except MqStoreError:
            delay_offsets = {}  # the error is shown with the file in "config"
        levels = cfg.message_delay_level.split()
        delay = []
        for (t, q), cq in sorted(eng.consume_queues.items()):
            if t != config_files.SCHEDULE_TOPIC:
                continue
            level = q + 1
            done = delay_offsets.get(level)
            delay.append({"level": level, "delay": levels[q] if q < len(levels) else None, "queueId": q,
                          "maxOffset": cq.max_offset_in_queue, "deliveredOffset": done,
                          "pending": None if done is None else cq.max_offset_in_queue - done})
        for level, done in sorted(delay_offsets.items()):
            if (config_files.SCHEDULE_TOPIC, level - 1) not in eng.consume_queues:
                delay.append({"level": level, "delay": levels[level - 1] if 0 < level <= len(levels) else None,
                              "queueId": level - 1, "maxOffset": None, "deliveredOffset": done, "pending": None})
        info = {
            "store": str(store),
            "cleanShutdown": eng.last_exit_ok,
            "commitLog": {"segmentSize": cl.file_size, "segments": [f.path.name for f in cl.queue.files],
                          "dirs": cl_dirs, "readOnlyDirs": cl_ro,
                          "minOffset": cl.min_offset, "maxOffset": cl.max_offset},
            "storeType": eng.store_type,
            "rocksdbConsumeQueue": rocks,
            "rocksdbConsumeQueueNotRead": unread_db,
            "consumeQueueExt": {"enabled": cfg.enable_consume_queue_ext,
                                "fileSize": cfg.mapped_file_size_consume_queue_ext,
                                "queues": sum(1 for q in queues if q["extFiles"])},
            "queues": queues,
            "lmq": {"enabled": cfg.enable_lmq, "multiDispatch": cfg.enable_multi_dispatch,
                    "queues": sum(1 for q in queues if q["lmq"]),
                    "messages": sum(q["messages"] for q in queues if q["lmq"])},
            "config": conf,
            "delayQueues": delay,
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
        if hasattr(cl, "info"):  # a DLedger CommitLog (enableDLegerCommitLog)
            info["dledger"] = cl.info()
    from mqstore.cli.rocketmq_bcq import inspect_section, print_inspect_section
    from mqstore.cli.rocketmq_timer import print_timer_info, timer_info
    from mqstore.storage.rocketmq.timeindex import inspect_sidecars

    info["timer"] = timer_info(store)  # None without timer files; problems listed, not raised
    tix = inspect_sidecars(store)
    if tix:
        info["timeIndex"] = tix
    batch = inspect_section(store)
    if batch is not None:
        info["batchConsumeQueue"] = batch
    if as_json:
        click.echo(to_json(info))
        return
    click.echo(f"store {store}: {'clean' if info['cleanShutdown'] else 'UNCLEAN'} shutdown")
    c = info["commitLog"]
    what = "commitlog (DLedger data files)" if "dledger" in info else "commitlog"
    click.echo(f"{what}: {len(c['segments'])} segments of {c['segmentSize']} bytes, offsets [{c['minOffset']}, {c['maxOffset']})")
    if len(c["dirs"]) > 1 or c["readOnlyDirs"] or c["dirs"] != [str((store / "commitlog").resolve())]:
        click.echo(f"commitlog directories: {', '.join(c['dirs'])}"
                   + (f"; read-only: {', '.join(c['readOnlyDirs'])}" if c["readOnlyDirs"] else ""))
    if "dledger" in info:
        _print_dledger(info["dledger"])
    if rocks is not None:
        click.echo(f"consumequeue: RocksDB database (storeType=defaultRocksDB), column families "
                   f"{', '.join(rocks['columnFamilies'])}, {rocks['queues']} queues, dispatched up to CommitLog "
                   f"offset {rocks['dispatchedPhyOffset']}")
        print_table("consumequeue/", ["name", "size"], [(f["name"], f["size"]) for f in rocks["files"]])
        for text in rocks["badOffsetEntries"]:
            click.echo(f"warning: consumequeue offset family: {text}", err=True)
    if unread_db is not None:
        click.echo(f"consumequeue/ also holds a RocksDB database (not read: the queue directories are; "
                   f"--store-type defaultRocksDB reads it): {', '.join(unread_db)}")
    x = info["consumeQueueExt"]
    if x["enabled"] or x["queues"]:
        click.echo(f"consumequeue_ext: {x['queues']} queues with ext files of {x['fileSize']} bytes")
    if info["lmq"]["queues"]:
        lq = info["lmq"]
        click.echo(f"LMQ (multi-dispatch): {lq['queues']} %LMQ% queues, {lq['messages']} units "
                   "(listed with the queues)")
    print_table("queues", ["topic", "queueId", "minOffset", "maxOffset", "messages", "files", "extFiles"],
                [(q["topic"], q["queueId"], q["minOffset"], q["maxOffset"], q["messages"], q["files"], q["extFiles"])
                 for q in info["queues"]])
    if info["delayQueues"]:
        print_table("delay queues (SCHEDULE_TOPIC_XXXX, config/delayOffset.json)",
                    ["level", "delay", "queueId", "maxOffset", "deliveredOffset", "pending"],
                    [tuple(d.values()) for d in info["delayQueues"]])
    if info["config"]:
        print_table("config/", ["name", "size", "kind", "entries", "error"], [tuple(f.values()) for f in info["config"]])
    print_table("index files", ["name", "beginTimestamp", "endTimestamp", "beginPhyOffset", "endPhyOffset", "hashSlotCount", "indexCount", "full"],
                [tuple(f.values()) for f in info["indexFiles"]])
    print_table("checkpoint", list(info["checkpoint"]), [tuple(info["checkpoint"].values())])
    if info["timer"] is not None:
        print_timer_info(info["timer"])
    if tix:
        print_table("time index (consumequeue_timeindex/)", ["file", "kind", "topic", "queueId", "interval", "entries",
                                                             "firstTimestamp", "lastTimestamp", "error"],
                    [(f["file"], f["kind"], f["topic"], f["queueId"], f["interval"], f["entries"], f["firstTimestamp"],
                      f["lastTimestamp"], f["error"]) for f in tix])
    if batch is not None:
        print_inspect_section(batch)


def _print_dledger(d: dict) -> None:
    click.echo(f"dledger: member {d['selfId']} at {d['home']}: {d['entries']} entries"
               + (f" (index {d['firstIndex']}..{d['lastIndex']}, term {d['firstTerm']}..{d['lastTerm']})"
                  if d["entries"] else "")
               + f", {len(d['dataFiles'])} data files of {d['dataFileSize']} bytes, {len(d['indexFiles'])} index files,"
               f" data end {d['dataEnd']}")
    click.echo(f"dledger checkpoint: endIndex {d['checkpointEndIndex']}, committedIndex {d['committedIndex']}, "
               f"currTerm {d['currTerm']}")
    if d["uncommittedEntries"]:
        click.echo(f"dledger: {d['uncommittedEntries']} entries past the committed index (read and dispatched "
                   "here; the broker dispatches them once committed)")
    if d["stoppedAt"]:
        click.echo(f"dledger: the entry walk stopped early: {d['stoppedAt']}")
    if d["fileError"]:
        click.echo(f"dledger: {d['fileError']}")


@group.command()
@store_arg
@_commitlog_options
@click.option("--topic", default=None, help="Only messages of this topic.")
@click.option("--from-offset", type=click.IntRange(min=0), default=0, help="CommitLog offset to start at.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many messages.")
@click.option("--from-time", default=None, help="Store time from (inclusive): ISO 8601 or epoch ms.")
@click.option("--to-time", default=None, help="Store time to (inclusive): ISO 8601 or epoch ms.")
@click.option("--key", default=None, help="Only messages with this key (a KEYS piece or the unique key).")
@click.option("--tag", default=None, help="Only messages with this tag (A||B: either).")
@click.option("--decode", default=None, help="Show bodies as utf8, hex or json (JSON output: in place of base64).")
@click.option("--timer", "timer", is_flag=True, default=False,
              help="Pending timer messages (timerlog units not yet due) with their real topic and delivery time.")
@click.option("--timer-all", "timer_all", is_flag=True, default=False,
              help="With --timer: every timerlog unit, delivered ones too.")
@json_option
@handle_errors
def dump(store: Path, topic: str | None, from_offset: int, limit: int | None, from_time: str | None,
         to_time: str | None, key: str | None, tag: str | None, decode: str | None, as_json: bool,
         timer: bool = False, timer_all: bool = False) -> None:
    """Every message of the CommitLog with every record field (optionally filtered)."""
    if timer or timer_all:
        from mqstore.cli.rocketmq_timer import dump_timer

        with _open(store) as s:
            dump_timer(store, s.engine, as_json, limit, timer_all)
        return
    from contextlib import ExitStack

    from mqstore.cli.filters import check_decoder, check_time_range, parse_time
    from mqstore.storage.rocketmq.dump import candidate_rows, matches

    lo, hi = parse_time(from_time, "--from-time"), parse_time(to_time, "--to-time")
    check_time_range(lo, hi)
    check_decoder(decode)
    from mqstore.formats.rocketmq.javahash import parse_sub_expression

    selected = parse_sub_expression(tag)  # a consumer's subscription rule ("*": every tag)
    tags = sorted(selected) if selected is not None else None
    # the dump's scan of the whole log is recovery's walk too (not from an offset: that one is walked first)
    with _open(store, defer_valid_end=True) as s, progress("dump") as prog, ExitStack() as stack:
        cl = s.engine.commit_log
        out: list = []
        n = 0
        start = max(from_offset, cl.min_offset)
        total = max(cl.max_offset - start, 0)
        # JSON lines without an exact per-record filter: written in bulk by compiled passes
        bulk = as_json and key is None and tags is None and decode is None and not hasattr(cl, "entry_at")
        sink = _BulkJsonLines() if bulk else None
        # the bulk path scans the next batch in a worker thread while this one is written
        # (without the index keys: they only serve the --key filter; without any column but the
        # offsets when no filter reads them)
        columns = topic is not None or lo is not None or hi is not None
        batches = (cl.scan_bounded(start, cl.max_offset, keys=False, **({} if columns else {"columns": False}))
                   if sink is not None and hasattr(cl, "scan_bounded")
                   else cl.scan(start, cl.max_offset, max_records=1 << 16))
        stack.callback(batches.close)  # (the read-ahead ends before the store is closed)
        for batch in batches:
            offs = batch.commit_log_offset[candidate_rows(batch, topic, lo, hi, key, tags)]
            if sink is not None:
                if limit is not None:
                    offs = offs[: limit - n]
                done = sink.write(cl, offs)  # the rest (from a record that needs it): per record
                n += done
                offs = offs[done:]
            for off in offs.tolist():
                rec = cl.read_record(off)
                if not matches(rec, key, tags):
                    continue
                m = rec
                if as_json:
                    row = _json_message(m, decode)
                    entry = cl.entry_at(off) if hasattr(cl, "entry_at") else None
                    if entry is not None:  # a DLedger CommitLog: the entry that wraps the message
                        row["dledger"] = {"index": entry.index, "term": entry.term, "pos": entry.pos}
                    click.echo(to_json(row))
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


class _BulkJsonLines:
    """The JSON lines of ``dump --json`` for many records at once
    (:func:`~mqstore.kernels.rocketmq.json_lines.json_lines`, the same bytes as ``to_json`` of each
    message), written to the binary stdout."""

    def __init__(self) -> None:
        import sys

        enc = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "")
        self.stream = getattr(sys.stdout, "buffer", None) if enc == "utf8" else None
        self.scratch: list = []  # the output buffers, kept from batch to batch

    def write(self, cl, offs) -> int:  # type: ignore[no-untyped-def]
        """Write the lines of the records at ``offs`` (one batch of a scan) in pieces as they are
        made; returns how many of the records (a prefix of ``offs``) were written: the caller
        takes the per-record path for the rest."""
        import sys
        from contextlib import closing

        from mqstore.kernels.rocketmq.json_lines import json_line_chunks

        if self.stream is None or not len(offs):
            return 0
        mf = cl.segment_for(int(offs[0]))
        base = mf.file_from_offset
        if int(offs[-1]) >= mf.end_offset:  # a batch never spans segments; be safe
            return 0
        sys.stdout.flush()
        done = 0
        with closing(json_line_chunks(mf.array[: mf.wrote_position], base, offs - base,
                                       scratch=self.scratch)) as pieces:
            for data, records in pieces:  # (closed at once on an error: the running calls end first)
                self.stream.write(data)
                done += records
        self.stream.flush()
        return done


def _json_message(m, decode: str | None) -> dict:
    from mqstore.cli.filters import message_json

    return message_json(m, decode)


@group.command()
@store_arg
@_commitlog_options
@click.option("--topic", required=True)
@click.option("--queue", "queue_id", type=click.IntRange(min=0), required=True)
@click.option("--offset", type=click.IntRange(min=0), required=True, help="Queue offset.")
@click.option("--count", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--tag", "tag", default=None, metavar="EXPR",
              help="Only messages whose tag matches (\"TagA || TagB\"), found through the ConsumeQueue tags "
                   "codes (and the ConsumeQueueExt); --count then counts matches.")
@json_option
@handle_errors
def get(store: Path, topic: str, queue_id: int, offset: int, count: int, tag: str | None, as_json: bool) -> None:
    """Messages of a queue by queue offset (a BatchCQ topic's queue: the batch records covering
    the offsets, through batchconsumequeue/)."""
    from mqstore.cli.rocketmq_bcq import batch_get, print_batch_get

    rows = batch_get(store, topic, queue_id, offset, count, lambda: _config(store)) if tag is None else None
    if rows is not None:
        print_batch_get(rows, as_json, f"{topic}/{queue_id} (batch queue) from {offset}")
        return
    with _open(store) as s:
        if tag is not None:
            _print_messages(s.get_by_tag(topic, queue_id, tag, offset, count), as_json,
                            f"{topic}/{queue_id} tag {tag} from {offset}")
            return
        _print_messages(s.get(topic, queue_id, offset, count), as_json, f"{topic}/{queue_id} from {offset}")


@group.command("query-key")
@store_arg
@_commitlog_options
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
@_commitlog_options
@click.option("--topic", required=True)
@click.option("--queue", "queue_id", type=click.IntRange(min=0), required=True)
@click.option("--timestamp", type=int, required=True, help="Store time (ms).")
@click.option("--boundary", type=click.Choice(["lower", "upper"]), default="lower", show_default=True,
              help="lower: first message stored at or after the time; upper: last one stored at or before it.")
@click.option("--semantics", type=click.Choice(["exact", "broker"]), default="exact", show_default=True,
              help="exact: the true boundary (sparse time index when present); broker: what "
                   "getOffsetInQueueByTime returns, its quirks included.")
@json_option
@handle_errors
def query_time(store: Path, topic: str, queue_id: int, timestamp: int, boundary: str, as_json: bool,
               semantics: str = "exact") -> None:
    """The queue offset for a store time (ConsumeQueue time search)."""
    with _open(store) as s:
        off = s.offset_for_time(topic, queue_id, timestamp, boundary, semantics)
        if as_json:
            click.echo(to_json({"topic": topic, "queueId": queue_id, "timestamp": timestamp, "boundary": boundary,
                                "semantics": semantics, "queueOffset": off}))
        else:
            click.echo(off)


@group.command()
@store_arg
@_commitlog_options
@json_option
@handle_errors
def verify(store: Path, as_json: bool) -> None:
    """CRC of every record, ConsumeQueue units and IndexFile items against the CommitLog.
    Exit code 0 only when clean."""
    from mqstore.storage.rocketmq.verify import verify_store

    with progress("verify") as prog:
        rep = verify_store(store, _config(store), progress=prog)
    from mqstore.cli.rocketmq_bcq import verify_problems

    batch = verify_problems(store, _config(store))
    if batch is not None:
        rep.problems.extend(batch[1])
    if as_json:
        click.echo(to_json({"ok": rep.ok, "messages": rep.messages, "cqUnits": rep.cq_units, "extUnits": rep.ext_units,
                            "indexItems": rep.index_items, "problems": rep.problems}))
    else:
        for p in rep.problems:
            click.echo(p)
        ext = f" ({rep.ext_units} through consumequeue_ext)" if rep.ext_units else ""
        click.echo(f"{rep.messages} messages, {rep.cq_units} ConsumeQueue units{ext}, {rep.index_items} index items: "
                   f"{'clean' if rep.ok else f'{len(rep.problems)} problems'}")
    sys.exit(0 if rep.ok else 1)


@group.command("rebuild-index")
@store_arg
@_commitlog_options
@click.option("--out", type=click.Path(path_type=Path), default=None,
              help="Write consumequeue/, index/ and checkpoint here (default: in place).")
@_geometry_options
@click.option("--threads", type=click.IntRange(min=1), default=None,
              help="Threads for the scan and the index build (default: CPUs less the one the read-ahead "
                   "scan keeps busy, at least 1, at most 4; 1 = sequential).")
@click.option("--bcq-file-size", type=click.IntRange(min=46), default=None,
              help="BatchConsumeQueue file size (default: the store's, else 300000 units).")
@click.option("--lmq/--no-lmq", "lmq", default=None,
              help="Dispatch LMQ / multi-dispatch queues too (enableLmq + enableMultiDispatch; default: on when "
                   "the store has consumequeue/%LMQ%... or config/lmqConsumerOffset.json).")
@click.option("--time-index/--no-time-index", "time_index", default=None,
              help="Also write the sparse time index (consumequeue_timeindex/; default: when the store has one).")
@click.option("--time-index-interval", type=click.IntRange(min=1, max=1 << 20), default=None,
              help="Units between two time index entries (default 2: a time lookup reads at most one record).")
@click.option("--to", "to", type=click.Choice(["file-cq"]), default=None,
              help="file-cq: write the classic file ConsumeQueue (consumequeue/<topic>/<queueId>/); required "
                   "for a store whose ConsumeQueue is in RocksDB (storeType=defaultRocksDB) migrating back to "
                   "storeType=default: the database files stay beside the new queue directories.")
@json_option
@handle_errors
def rebuild_index(store: Path, out: Path | None, commitlog_file_size: int | None, slots: int | None,
                  items: int | None, cq_file_size: int | None, threads: int | None, bcq_file_size: int | None,
                  as_json: bool, time_index: bool | None = None, time_index_interval: int | None = None,
                  to: str | None = None, lmq: bool | None = None) -> None:
    """Regenerate consumequeue/, index/ and (for queue.type=BatchCQ topics) batchconsumequeue/
    from the CommitLog alone."""
    import gc
    import time

    from mqstore.cli import main as entry

    # a one-shot process: no cyclic collection over the modules imported here (numpy, storage:
    # ~40 collections, ~15 ms), and none later over what they made (frozen: never garbage)
    gc_on = gc.isenabled() and entry.one_shot
    if gc_on:
        gc.disable()
    try:
        from mqstore.errors import RocksDBError
        from mqstore.storage.rocketmq.batch_consumequeue import rebuild_store_batch_queues
        from mqstore.storage.rocketmq.config import STORE_TYPE_ROCKSDB
        from mqstore.storage.rocketmq.layout import store_type_of
        from mqstore.storage.rocketmq.rebuild import keep_freed_memory, rebuild_indexes
    finally:
        if gc_on:
            gc.freeze()
            gc.enable()
    keep_freed_memory()  # a one-shot process: the batches reuse freed memory (no page faults)
    cfg = _config(store, commitlog_file_size, slots, items, cq_file_size)
    if to is None and store_type_of(store, cfg) == STORE_TYPE_ROCKSDB:
        raise RocksDBError(f"{store} keeps its ConsumeQueue in RocksDB (storeType=defaultRocksDB), which mqstore "
                           "does not write; `--to file-cq` writes the classic file ConsumeQueue (and index/) "
                           "for a broker migrating back to storeType=default")
    if time_index_interval is not None:
        cfg.time_index_interval = time_index_interval
        if time_index is None:
            time_index = True
    if lmq is not None:
        cfg.enable_lmq = cfg.enable_multi_dispatch = lmq
    t0 = time.perf_counter()
    # (an in-place rebuild takes the store's writer lock itself)
    with progress("rebuilding") as prog:
        stats = rebuild_indexes(store, out, config=cfg, progress=prog, threads=threads, time_index=time_index)
    bcq_queues, bcq_units, bcq_problems = rebuild_store_batch_queues(store, cfg, out, bcq_file_size)
    dt = time.perf_counter() - t0
    result = {"messages": stats.messages, "keys": stats.keys, "consumeQueues": stats.consume_queues,
              "indexFiles": stats.index_files, "commitLogEnd": stats.commit_log_end, "seconds": round(dt, 3),
              "out": str(out or store), "batchQueues": bcq_queues, "batchUnits": bcq_units}
    if bcq_problems:
        result["batchProblems"] = bcq_problems
    if stats.stop_error:
        result["stoppedAt"] = stats.stop_error
    if as_json:
        click.echo(to_json(result))
    else:
        click.echo(f"rebuilt {stats.consume_queues} ConsumeQueues and {stats.index_files} index files from "
                   f"{stats.messages} messages ({stats.keys} keys) in {dt:.2f} s into {out or store}")
        if bcq_queues:
            click.echo(f"rebuilt {bcq_queues} BatchConsumeQueues ({bcq_units} units)")
        for p in bcq_problems:
            click.echo(f"warning: {p}", err=True)
        if stats.stop_error:
            click.echo(f"warning: the CommitLog scan stopped early: {stats.stop_error}", err=True)


@group.command()
@store_arg
@_commitlog_options
@click.option("--group", "group_name", default=None, help="Only this consumer group.")
@json_option
@handle_errors
def consumers(store: Path, group_name: str | None, as_json: bool) -> None:
    """Consumer groups with their committed offsets (config/consumerOffset.json, or the RocksDB
    config stores config/rdb/ and config/consumerOffsets/ of 5.x; with LMQ,
    config/lmqConsumerOffset.json) and the lag against each ConsumeQueue's max offset (file or
    RocksDB ConsumeQueue): mqadmin consumerProgress, offline."""
    from mqstore.storage.rocketmq import config_files

    offsets = config_files.consumer_offsets(store)  # a bad file fails before the store is opened
    with _open(store) as s:
        eng = s.engine

        def queue_range(topic: str, qid: int) -> tuple[int, int] | None:
            cq = eng.consume_queues.get((topic, qid))
            return None if cq is None else (cq.min_offset_in_queue, cq.max_offset_in_queue)

        rows = config_files.consumer_progress(offsets, queue_range)
    if group_name is not None:
        rows = [r for r in rows if r.group == group_name]
    if as_json:
        echo_json_lines({"group": r.group, "topic": r.topic, "queueId": r.queue_id, "brokerOffset": r.broker_offset,
                         "consumerOffset": r.consumer_offset, "minOffset": r.min_offset, "diff": r.diff} for r in rows)
        return
    if not rows:
        click.echo("no committed consumer offsets (config/consumerOffset.json, config/rdb/, config/consumerOffsets/, "
                   "config/lmqConsumerOffset.json)")
        return
    groups: dict[str, list] = {}
    for r in rows:
        groups.setdefault(r.group, []).append(r)
    for i, (g, grows) in enumerate(groups.items()):
        if i:
            click.echo("")
        w = max(6, *(len(r.topic) for r in grows))
        click.echo(f"consumer group {g}")
        click.echo(f"{'#Topic':<{w}}  {'#QID':<4}  {'#Broker Offset':<20}  {'#Consumer Offset':<20}  #Diff")
        for r in grows:
            click.echo(f"{r.topic:<{w}}  {r.queue_id:<4}  {r.broker_offset:<20}  {r.consumer_offset:<20}  {r.diff}")
        click.echo(f"Diff Total: {sum(r.diff for r in grows)}")


def _register_more() -> None:
    """Commands that live in their own modules (report, get-by-msgid)."""
    from mqstore.cli.report import rocketmq_report
    from mqstore.cli.rocketmq_bcq import bcq_group
    from mqstore.cli.rocketmq_msgid import get_by_msgid

    group.add_command(rocketmq_report)
    group.add_command(bcq_group)
    group.add_command(get_by_msgid)


_register_more()
