"""`mqstore kafka ...` commands: dump, verify, rebuild-index, lookup (a thin layer over mqstore.kafka)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from mqstore.cli import kafka_internal
from mqstore.cli.common import echo_json_lines, handle_errors, json_option, print_table, to_json
from mqstore.errors import InvalidArgumentError, StoreNotFoundError


@click.group(name="kafka")
def group() -> None:
    """Kafka partition logs: dump, verify, rebuild indexes, look up offsets and timestamps."""


@contextmanager
def _progress(label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A rich progress bar when stdout is a terminal, else nothing."""
    if not sys.stdout.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

    with Progress("[progress.description]{task.description}", BarColumn(), DownloadColumn(),
                  TransferSpeedColumn(), TimeRemainingColumn(), transient=True) as prog:
        task = prog.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            prog.update(task, completed=done, total=total)

        yield update


def _existing(path: str) -> Path:
    p = Path(path)
    if not p.exists():
        raise StoreNotFoundError("path not found", path=str(p))
    return p


def _files_for_dump(p: Path) -> list[Path]:
    if p.is_dir():
        files = sorted(f for f in p.iterdir()
                       if f.suffix in (".log", ".index", ".timeindex") and f.name.split(".", 1)[0].isdigit())
        extra = kafka_internal.extra_files(p)  # KRaft snapshots, quorum-state
        if not files and not extra:
            raise StoreNotFoundError("no Kafka segment files in directory", path=str(p))
        order = {".log": 0, ".index": 1, ".timeindex": 2}
        return sorted(files, key=lambda f: (f.name.split(".", 1)[0], order[f.suffix])) + extra
    if kafka_internal.is_extra_file(p):
        return [p]
    if p.suffix not in (".log", ".index", ".timeindex"):
        raise InvalidArgumentError("expected a partition directory or a .log/.index/.timeindex file", path=str(p))
    return [p]


def _fmt_bytes(b: bytes | None) -> str:
    if b is None:
        return "null"
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return "0x" + b.hex()


def _text_line(obj: dict[str, Any]) -> str:
    t = obj["type"]
    extra = kafka_internal.extra_text_line(obj)
    if extra is not None:
        return extra
    if t == "batch" and "baseOffset" in obj:
        return ("baseOffset: {baseOffset} lastOffset: {lastOffset} count: {count} baseSequence: {baseSequence} "
                "lastSequence: {lastSequence} producerId: {producerId} producerEpoch: {producerEpoch} "
                "partitionLeaderEpoch: {partitionLeaderEpoch} isTransactional: {isTransactional} "
                "isControl: {isControl} deleteHorizonMs: {deleteHorizonMs} position: {position} "
                "{timestampType}: {maxTimestamp} size: {size} magic: {magic} compresscodec: {compresscodec} "
                "crc: {crc} isvalid: {isvalid}").format(**obj).replace("True", "true").replace("False", "false")
    if t == "batch":
        return ("offset: {offset} position: {position} magic: {magic} size: {size} crc: {crc} "
                "isvalid: {isvalid}").format(**obj)
    if t == "record":
        s = (f"| offset: {obj['offset']} {obj.get('timestampType', 'CreateTime')}: {obj['timestamp']} "
             f"keySize: {obj['keySize']} valueSize: {obj['valueSize']}")
        if "sequence" in obj:
            s += f" sequence: {obj['sequence']} headerKeys: [{','.join(obj['headerKeys'])}]"
        if "controlType" in obj:
            s += f" endTxnMarker: {obj['controlType']} coordinatorEpoch: {obj['coordinatorEpoch']}"
        elif (dec := kafka_internal.decoded_text(obj)) is not None:
            s += dec
        else:
            s += f" key: {_fmt_bytes(obj['key'])} payload: {_fmt_bytes(obj['value'])}"
            if "decoded" in obj:
                s += f" decodeError: {obj['decoded']['decodeError']}"
            if obj.get("headers"):
                s += " headers: " + ",".join(f"{h['key']}={_fmt_bytes(h['value'])}" for h in obj["headers"])
        return s
    if t == "offset_index_entry":
        return f"offset: {obj['offset']} position: {obj['position']}"
    if t == "time_index_entry":
        return f"timestamp: {obj['timestamp']} offset: {obj['offset']}"
    if t == "tail":
        return f"invalid tail: {obj['bytes']} bytes from position {obj['position']} ({obj['reason']})"
    return str(obj)


@group.command("dump")
@click.argument("path", type=click.Path())
@click.option("--print-data", is_flag=True, help="Also print every record (key, value, headers).")
@kafka_internal.decoder_option
@json_option
@handle_errors
def dump(path: str, print_data: bool, decoder: str, as_json: bool) -> None:
    """Print the batches of a .log, the entries of a .index/.timeindex, or a whole partition directory."""
    from mqstore.storage.kafka.tools import dump_index, dump_log

    for f in _files_for_dump(_existing(path)):
        dec = kafka_internal.resolve_decoder(decoder, f)
        data = print_data or (decoder != "auto" and dec != "none")
        if kafka_internal.is_extra_file(f):
            objs = kafka_internal.annotate(kafka_internal.dump_extra(f, data), dec)
        elif f.suffix == ".log":
            objs = kafka_internal.annotate(dump_log(f, print_data=data), dec)
        else:
            objs = dump_index(f)
        if as_json:
            echo_json_lines({"file": str(f), **o} for o in objs)
            continue
        click.echo(f"Dumping {f}")
        n = 0
        for o in objs:
            click.echo(_text_line(o))
            n += 1
        if n == 0 and f.suffix != ".log":
            click.echo(f"{f} is empty.")


@group.command("verify")
@click.argument("path", type=click.Path())
@click.option("--strict", is_flag=True, help="Also count multi-batch-append index entries as mismatches (as Kafka does).")
@json_option
@handle_errors
def verify(path: str, strict: bool, as_json: bool) -> None:
    """Check log CRCs and both indexes against the log (non-zero exit on any problem)."""
    from mqstore.storage.kafka.tools import verify_path

    p = _existing(path)
    with _progress("verify") as prog:
        if kafka_internal.is_extra_file(p):  # one KRaft snapshot / quorum-state
            from mqstore.storage.kafka.tools import VerifyReport

            report = VerifyReport()
        else:
            report = verify_path(p, strict=strict, progress=prog)
        kafka_internal.verify_extra(p, report)
    if as_json:
        click.echo(to_json({
            "ok": report.ok, "segments": report.segments, "batches": report.batches, "bytes": report.bytes,
            "offset_index_entries": report.offset_index_entries, "time_index_entries": report.time_index_entries,
            "problems": [vars(x) for x in report.problems], "notes": [vars(x) for x in report.notes],
        }))
    else:
        for x in report.notes:
            click.echo(f"note: {x.kind}: {x.message} ({x.path})")
        for x in report.problems:
            where = x.path if x.position is None else f"{x.path} @ {x.position}"
            click.echo(f"problem: {x.kind}: {x.message} ({where})")
        status = "OK" if report.ok else f"{len(report.problems)} problem(s)"
        click.echo(f"{status}: {report.segments} segment(s), {report.batches} batches, {report.bytes} bytes, "
                   f"{report.offset_index_entries} offset / {report.time_index_entries} time index entries checked")
    if not report.ok:
        sys.exit(1)


@group.command("rebuild-index")
@click.argument("path", type=click.Path())
@click.option("--out", "out_dir", type=click.Path(), default=None, help="Write the indexes here (default: next to each .log).")
@click.option("--index-interval-bytes", type=int, default=4096, show_default=True, help="index.interval.bytes")
@click.option("--max-index-bytes", type=int, default=10485760, show_default=True, help="segment.index.bytes")
@json_option
@handle_errors
def rebuild_index(path: str, out_dir: str | None, index_interval_bytes: int, max_index_bytes: int,
                  as_json: bool) -> None:
    """Regenerate .index/.timeindex from .log files exactly as Kafka's recovery writes them."""
    from mqstore.storage.kafka.rebuild import rebuild_indexes
    from mqstore.storage.kafka.tools import _segment_logs

    if index_interval_bytes < 0:
        raise InvalidArgumentError(f"--index-interval-bytes must be ≥ 0, got {index_interval_bytes}")
    if max_index_bytes < 12:
        raise InvalidArgumentError(f"--max-index-bytes must be ≥ 12, got {max_index_bytes}")
    p = _existing(path)
    logs = _segment_logs(p)
    if not logs:
        raise StoreNotFoundError("no .log segment files in directory", path=str(p))
    if out_dir is not None:
        Path(out_dir).mkdir(parents=True, exist_ok=True)
    rows = []
    with _progress("rebuild-index") as prog:
        for f in logs:
            r = rebuild_indexes(f, out_dir, index_interval_bytes=index_interval_bytes,
                                max_index_size=max_index_bytes, progress=prog)
            rows.append(r)
    if as_json:
        echo_json_lines(vars(r) for r in rows)
    else:
        print_table("rebuilt indexes", ["segment", "batches", "valid bytes", "offset entries", "time entries",
                                        "next offset"],
                    [(Path(r.log_path).name, r.batches, r.valid_bytes, r.offset_entries, r.time_entries,
                      r.next_offset) for r in rows])
    for r in rows:
        if r.truncated_bytes:
            click.echo(f"warning: {r.log_path}: {r.truncated_bytes} invalid bytes from position {r.valid_bytes} "
                       f"({r.error or r.stop}); indexes cover the valid prefix, the .log was not modified", err=True)


@group.command("lookup")
@click.argument("path", type=click.Path())
@click.option("--offset", type=int, default=None, help="Find the batch holding this offset.")
@click.option("--timestamp", type=int, default=None, help="Find the first record with timestamp ≥ MS.")
@json_option
@handle_errors
def lookup(path: str, offset: int | None, timestamp: int | None, as_json: bool) -> None:
    """Kafka's translate-offset (--offset) or offset-for-timestamp (--timestamp) over a partition or segment."""
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
        if p.suffix in (".index", ".timeindex"):
            p = p.with_suffix(".log")
        seg = LogSegment.open(p)
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


kafka_internal.register(group)
