"""`mqstore spark ...` commands: thin wrappers over the jobs in :mod:`mqstore.spark`.

Every command takes ``--master`` (default ``local[*]``; ``--master ""`` keeps what ``spark-submit``
set) and repeatable ``--conf key=value``.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from mqstore.spark.session import DEFAULT_MASTER

F = TypeVar("F", bound=Callable[..., Any])


def spark_options(func: F) -> F:
    """Add ``--master`` and ``--conf`` to a command."""
    func = click.option("--conf", "conf", multiple=True, metavar="KEY=VALUE",
                        help="Spark configuration (repeatable).")(func)
    func = click.option("--master", default=default_master, show_default=DEFAULT_MASTER,
                        help="Spark master URL; empty keeps the one spark-submit set "
                             "(the default under spark-submit).")(func)
    return func


def default_master() -> str:
    """``local[*]``, or nothing (keep spark-submit's master) when run by ``spark-submit``."""
    return "" if os.environ.get("PYSPARK_GATEWAY_PORT") else DEFAULT_MASTER


def open_session(master: str, conf: tuple[str, ...], app_name: str) -> Any:
    """Parse ``--conf`` and start (or join) the SparkSession for a command."""
    from mqstore.spark.session import get_session, parse_conf

    return get_session(master or None, parse_conf(list(conf)), app_name=app_name)


def handle_spark_errors(func: F) -> F:
    """Report errors raised inside Spark (analysis, Python workers, streaming) as one line, exit 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except Exception as exc:
            try:
                from pyspark.errors import PySparkException
            except ImportError:  # pragma: no cover - pyspark missing
                raise exc from None
            if not isinstance(exc, PySparkException) and type(exc).__module__.split(".")[0] != "py4j":
                raise
            click.echo(f"error: {first_error_line(str(exc))}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def first_error_line(message: str) -> str:
    """The most useful line of a Spark error: the Python exception raised in a task (type and
    message, not the Py4J wrapper), or the worker Python that could not be started."""
    from mqstore.spark.cluster import explain_spark_error

    return explain_spark_error(message)


@click.group(name="spark")
def group() -> None:
    """Spark jobs over both layouts (rebuild indexes, streaming dispatch, query keys, export)."""


# ------------------------------------------------------------------------------ rebuild-index
import pathlib as _pathlib  # noqa: E402

from mqstore.cli import common as _cli_common  # noqa: E402


def _rich_progress(enabled: bool) -> Any:
    """A rich display of the job phases on stderr (tasks done per phase), or None."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

    return Progress("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    disable=not enabled, transient=False, console=_stderr_console())


def _stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True)


def _progress_callback(prog: Any) -> Callable[[str, int, int], None]:
    tasks: dict[str, Any] = {}

    def update(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = prog.add_task(phase, total=None)
        prog.update(tasks[phase], completed=done, total=total or None)

    return update


def _positive_option(name: str, value: int | None, minimum: int = 1) -> None:
    from mqstore.errors import InvalidArgumentError

    if value is not None and value < minimum:
        raise InvalidArgumentError(f"{name} must be ≥ {minimum}, got {value}")


@group.group(name="rebuild-index")
def rebuild_index() -> None:
    """Rebuild index files on Spark, byte-identical to the local rebuild-index commands."""


@rebuild_index.command("rocketmq")
@click.argument("store", type=click.Path(file_okay=False, path_type=_pathlib.Path))
@click.option("--out", type=click.Path(path_type=_pathlib.Path), required=True,
              help="Write consumequeue/, index/ and checkpoint here (the store itself: rebuilt in place).")
@click.option("--slots", type=int, default=None, help="IndexFile hash slots (default: detected, else 5000000).")
@click.option("--items", type=int, default=None, help="IndexFile items per file (default: detected, else 20000000).")
@click.option("--cq-file-size", type=int, default=None, help="ConsumeQueue segment size in bytes (default: detected).")
@click.option("--check-crc", is_flag=True, help="Stop at a record whose body CRC is wrong (as recovery does).")
@click.option("--time-index/--no-time-index", "time_index", default=None,
              help="Also write the sparse time index (consumequeue_timeindex/; default: when the store has one).")
@_cli_common.json_option
@spark_options
@_cli_common.handle_errors
@handle_spark_errors
def rebuild_index_rocketmq(store: _pathlib.Path, out: _pathlib.Path, slots: int | None, items: int | None, cq_file_size: int | None,
                           check_crc: bool, as_json: bool, master: str, conf: tuple[str, ...],
                           time_index: bool | None = None) -> None:
    """CommitLog → ConsumeQueues, IndexFiles and checkpoint on Spark (same bytes as
    `mqstore rocketmq rebuild-index`)."""
    from mqstore.cli.rocketmq import _config
    from mqstore.spark.rebuild import rebuild_rocketmq

    _positive_option("--slots", slots)
    _positive_option("--items", items, 2)
    _positive_option("--cq-file-size", cq_file_size, 20)
    cfg = _config(store, None, slots, items, cq_file_size)
    spark = open_session(master, conf, "mqstore rebuild-index rocketmq")
    with _rich_progress(sys.stderr.isatty() and not as_json) as prog:
        stats = rebuild_rocketmq(spark, store, out, hash_slot_num=cfg.hash_slot_num, index_num=cfg.index_num,
                                 cq_file_size=cfg.consume_queue_file_size,
                                 commit_log_file_size=cfg.commit_log_file_size, check_crc=check_crc,
                                 progress=_progress_callback(prog), time_index=time_index)
    if as_json:
        click.echo(_cli_common.to_json(stats.as_dict()))
    else:
        _cli_common.print_table("rebuilt on Spark", ["messages", "keys", "consume queues", "index files", "CommitLog end",
                                         "scan tasks", "MB/s", "seconds"],
                    [(stats.messages, stats.keys, stats.consume_queues, stats.index_files, stats.commit_log_end,
                      stats.scan_tasks, f"{stats.bytes_scanned / 1e6 / max(stats.seconds, 1e-9):,.1f}",
                      stats.seconds)])
    if stats.stop_error:
        click.echo(f"warning: the CommitLog scan stopped at {stats.commit_log_end}: {stats.stop_error}", err=True)


@rebuild_index.command("kafka")
@click.argument("path", type=click.Path(path_type=_pathlib.Path))
@click.option("--out", type=click.Path(path_type=_pathlib.Path), required=True,
              help="Write the indexes here (a log directory's partitions get one sub-directory each).")
@click.option("--index-interval-bytes", type=int, default=4096, show_default=True, help="index.interval.bytes")
@click.option("--max-index-bytes", type=int, default=10485760, show_default=True, help="segment.index.bytes")
@click.option("--key-index", is_flag=True, help="Also write each segment's key index (<base>.keyindex).")
@click.option("--key-header", default=None, help="With --key-index: also index the values of this header.")
@_cli_common.json_option
@spark_options
@_cli_common.handle_errors
@handle_spark_errors
def rebuild_index_kafka(path: _pathlib.Path, out: _pathlib.Path, index_interval_bytes: int, max_index_bytes: int,
                        key_index: bool, key_header: str | None, as_json: bool,
                        master: str, conf: tuple[str, ...]) -> None:
    """.log → .index/.timeindex (and with --key-index .keyindex) of a segment, a partition or a
    log directory, one task per segment (same bytes as `mqstore kafka rebuild-index`)."""
    from mqstore.spark.rebuild import find_kafka_segments, rebuild_kafka

    _positive_option("--index-interval-bytes", index_interval_bytes, 0)
    _positive_option("--max-index-bytes", max_index_bytes, 12)
    if key_header is not None and not key_index:
        from mqstore.errors import InvalidArgumentError

        raise InvalidArgumentError("--key-header needs --key-index")
    from mqstore.formats.kafka.keyindex import check_header_name

    check_header_name(key_header)
    find_kafka_segments(path, out)  # a bad path fails before a session is started
    spark = open_session(master, conf, "mqstore rebuild-index kafka")
    with _rich_progress(sys.stderr.isatty() and not as_json) as prog:
        stats = rebuild_kafka(spark, path, out, index_interval_bytes=index_interval_bytes,
                              max_index_bytes=max_index_bytes, key_index=key_index, key_header=key_header,
                              progress=_progress_callback(prog))
    if as_json:
        click.echo(_cli_common.to_json(stats.as_dict()))
    else:
        _cli_common.print_table("rebuilt on Spark", ["partition", "segment", "batches", "valid bytes", "offset entries",
                                         "time entries", "next offset"],
                    [(r["partition"], _pathlib.Path(str(r["log_path"])).name, r["batches"], r["valid_bytes"],
                      r["offset_entries"], r["time_entries"], r["next_offset"]) for r in stats.results])
    for r in stats.results:
        if r["truncated_bytes"]:
            click.echo(f"warning: {r['log_path']}: {r['truncated_bytes']} invalid bytes from position "
                       f"{r['valid_bytes']} ({r['error'] or r['stop']}); indexes cover the valid prefix", err=True)


# ------------------------------------------------------------------------------ dispatch, query-keys, export
def _geometry(store: _pathlib.Path, slots: int | None, items: int | None, cq_file_size: int | None) -> Any:
    from mqstore.cli.rocketmq import _config

    _positive_option("--slots", slots)
    _positive_option("--items", items, 2)
    _positive_option("--cq-file-size", cq_file_size, 20)
    return _config(store, None, slots, items, cq_file_size)


@group.command("dispatch")
@click.argument("store", type=click.Path(file_okay=False, path_type=_pathlib.Path))
@click.option("--checkpoint", type=click.Path(file_okay=False, path_type=_pathlib.Path), required=True,
              help="Spark checkpoint directory (the dispatch position, like the broker's reputFromOffset).")
@click.option("--once", is_flag=True, help="Dispatch what the CommitLog holds now, then stop (availableNow).")
@click.option("--trigger-interval", default="1 second", show_default=True, help="Micro-batch interval when tailing.")
@click.option("--max-bytes-per-trigger", type=int, default=None, help="CommitLog bytes per micro-batch at most.")
@click.option("--slots", type=int, default=None, help="IndexFile hash slots (default: detected, else 5000000).")
@click.option("--items", type=int, default=None, help="IndexFile items per file (default: detected, else 20000000).")
@click.option("--cq-file-size", type=int, default=None, help="ConsumeQueue segment size in bytes (default: detected).")
@_cli_common.json_option
@spark_options
@_cli_common.handle_errors
@handle_spark_errors
def dispatch(store: _pathlib.Path, checkpoint: _pathlib.Path, once: bool, trigger_interval: str,
             max_bytes_per_trigger: int | None, slots: int | None, items: int | None, cq_file_size: int | None,
             as_json: bool, master: str, conf: tuple[str, ...]) -> None:
    """Keep STORE's ConsumeQueues and IndexFiles up to date from its CommitLog as a Structured
    Streaming query (the broker's reput service); the store's writer must run with
    dispatch_enabled=False.  Without --once it tails the CommitLog until interrupted (Ctrl-C)."""
    from mqstore.spark.dispatch import start_dispatch

    _positive_option("--max-bytes-per-trigger", max_bytes_per_trigger)
    cfg = _geometry(store, slots, items, cq_file_size)
    spark = open_session(master, conf, "mqstore dispatch")
    query = start_dispatch(spark, store, checkpoint, once=once, trigger_interval=trigger_interval,
                           max_bytes_per_trigger=max_bytes_per_trigger, config=cfg)
    seen: set[int] = set()
    totals = {"batches": 0, "messages": 0, "commitLogOffset": None}

    def report(prog: Any, task: Any) -> None:
        import json as _json

        for p in query.recentProgress:
            if p["batchId"] in seen:
                continue
            seen.add(p["batchId"])
            if p["numInputRows"]:
                totals["batches"] += 1
                totals["messages"] += int(p["numInputRows"])
            for src in p.get("sources", []):
                end = src.get("endOffset")
                if end:
                    totals["commitLogOffset"] = int((_json.loads(end) if isinstance(end, str) else end)["commitLogOffset"])
            prog.update(task, description=f"dispatched {totals['messages']:,} messages in {totals['batches']} "
                                          f"micro-batches, at commitLogOffset {totals['commitLogOffset']}")

    show = sys.stderr.isatty() and not as_json
    with _rich_progress(show) as prog:
        task = prog.add_task("dispatching", total=None)
        try:
            while query.isActive:
                query.awaitTermination(0.5)
                report(prog, task)
        except KeyboardInterrupt:
            query.stop()
        report(prog, task)
    if query.exception() is not None:
        query.awaitTermination()  # raises the query's error (reported by handle_spark_errors)
    if as_json:
        click.echo(_cli_common.to_json(totals))
    else:
        _cli_common.print_table("dispatch", ["micro-batches", "messages", "commitLogOffset"],
                                [(totals["batches"], totals["messages"], totals["commitLogOffset"])])


@group.command("query-keys")
@click.argument("stores", nargs=-1, required=True, type=click.Path(file_okay=False, path_type=_pathlib.Path))
@click.option("--layout", type=click.Choice(["rocketmq", "kafka"]), default="rocketmq", show_default=True,
              help="rocketmq: STORES are RocketMQ stores; kafka: Kafka log (or partition) directories, looked up "
              "through their key indexes (<base>.keyindex).")
@click.option("--topic", default=None, help="Topic of the keys (rocketmq).")
@click.option("--header", default=None, help="kafka: look the keys up in this header's values instead of record keys.")
@click.option("--keys-file", type=click.Path(dir_okay=False, path_type=_pathlib.Path), required=True,
              help="Text file with one key per line.")
@click.option("--begin", type=int, default=None, help="Earliest store timestamp (ms, inclusive).")
@click.option("--end", type=int, default=None, help="Latest store timestamp (ms, inclusive).")
@click.option("--broker-names", default=None, help="Comma-separated broker names, one per store (default: directory names).")
@click.option("--no-body", is_flag=True, help="Leave message bodies out.")
@_cli_common.json_option
@spark_options
@_cli_common.handle_errors
@handle_spark_errors
def query_keys_cmd(stores: tuple[_pathlib.Path, ...], layout: str, topic: str | None, header: str | None,
                   keys_file: _pathlib.Path, begin: int | None, end: int | None, broker_names: str | None,
                   no_body: bool, as_json: bool, master: str, conf: tuple[str, ...]) -> None:
    """Look up every key of --keys-file in the IndexFiles of all STORES at once; print the messages
    whose KEYS (or unique key) really hold the key, per key and broker newest first.  With
    --layout kafka: in the key indexes of the Kafka log directories STORES; print the records
    whose key (or --header value) is the key."""
    from mqstore.errors import InvalidArgumentError
    from mqstore.spark.query import query_keys, read_keys_file

    if layout == "kafka":
        from mqstore.spark.query_kafka import read_kafka_keys_file

        _query_keys_kafka(stores, header, read_kafka_keys_file(keys_file), begin, end, as_json, master, conf)
        return
    keys = read_keys_file(keys_file)  # typed errors before a session is started
    if topic is None:
        raise InvalidArgumentError("--topic is required with --layout rocketmq")
    if header is not None:
        raise InvalidArgumentError("--header is a --layout kafka option")
    names = [n.strip() for n in broker_names.split(",")] if broker_names else None
    spark = open_session(master, conf, "mqstore query-keys")
    with _rich_progress(sys.stderr.isatty() and not as_json) as prog:
        task = prog.add_task(f"looking up {len(keys)} keys in {len(stores)} stores", total=None)
        rows = query_keys(spark, list(stores), topic, keys, begin=begin, end=end, broker_names=names,
                          include_body=not no_body).collect()
        prog.update(task, total=1, completed=1)
    found = {r.key for r in rows}
    if as_json:
        import base64

        for r in rows:
            d = r.asDict(recursive=True)
            if d.get("body") is not None:
                d["body"] = base64.b64encode(bytes(d["body"])).decode("ascii")
            click.echo(_cli_common.to_json(d))
    else:
        _cli_common.print_table(f"{len(rows)} messages for {len(found)} of {len(keys)} keys",
                                ["key", "broker", "commitLogOffset", "queue", "queueOffset", "storeTimestamp", "keys"],
                                [(r.key, r.brokerName, r.commitLogOffset, r.queueId, r.queueOffset, r.storeTimestamp,
                                  " ".join(r["keys"] or [])) for r in rows])


def _query_keys_kafka(paths: tuple[_pathlib.Path, ...], header: str | None, keys: list[str], begin: int | None,
                      end: int | None, as_json: bool, master: str, conf: tuple[str, ...]) -> None:
    from mqstore.spark.query_kafka import kafka_partitions, query_kafka_keys

    kafka_partitions(paths)  # a bad path fails before a session is started
    spark = open_session(master, conf, "mqstore query-keys kafka")
    with _rich_progress(sys.stderr.isatty() and not as_json) as prog:
        task = prog.add_task(f"looking up {len(keys)} keys in {len(paths)} Kafka log directories", total=None)
        rows = query_kafka_keys(spark, list(paths), keys, begin=begin, end=end, header=header).collect()
        prog.update(task, total=1, completed=1)
    if as_json:
        for r in rows:
            click.echo(_cli_common.to_json(r.asDict()))
    else:
        found = {r.key for r in rows}
        _cli_common.print_table(f"{len(rows)} records for {len(found)} of {len(keys)} keys",
                                ["key", "topic", "partition", "offset", "timestamp", "indexed"],
                                [(r.key, r.topic, r.partition, r.offset, r.timestamp, r.indexed) for r in rows])
    scanned = sorted({(r.topic, r.partition, r.segment) for r in rows if not r.indexed})
    if scanned:
        click.echo(f"note: {len(scanned)} segment(s) with matches had no key index and were scanned", err=True)


@group.command("export")
@click.argument("layout", type=click.Choice(["rocketmq", "kafka"]))
@click.argument("paths", nargs=-1, required=True, type=str)
@click.option("--out", type=str, required=True,
              help="Parquet output directory or object store URL (s3://, gs://, hdfs://), partitioned by "
                   "topic/queueId (Kafka: topic/partition).")
@click.option("--mode", type=click.Choice(["error", "overwrite", "append", "ignore"]), default="error",
              show_default=True, help="What to do when --out already holds data.")
@click.option("--option", "options", multiple=True, metavar="KEY=VALUE",
              help="An option of the rocketmq / kafka-log source (repeatable), e.g. topics=orders.")
@_cli_common.json_option
@spark_options
@_cli_common.handle_errors
@handle_spark_errors
def export_cmd(layout: str, paths: tuple[str, ...], out: str, mode: str, options: tuple[str, ...],
               as_json: bool, master: str, conf: tuple[str, ...]) -> None:
    """Export RocketMQ stores (one per broker) or a Kafka log/partition directory to Parquet with
    the data source's columns."""
    from mqstore.errors import InvalidArgumentError
    from mqstore.spark.export import export_kafka, export_rocketmq

    opts: dict[str, str] = {}
    for pair in options:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidArgumentError(f"--option expects key=value, got {pair!r}")
        opts[key.strip()] = value
    if layout == "kafka" and len(paths) != 1:
        raise InvalidArgumentError("export kafka takes one log or partition directory")
    spark = open_session(master, conf, f"mqstore export {layout}")
    with _rich_progress(sys.stderr.isatty() and not as_json) as prog:
        task = prog.add_task(f"exporting {layout} to {out}", total=None)
        if layout == "rocketmq":
            res = export_rocketmq(spark, list(paths) if len(paths) > 1 else paths[0], out, mode=mode, **opts)
        else:
            res = export_kafka(spark, paths[0], out, mode=mode, **opts)
        prog.update(task, total=1, completed=1)
    if as_json:
        click.echo(_cli_common.to_json(res))
    else:
        _cli_common.print_table("exported", ["out", "rows", "partitions", "files"],
                                [(res.out, res.rows, res.partitions, res.files)])


# ------------------------------------------------------------------------------ pack-env
@group.command("pack-env")
@click.argument("out", type=click.Path(dir_okay=False, path_type=_pathlib.Path))
@click.option("--overwrite", is_flag=True, help="Replace OUT if it exists.")
@_cli_common.json_option
@_cli_common.handle_errors
def pack_env(out: _pathlib.Path, overwrite: bool, as_json: bool) -> None:
    """Pack this virtual environment's Python with mqstore and its run-time dependencies into OUT
    (.tar.gz or .tgz) for `spark-submit --archives OUT#environment` (docs/spark.md,
    Running on a cluster)."""
    from mqstore.spark.pack import pack_environment

    res = pack_environment(out, overwrite=overwrite)
    if as_json:
        click.echo(_cli_common.to_json(res.as_dict()))
        return
    _cli_common.print_table("packed", ["archive", "distributions", "files", "MB", "seconds"],
                            [(res.out, len(res.distributions), res.files, round(res.bytes / 1e6, 1), res.seconds)])
    click.echo(f"ship it with: spark-submit --archives {res.out}#environment "
               "--conf spark.pyspark.python=./environment/bin/python ...")
    click.echo(f"every node needs the base Python the archive's interpreter runs on, at the same path: {res.python}")
