"""`mqstore kafka ...` commands: dump, verify, rebuild-index, lookup (a thin layer over mqstore.kafka)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

import click

from mqstore.cli.common import (
    LazyGroup,
    echo_json_lines,
    handle_errors,
    json_option,
    preload_tables,
    print_table,
    progress,
    to_json,
)
from mqstore.errors import InvalidArgumentError, StoreNotFoundError
from mqstore.formats.kafka.decoders import DECODERS

#: subcommands that live in their own modules, imported when used (``kafka rebuild-index`` and
#: ``verify`` do not load the report's or the consumer-offsets reader's modules)
_LAZY_COMMANDS: dict[str, tuple[str, str]] = {
    "report": ("mqstore.cli.report", "kafka_report"),
    "consumers": ("mqstore.cli.kafka_internal", "consumers"),
}


def _internal() -> ModuleType:
    """:mod:`mqstore.cli.kafka_internal` (the Kafka 4.x parts: KRaft files, internal-topic
    decoders), imported when a command meets such a file (``rebuild-index`` never does)."""
    from mqstore.cli import kafka_internal

    return kafka_internal


_decoder_option = click.option(
    "--decoder", type=click.Choice(["auto", *DECODERS]), default="auto", show_default=True,
    help="Decode the records of internal topics (auto: by the partition directory's topic, KRaft "
         "snapshots as cluster-metadata, with --print-data).  A named decoder implies --print-data.")


@click.group(name="kafka", cls=LazyGroup, lazy=_LAZY_COMMANDS)
def group() -> None:
    """Kafka partition logs: dump, verify, rebuild indexes, look up offsets and timestamps."""


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """The CLI's one progress display (:func:`mqstore.cli.common.progress`: on stderr when it is a terminal)."""
    with progress(label) as update:
        yield update


def _existing(path: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise StoreNotFoundError("path not found", path=str(p))
    return p


_DUMP_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")


def _files_for_dump(p: Path) -> list[Path]:
    from mqstore.storage.kafka.layout import (
        REMOTE_INDEX_CACHE,
        log_of,
        remote_index_base_offset,
        segment_files,
    )

    if p.is_dir() and p.name == REMOTE_INDEX_CACHE:  # tiered storage: <startOffset>_<segmentId>.index ...
        return sorted(f for f in p.iterdir() if f.suffix in (".index", ".timeindex")
                      and remote_index_base_offset(f.name) is not None)
    if p.is_dir():
        files = segment_files(p, _DUMP_SUFFIXES)
        extra = _internal().extra_files(p)  # KRaft snapshots, quorum-state
        if not files and not extra:
            raise StoreNotFoundError("no Kafka segment files in directory", path=str(p))
        return files + extra
    if _internal().is_extra_file(p):
        return [p]
    if p.suffix in (".txnindex", ".snapshot", ".keyindex"):
        return [p]
    log_of(p)  # InvalidArgumentError for any other file
    return [p]


def _control_text(obj: dict[str, Any]) -> str:
    from mqstore.formats.kafka.kraft_control import SCHEMAS, kraft_control_text

    ctype = obj["controlType"]
    if "coordinatorEpoch" in obj:
        return f" endTxnMarker: {ctype} coordinatorEpoch: {obj['coordinatorEpoch']}"
    if "control" in obj:
        return " " + kraft_control_text(obj["controlTypeId"], obj["control"])
    if "controlError" in obj:
        return f" {SCHEMAS[obj['controlTypeId']][0]}: invalid value ({obj['controlError']})"
    if ctype == "INVALID":
        return " controlType: INVALID"
    return f" controlType: UNKNOWN({obj.get('controlTypeId')})"


def _fmt_bytes(b: bytes | str | None) -> str:
    if b is None:
        return "null"
    if isinstance(b, str):  # already decoded (--decode)
        return b
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + b.hex()


def _jbool(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _text_line(obj: dict[str, Any]) -> str:
    """One line as Kafka's kafka-dump-log prints it (docs/kafka.md lists the differences left)."""
    t = obj["type"]
    extra = _internal().extra_text_line(obj)
    if extra is not None:
        return extra
    if t == "batch" and "baseOffset" in obj:
        horizon = f"OptionalLong[{obj['deleteHorizonMs']}]" if obj.get("hasDeleteHorizon") else "OptionalLong.empty"
        return (f"baseOffset: {obj['baseOffset']} lastOffset: {obj['lastOffset']} count: {obj['count']} "
                f"baseSequence: {obj['baseSequence']} lastSequence: {obj['lastSequence']} "
                f"producerId: {obj['producerId']} producerEpoch: {obj['producerEpoch']} "
                f"partitionLeaderEpoch: {obj['partitionLeaderEpoch']} isTransactional: "
                f"{_jbool(obj['isTransactional'])} isControl: {_jbool(obj['isControl'])} deleteHorizonMs: {horizon} "
                f"position: {obj['position']} {obj['timestampType']}: {obj['maxTimestamp']} size: {obj['size']} "
                f"magic: {obj['magic']} compresscodec: {obj['compresscodec']} crc: {obj['crc']} "
                f"isvalid: {_jbool(obj['isvalid'])}")
    if t == "batch":
        return (f"offset: {obj['offset']} position: {obj['position']} "
                f"{obj.get('timestampType', 'NoTimestampType')}: {obj['maxTimestamp']} size: {obj['size']} "
                f"magic: {obj['magic']} compresscodec: {obj.get('compresscodec', 'none')} crc: {obj['crc']} "
                f"isvalid: {_jbool(obj['isvalid'])}")
    if t == "record":
        s = (f"| offset: {obj['offset']} {obj.get('timestampType', 'CreateTime')}: {obj['timestamp']} "
             f"keySize: {obj['keySize']} valueSize: {obj['valueSize']}")
        if "sequence" in obj:
            s += f" sequence: {obj['sequence']} headerKeys: [{','.join(obj['headerKeys'])}]"
        if "controlType" in obj:
            s += _control_text(obj)
        elif (dec := _internal().decoded_text(obj)) is not None:
            s += dec
        else:
            if obj["key"] is not None:
                s += f" key: {_fmt_bytes(obj['key'])}"
            if obj["value"] is not None:
                s += f" payload: {_fmt_bytes(obj['value'])}"
            if "decoded" in obj:
                s += f" decodeError: {obj['decoded']['decodeError']}"
        return s
    if t == "offset_index_entry":
        return f"offset: {obj['offset']} position: {obj['position']}"
    if t == "time_index_entry":
        return f"timestamp: {obj['timestamp']} offset: {obj['offset']}"
    if t in ("keyindex_header", "keyindex_item"):
        return " ".join(f"{k}: {v}" for k, v in obj.items() if k not in ("type", "file"))
    if t == "aborted_txn":
        return (f"version: {obj['version']} producerId: {obj['producerId']} firstOffset: {obj['firstOffset']} "
                f"lastOffset: {obj['lastOffset']} lastStableOffset: {obj['lastStableOffset']}")
    if t == "snapshot":
        return f"version: {obj['version']} crc: {obj['crc']} producers: {obj['producers']}"
    if t == "producer_entry":
        return " ".join(f"{k}: {v}" for k, v in obj.items() if k not in ("type", "file"))
    if t == "invalid_file":
        return f"invalid: {obj['message']}"
    if t == "tail":
        return f"Found {obj['bytes']} invalid bytes at the end of {Path(obj['file']).name}"
    return str(obj)


_TEXT_FILES = ("recovery-point-offset-checkpoint", "log-start-offset-checkpoint", "replication-offset-checkpoint",
               "cleaner-offset-checkpoint", "leader-epoch-checkpoint", "meta.properties", "partition.metadata",
               ".kafka_cleanshutdown")


def _dump_text_file(p: Path, as_json: bool) -> None:
    from mqstore.storage.kafka.logdir import read_log_dir_file

    obj = read_log_dir_file(p)
    if as_json:
        click.echo(to_json({"file": str(p), **obj}))
        return
    click.echo(f"Dumping {p}")
    t = obj["type"]
    if t in ("offset_checkpoint", "leader_epoch_checkpoint"):
        click.echo(f"version: {obj['version']} entries: {len(obj['entries'])}")
        for e in obj["entries"]:
            click.echo(" ".join(f"{k}: {v}" for k, v in e.items()))
    else:
        click.echo(" ".join(f"{k}: {'null' if v is None else v}" for k, v in obj.items() if k != "type"))


# the kinds ``dump`` decodes itself (each gets its own "Dumping" section): not listed as files
_DUMPED_KINDS = ("log", "index", "timeindex", "txnindex", "snapshot")


def _dump_other_files(p: Path, as_json: bool) -> None:
    """A partition directory's files other than segments and their indexes, each with its kind
    (nothing is skipped silently; ``unknown`` for what is not Kafka's)."""
    from mqstore.storage.kafka.layout import REMOTE_INDEX_CACHE, classify_partition_file
    from mqstore.storage.kafka.logdir import scan_log_dir

    rows = []
    if p.name == REMOTE_INDEX_CACHE:
        kinds = scan_log_dir(p.parent).remote_cache
        rows = [(p / n, k) for n, k in kinds.items() if k not in ("remote_index", "remote_timeindex")]
    else:
        for f in sorted(p.iterdir()):
            kind = classify_partition_file(f.name).kind if f.is_file() else "unknown"
            if kind not in _DUMPED_KINDS:
                rows.append((f, kind))
    if as_json:
        echo_json_lines({"type": "file", "file": str(f), "kind": k} for f, k in rows)
    else:
        for f, k in rows:
            click.echo(f"file: {f.name} kind: {k}")


def _plain_table(columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    """An aligned plain-text table (stable, greppable output whatever the terminal width)."""
    cells = [columns] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(c[i]) for c in cells) for i in range(len(columns))]
    for c in cells:
        click.echo("  ".join(v.ljust(w) for v, w in zip(c, widths, strict=True)).rstrip())


def _dump_log_dir(p: Path, as_json: bool) -> None:
    from mqstore.storage.kafka.logdir import read_log_dir_files, scan_log_dir, summarize_partition

    layout = scan_log_dir(p)
    files = read_log_dir_files(layout)
    summaries = [summarize_partition(info, files) for info in layout.partitions]
    meta = files.meta
    cs = files.clean_shutdown
    head: dict[str, Any] = {
        "type": "log_dir", "path": str(p),
        "meta_properties": None if meta is None else {"version": meta.version, "node_id": meta.node_id,
                                                       "cluster_id": meta.cluster_id,
                                                       "directory_id": meta.directory_id},
        "clean_shutdown": None if cs is None else {"version": cs.version, "broker_epoch": cs.broker_epoch},
        "checkpoints": {name: len(c.offsets) for name, c in files.checkpoints.items()},
        "entries": layout.entries, "remote_index_cache": layout.remote_cache, "errors": files.errors,
    }
    if as_json:
        click.echo(to_json(head))
        echo_json_lines({"type": "partition", **vars(s)} for s in summaries)
    else:
        click.echo(f"Log directory {p}")
        if meta is not None:
            click.echo(f"meta.properties: version: {meta.version} node.id: {meta.node_id} cluster.id: "
                       f"{meta.cluster_id} directory.id: {meta.directory_id or 'none'}")
        if cs is not None:
            click.echo(".kafka_cleanshutdown: " + ("empty (legacy marker)" if cs.version is None else
                                                   f"version: {cs.version} brokerEpoch: {cs.broker_epoch}"))
        elif "clean_shutdown" not in layout.entries.values():
            click.echo(".kafka_cleanshutdown: absent (broker running, or not shut down cleanly)")
        for name, c in files.checkpoints.items():
            click.echo(f"{name}: {len(c.offsets)} entries")
        kinds: dict[str, int] = {}
        for k in layout.entries.values():
            kinds[k] = kinds.get(k, 0) + 1
        click.echo("entries: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
        if layout.remote_cache:
            rk: dict[str, int] = {}
            for k in layout.remote_cache.values():
                rk[k] = rk.get(k, 0) + 1
            click.echo("remote-log-index-cache: " + ", ".join(f"{k} {n}" for k, n in sorted(rk.items())))
        for name, kind in layout.entries.items():
            if kind == "unknown":
                click.echo(f"unknown: {name}")
        for name, kind in layout.remote_cache.items():
            if kind == "unknown":
                click.echo(f"unknown: remote-log-index-cache/{name}")
        _plain_table(["PARTITION", "STATE", "SEGMENTS", "BYTES", "FIRST", "END", "RECOVERY", "START", "HW",
                      "CLEANER", "EPOCH", "TOPIC-ID"],
                    [(s.partition, s.state, s.segments, s.bytes, s.first_offset, s.log_end_offset,
                      s.recovery_point, s.log_start_offset, s.high_watermark, s.cleaner_offset, s.leader_epoch,
                      s.topic_id) for s in summaries])
        for s in summaries:
            click.echo(f"{s.partition}: " + ", ".join(f"{k} {n}" for k, n in sorted(s.files.items())))
            for name in s.unknown:
                click.echo(f"unknown: {s.partition}/{name}")
    for name, msg in files.errors.items():
        click.echo(f"warning: {p / name}: {msg}", err=True)
    for s in summaries:
        for name, msg in s.errors.items():
            click.echo(f"warning: {p / s.partition / name}: {msg}", err=True)


@group.command("inspect")
@click.argument("path")
@json_option
@handle_errors
def inspect(path: str, as_json: bool) -> None:
    """Every file of a log directory or a partition directory with its kind: a log directory gets
    the summary of `dump LOGDIR` (meta.properties, checkpoints, partitions and their file kinds);
    a partition (or __cluster_metadata, or remote-log-index-cache) directory one line per file
    with its kind and size, segments included.  Files that are not Kafka's are named as unknown,
    never skipped."""
    from mqstore.storage.kafka.layout import REMOTE_INDEX_CACHE, classify_partition_file, is_log_dir
    from mqstore.storage.kafka.logdir import scan_log_dir

    p = _existing(path)
    if not p.is_dir():
        raise InvalidArgumentError("inspect takes a log directory or a partition directory (dump reads one file)",
                                   path=str(p))
    if is_log_dir(p):
        _dump_log_dir(p, as_json)
        return
    _files_for_dump(p)  # a directory without any Kafka file is an error, not an empty listing
    if p.name == REMOTE_INDEX_CACHE:
        rows = [(p / n, k) for n, k in scan_log_dir(p.parent).remote_cache.items()]
    else:
        rows = [(f, classify_partition_file(f.name).kind if f.is_file() else "unknown") for f in sorted(p.iterdir())]
    kinds: dict[str, int] = {}
    for _f, k in rows:
        kinds[k] = kinds.get(k, 0) + 1
    if as_json:
        click.echo(to_json({"type": "directory", "path": str(p), "kinds": kinds}))
        echo_json_lines({"type": "file", "file": str(f), "kind": k, "bytes": f.stat().st_size if f.is_file() else None}
                        for f, k in rows)
        return
    click.echo(f"Directory {p}")
    click.echo("kinds: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    _plain_table(["FILE", "KIND", "BYTES"], [(f.name, k, f.stat().st_size if f.is_file() else None) for f, k in rows])


@group.command("dump")
@click.argument("path", type=click.Path())
@click.option("--print-data", is_flag=True, help="Also print every record (key, value, headers).")
@click.option("--isolation", type=click.Choice(["read_uncommitted", "read_committed"]), default="read_uncommitted",
              show_default=True, help="read_committed: only the batches a read_committed consumer receives "
              "(no control batches, no aborted transactions, nothing from the last stable offset on).")
@click.option("--from-time", default=None, help="Only records with a timestamp from this (inclusive): ISO 8601 or ms.")
@click.option("--to-time", default=None, help="Only records with a timestamp up to this (inclusive): ISO 8601 or ms.")
@click.option("--key", default=None, help="Only records with this key (UTF-8).")
@click.option("--header", "header", default=None, help="Only records with this header: KEY or KEY=VALUE.")
@click.option("--decode", default=None, help="Show keys, values and header values as utf8, hex or json.")
@_decoder_option
@json_option
@handle_errors
def dump(path: str, print_data: bool, isolation: str, from_time: str | None, to_time: str | None, key: str | None,
         header: str | None, decode: str | None, decoder: str, as_json: bool) -> None:
    """Print the batches of a .log, the entries of a .index/.timeindex/.txnindex, a producer
    .snapshot, a whole partition directory, a log directory (one summary per partition), a KRaft
    snapshot / quorum-state, or a checkpoint / meta.properties / partition.metadata /
    leader-epoch-checkpoint / .kafka_cleanshutdown file.

    With a record filter (--from-time/--to-time/--key/--header) only the matching records are
    printed, each after its batch line, and index files are left out."""
    from mqstore.cli.filters import check_decoder, check_time_range, parse_header_filter, parse_time
    from mqstore.storage.kafka.layout import is_log_dir
    from mqstore.storage.kafka.tools import dump_index, dump_log, dump_snapshot, dump_txn_index

    lo, hi = parse_time(from_time, "--from-time"), parse_time(to_time, "--to-time")
    check_time_range(lo, hi)
    check_decoder(decode)
    hdr = parse_header_filter(header)
    kb = key.encode() if key is not None else None
    filtering = lo is not None or hi is not None or kb is not None or hdr is not None
    p = _existing(path)
    if p.is_file() and p.name in _TEXT_FILES:
        _dump_text_file(p, as_json)
        return
    if is_log_dir(p):
        _dump_log_dir(p, as_json)
        return
    files = _files_for_dump(p)  # a directory without segments is an error before anything is printed
    if p.is_dir() and not filtering:
        _dump_other_files(p, as_json)
    committed = _committed_filter(p) if isolation == "read_committed" else None
    if filtering:
        files = [f for f in files if f.suffix == ".log"]
    total = sum(f.stat().st_size for f in files)
    done = 0
    with progress("dump") as prog:
        for f in files:
            dec = _internal().resolve_decoder(decoder, f)
            data = print_data or filtering or decode is not None or (decoder != "auto" and dec != "none")
            if _internal().is_extra_file(f):
                objs: Any = _internal().annotate(_internal().dump_extra(f, data), dec)
            elif f.suffix == ".log":
                objs = dump_log(f, print_data=data)
                if committed is not None:
                    objs = committed(objs)
                objs = _internal().annotate(objs, dec)
                if filtering:
                    objs = _filter_records(objs, lo, hi, kb, hdr)
                if decode is not None:
                    objs = (_decoded(o, decode, as_json) for o in objs)
            elif f.suffix == ".keyindex":
                from mqstore.storage.kafka.keyindex import dump_keyindex

                objs = dump_keyindex(f)
            elif f.suffix in (".txnindex", ".snapshot"):
                objs = (dump_txn_index if f.suffix == ".txnindex" else dump_snapshot)(f)
                if p.is_dir():  # in a directory dump a bad file is shown, not fatal (verify judges it)
                    objs = _tolerant(objs)
            else:
                objs = dump_index(f)
            if as_json and f.suffix == ".log" and not _internal().is_extra_file(f) and committed is None \
                    and not filtering and decode is None and dec == "none":
                _write_json_lines(f, data)
            elif as_json:
                echo_json_lines({"file": str(f), **o} for o in objs)
            else:
                click.echo(f"Dumping {f}")
                if f.suffix == ".log":
                    click.echo(f"Log starting offset: {int(f.name.split('.', 1)[0])}")
                n = 0
                for o in objs:
                    click.echo(_text_line({"file": str(f), **o}))
                    n += 1
                if n == 0 and f.suffix not in (".log", ".snapshot"):
                    click.echo(f"{f} is empty.")
            done += f.stat().st_size
            if prog is not None:
                prog(done, total)


def _write_json_lines(f: Path, print_data: bool) -> None:
    """The JSON lines of a ``.log`` dump, runs of plain batches written by the JSON-lines kernel
    (:func:`~mqstore.storage.kafka.tools.dump_log_lines`) straight to the binary stdout."""
    import sys

    from mqstore.storage.kafka.tools import dump_log_lines

    stream = getattr(sys.stdout, "buffer", None)
    enc = (getattr(sys.stdout, "encoding", None) or "").lower().replace("-", "")
    for item in dump_log_lines(f, print_data=print_data):
        if isinstance(item, dict):
            click.echo(to_json({"file": str(f), **item}))
        elif stream is not None and enc == "utf8":
            sys.stdout.flush()
            stream.write(item)
        else:  # a text stream of another encoding (or none): through click, line by line
            for line in bytes(item).decode("utf-8").splitlines():
                click.echo(line)
    sys.stdout.flush()


def _record_matches(o: dict[str, Any], lo: int | None, hi: int | None, key: bytes | None,
                    hdr: tuple[str, bytes | None] | None) -> bool:
    if "controlType" in o:
        return False
    ts = o.get("timestamp")
    if lo is not None and (ts is None or ts < lo):
        return False
    if hi is not None and (ts is None or ts > hi):
        return False
    if key is not None and o.get("key") != key:
        return False
    if hdr is not None:
        hk, hv = hdr
        if not any(h["key"] == hk and (hv is None or h["value"] == hv) for h in o.get("headers", [])):
            return False
    return True


def _filter_records(objs: Iterator[dict[str, Any]], lo: int | None, hi: int | None, key: bytes | None,
                    hdr: tuple[str, bytes | None] | None) -> Iterator[dict[str, Any]]:
    """Only the matching records, each batch line before its first match (tails are kept)."""
    batch: dict[str, Any] | None = None
    for o in objs:
        if o["type"] == "batch":
            batch = o
        elif o["type"] == "record":
            if _record_matches(o, lo, hi, key, hdr):
                if batch is not None:
                    yield batch
                    batch = None
                yield o
        else:
            yield o


def _decoded(o: dict[str, Any], mode: str, as_json: bool) -> dict[str, Any]:
    """A record dict whose key, value and header values are shown as ``mode``."""
    if o.get("type") != "record" or "controlType" in o:
        return o
    from mqstore.cli.filters import decode_text, decode_value

    conv = decode_value if as_json else decode_text
    d = dict(o)
    d["key"] = conv(o.get("key"), mode)
    d["value"] = conv(o.get("value"), mode)
    if "headers" in o:
        d["headers"] = [{"key": h["key"], "value": conv(h["value"], mode)} for h in o["headers"]]
    d["decodedAs"] = mode  # ("decoded" holds an internal-topic decoding)
    return d


def _tolerant(objs: Any) -> Iterator[dict[str, Any]]:
    from mqstore.errors import MqStoreError

    try:
        yield from list(objs)
    except MqStoreError as exc:
        yield {"type": "invalid_file", "message": str(exc)}


def _committed_filter(p: Path) -> Callable[[Any], Iterator[dict[str, Any]]]:
    """Drop the batches (and their records) a read_committed consumer of the partition never gets."""
    from mqstore.storage.kafka.txn import partition_txn_state

    state = partition_txn_state(p if p.is_dir() else p.parent)

    def keep(objs: Any) -> Iterator[dict[str, Any]]:
        show = True
        for o in objs:
            if o["type"] == "batch":
                show = state.is_visible(o["baseOffset"] if "baseOffset" in o else o["offset"])
            if o["type"] not in ("batch", "record") or show:
                yield o
    return keep


@group.command("verify")
@click.argument("path", type=click.Path())
@click.option("--strict", is_flag=True, help="Also count multi-batch-append index entries as mismatches (as Kafka does).")
@json_option
@handle_errors
def verify(path: str, strict: bool, as_json: bool) -> None:
    """Check log CRCs and both indexes against the log (non-zero exit on any problem)."""
    from mqstore.storage.kafka.layout import is_log_dir
    from mqstore.storage.kafka.rebuild import shared_analyses
    from mqstore.storage.kafka.tools import verify_path

    p = _existing(path)
    if is_log_dir(p):
        _verify_log_dir(p, strict, as_json)
        return
    with _progress("verify") as prog, shared_analyses():
        if _internal().is_extra_file(p):  # one KRaft snapshot / quorum-state
            from mqstore.storage.kafka.tools import VerifyReport

            report = VerifyReport()
        else:
            report = verify_path(p, strict=strict, progress=prog)
        _internal().verify_extra(p, report)
    if as_json:
        click.echo(to_json({
            "ok": report.ok, "segments": report.segments, "batches": report.batches, "bytes": report.bytes,
            "offset_index_entries": report.offset_index_entries, "time_index_entries": report.time_index_entries,
            "key_index_entries": report.key_index_entries, "problems": [vars(x) for x in report.problems], "notes": [vars(x) for x in report.notes],
        }))
    else:
        for x in report.notes:
            click.echo(f"note: {x.kind}: {x.message} ({x.path})")
        for x in report.problems:
            where = x.path if x.position is None else f"{x.path} @ {x.position}"
            click.echo(f"problem: {x.kind}: {x.message} ({where})")
        status = "OK" if report.ok else f"{len(report.problems)} problem(s)"
        click.echo(f"{status}: {report.segments} segment(s), {report.batches} batches, {report.bytes} bytes, "
                   f"{report.offset_index_entries} offset / {report.time_index_entries} time index entries checked"
                   + (f", {report.key_index_entries} key index entries" if report.key_index_entries else ""))
    if not report.ok:
        sys.exit(1)


def _verify_log_dir(p: Path, strict: bool, as_json: bool) -> None:
    from mqstore.storage.kafka.logdir import verify_log_dir

    res = verify_log_dir(p, strict=strict)
    if as_json:
        click.echo(to_json({
            "ok": res.ok, "path": str(p),
            "problems": [vars(x) for x in res.problems], "notes": [vars(x) for x in res.notes],
            "partitions": [{"partition": r.partition, "state": r.state, "ok": r.ok, "segments": r.segments,
                            "batches": r.batches, "bytes": r.bytes, "problems": [vars(x) for x in r.problems],
                            "notes": [vars(x) for x in r.notes]} for r in res.partitions],
        }))
    else:
        for x in res.notes + [n for r in res.partitions for n in r.notes]:
            click.echo(f"note: {x.kind}: {x.message} ({x.path})")
        for x in res.problems + [q for r in res.partitions for q in r.problems]:
            where = x.path if x.position is None else f"{x.path} @ {x.position}"
            click.echo(f"problem: {x.kind}: {x.message} ({where})")
        _plain_table(["PARTITION", "STATE", "SEGMENTS", "BATCHES", "BYTES", "PROBLEMS", "NOTES", "STATUS"],
                    [(r.partition, r.state, r.segments, r.batches, r.bytes, len(r.problems), len(r.notes),
                      "OK" if r.ok else "FAILED") for r in res.partitions])
        bad = len(res.problems) + sum(len(r.problems) for r in res.partitions)
        status = "OK" if res.ok else f"{bad} problem(s)"
        click.echo(f"{status}: {len(res.partitions)} partition(s), {sum(r.segments for r in res.partitions)} "
                   f"segment(s), {sum(r.batches for r in res.partitions)} batches, "
                   f"{sum(r.bytes for r in res.partitions)} bytes")
    if not res.ok:
        sys.exit(1)


@group.command("rebuild-index")
@click.argument("path", type=click.Path())
@click.option("--out", "out_dir", type=click.Path(), default=None, help="Write the indexes here (default: next to each .log).")
@click.option("--index-interval-bytes", type=int, default=4096, show_default=True, help="index.interval.bytes")
@click.option("--max-index-bytes", type=int, default=10485760, show_default=True, help="segment.index.bytes")
@click.option("--key-index", is_flag=True, help="Also write mqstore's key index (<base>.keyindex, a sidecar "
              "Kafka ignores) of each segment.")
@click.option("--key-header", default=None, help="With --key-index: also index the values of this header.")
@json_option
@handle_errors
def rebuild_index(path: str, out_dir: str | None, index_interval_bytes: int, max_index_bytes: int,
                  key_index: bool, key_header: str | None, as_json: bool) -> None:
    """Regenerate .index/.timeindex from .log files exactly as Kafka's recovery writes them
    (and, with --key-index, the key indexes)."""
    from mqstore.storage.kafka.layout import segment_logs
    from mqstore.storage.kafka.rebuild import rebuild_indexes, shared_analyses

    if index_interval_bytes < 0:
        raise InvalidArgumentError(f"--index-interval-bytes must be ≥ 0, got {index_interval_bytes}")
    if max_index_bytes < 12:
        raise InvalidArgumentError(f"--max-index-bytes must be ≥ 12, got {max_index_bytes}")
    if key_header is not None and not key_index:
        raise InvalidArgumentError("--key-header needs --key-index")
    if key_header is not None:
        from mqstore.formats.kafka.keyindex import check_header_name

        check_header_name(key_header)
    from mqstore.storage.kafka.layout import is_log_dir

    p = _existing(path)
    jobs: list[tuple[Path, str | None]] = []
    if is_log_dir(p):
        from mqstore.storage.kafka.logdir import scan_log_dir

        # every partition Kafka loads (live and -future); -delete/-stray ones are left alone
        for info in scan_log_dir(p).partitions:
            if info.name.state in ("delete", "stray"):
                why = ("Kafka loads it only to delete it" if info.name.state == "delete"
                       else "Kafka keeps it out of service until it deletes it")
                click.echo(f"skipped: {info.label} (-{info.name.state}: {why})", err=True)
                continue
            sub = None if out_dir is None else str(Path(out_dir) / info.label)
            jobs += [(Path(f), sub) for f in info.logs]
        if not jobs:
            raise StoreNotFoundError("no .log segment files in any partition of the log directory", path=str(p))
    else:
        jobs = [(f, out_dir) for f in segment_logs(p)]
    if out_dir is not None and Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise InvalidArgumentError("--out exists and is not a directory", path=out_dir)
    for _f, sub in jobs:
        if sub is not None:
            Path(sub).mkdir(parents=True, exist_ok=True)
    rows = []
    keys: dict[str, Any] = {}
    if not as_json:
        # the walk's own modules first: imported while the preload thread imports rich, they would
        # share the GIL with it and the walk would start later (~10 ms on two cores)
        import mqstore.kernels.kafka.file_scan
        import mqstore.kernels.threads  # noqa: F401

        preload_tables()  # (imported while the native walk runs without the GIL)
    with shared_analyses():  # the transaction replay reads the segments the index rebuild just read
        with _progress("rebuild-index") as prog:
            for f, sub in jobs:
                r = rebuild_indexes(f, sub, index_interval_bytes=index_interval_bytes,
                                    max_index_size=max_index_bytes, progress=prog)
                rows.append(r)
                if key_index:
                    keys[str(r.log_path)] = _rebuild_keyindex(f, sub, key_header)
        txn = _rebuild_txn(jobs)
    if as_json:
        echo_json_lines({**vars(r), "txn_index_path": txn[str(r.log_path)][0], "aborted_txns": txn[str(r.log_path)][1],
                         **({"keyindex_path": keys[str(r.log_path)].keyindex_path,
                             "key_entries": keys[str(r.log_path)].entries} if key_index else {})}
                        for r in rows)
    elif key_index:
        print_table("rebuilt indexes", ["segment", "batches", "valid bytes", "offset entries", "time entries",
                                        "aborted txns", "key entries", "next offset"],
                    [(_segment_label(p, r.log_path), r.batches, r.valid_bytes, r.offset_entries, r.time_entries,
                      txn[str(r.log_path)][1], keys[str(r.log_path)].entries, r.next_offset) for r in rows])
    else:
        print_table("rebuilt indexes", ["segment", "batches", "valid bytes", "offset entries", "time entries",
                                        "aborted txns", "next offset"],
                    [(_segment_label(p, r.log_path), r.batches, r.valid_bytes, r.offset_entries, r.time_entries,
                      txn[str(r.log_path)][1], r.next_offset) for r in rows])
    for r in rows:
        if r.truncated_bytes:
            click.echo(f"warning: {r.log_path}: {r.truncated_bytes} invalid bytes from position {r.valid_bytes} "
                       f"({r.error or r.stop}); indexes cover the valid prefix, the .log was not modified", err=True)


def _rebuild_keyindex(log_path: Path, out_dir: str | None, key_header: str | None) -> Any:
    """The key index of one segment (in place under the partition's writer lock, like the others)."""
    from mqstore.storage.kafka.keyindex import rebuild_keyindex

    return rebuild_keyindex(log_path, out_dir, header_name=key_header)


def _rebuild_txn(jobs: list[tuple[Path, str | None]]) -> dict[str, tuple[str | None, int]]:
    """The .txnindex of the rebuilt segments, per partition (a transaction may begin in an
    earlier segment, so the whole partition is read): log path → (file written or None, entries)."""
    from mqstore.storage.kafka.txn_rebuild import rebuild_txn_indexes

    groups: dict[tuple[Path, str | None], dict[int, Path]] = {}
    for f, sub in jobs:
        groups.setdefault((f.parent, sub), {})[int(f.name.split(".", 1)[0])] = f
    out: dict[str, tuple[str | None, int]] = {}
    for (directory, sub), logs in groups.items():
        for r in rebuild_txn_indexes(directory, sub, only=set(logs)):
            out[str(logs[r.segment])] = (r.path if r.written else None, r.entries)
    return out


def _segment_label(root: Path, log_path: str) -> str:
    lp = Path(log_path)
    return str(lp.relative_to(root)) if root.is_dir() and lp.is_relative_to(root) else lp.name


@group.command("lookup")
@click.argument("path", type=click.Path())
@click.option("--offset", type=int, default=None, help="Find the batch holding this offset.")
@click.option("--timestamp", type=int, default=None, help="Find the first record with timestamp ≥ MS.")
@json_option
@handle_errors
def lookup(path: str, offset: int | None, timestamp: int | None, as_json: bool) -> None:
    """Kafka's translate-offset (--offset) or offset-for-timestamp (--timestamp) over a partition or segment."""
    from mqstore.storage.kafka.layout import log_of
    from mqstore.storage.kafka.log import PartitionLog
    from mqstore.storage.kafka.segment import LogSegment

    if (offset is None) == (timestamp is None):
        raise InvalidArgumentError("give exactly one of --offset or --timestamp")
    p = _existing(path)
    if p.is_dir():
        log = PartitionLog.open(p, read_only=True)
        try:
            if offset is not None:
                res: Any = log.lookup_offset(offset)
            else:
                res = log.lookup_timestamp(timestamp)  # type: ignore[arg-type]
        finally:
            log.close()
    else:
        seg = LogSegment.open(log_of(p))
        try:
            if offset is not None:
                if offset < 0:
                    raise InvalidArgumentError(f"offset must be ≥ 0, got {offset}")
                t = seg.translate_offset(offset)
                res = None if t is None else {"segment": seg.base_offset, "segment_path": str(seg.log_path),
                                              "offset": t.offset, "position": t.position, "size": t.size}
            else:
                if timestamp is not None and timestamp < 0:
                    raise InvalidArgumentError(f"timestamp must be ≥ 0, got {timestamp}")
                r = seg.find_offset_by_timestamp(timestamp, seg.base_offset)  # type: ignore[arg-type]
                res = None if r is None else {"segment": seg.base_offset, "segment_path": str(seg.log_path),
                                              "offset": r.offset, "timestamp": r.timestamp,
                                              "leader_epoch": r.leader_epoch}
        finally:
            seg.close()
    if res is None:
        what = f"offset {offset}" if offset is not None else f"timestamp {timestamp}"
        click.echo(f"error: nothing found for {what} in {p}", err=True)
        sys.exit(1)
    d = res if isinstance(res, dict) else vars(res)
    if as_json:
        click.echo(to_json(d))
    else:
        print_table(None, list(d), [list(d.values())])


@group.command("query-key")
@click.argument("path", type=click.Path())
@click.option("--key", "keys", multiple=True, required=True, help="The record key (UTF-8); repeat for several keys.")
@click.option("--header", default=None, help="Look the value up in this header instead of the record key.")
@click.option("--from-time", default=None, help="Only records with a timestamp from this (inclusive): ISO 8601 or ms.")
@click.option("--to-time", default=None, help="Only records with a timestamp up to this (inclusive): ISO 8601 or ms.")
@json_option
@handle_errors
def query_key(path: str, keys: tuple[str, ...], header: str | None, from_time: str | None, to_time: str | None,
              as_json: bool) -> None:
    """Find the records with a key through the key indexes (<base>.keyindex) of a partition
    directory or of every partition of a log directory.  Exact: hash collisions are dropped by
    reading the records.  Segments without a key index are scanned (noted on stderr)."""
    from mqstore.cli.filters import check_time_range, parse_time
    from mqstore.formats.kafka.keyindex import check_header_name
    from mqstore.storage.kafka.layout import is_log_dir, partition_dirs, segment_logs
    from mqstore.storage.kafka.log import PartitionLog

    lo, hi = parse_time(from_time, "--from-time"), parse_time(to_time, "--to-time")
    check_time_range(lo, hi)
    check_header_name(header)
    p = _existing(path)
    if is_log_dir(p):
        parts = partition_dirs(p)
        if not parts:
            raise StoreNotFoundError("no partition with .log segments in the log directory", path=str(p))
    else:
        if not p.is_dir():
            raise InvalidArgumentError("query-key needs a partition directory or a log directory", path=str(p))
        segment_logs(p)  # StoreNotFoundError without segments
        parts = [p]
    rows = []
    scanned = 0
    for d in parts:
        log = PartitionLog.open(d, read_only=True)
        try:
            found, stats = log.find_keys(list(keys), lo, hi, header=header)
        finally:
            log.close()
        scanned += len(stats.scanned_segments)
        for k, ms in zip(keys, found, strict=True):
            rows += [{"topic": log.topic, "partition": log.partition, "key": k, "offset": m.offset,
                      "timestamp": m.timestamp, "segment": m.segment, "position": m.position} for m in ms]
    if scanned:
        click.echo(f"note: {scanned} segment(s) without a usable key index were scanned "
                   "(mqstore kafka rebuild-index --key-index writes them)", err=True)
    if as_json:
        echo_json_lines(rows)
    elif rows:
        _plain_table(["TOPIC", "PARTITION", "KEY", "OFFSET", "TIMESTAMP", "SEGMENT", "POSITION"],
                     [tuple(r.values()) for r in rows])
    else:
        click.echo("no record found")

