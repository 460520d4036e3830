"""The Kafka 4.x parts of ``mqstore kafka``: decoded internal-topic records in ``dump``, KRaft
snapshots and ``quorum-state`` in ``dump``/``verify``, and the ``consumers`` command."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import click

from mqstore.cli.common import handle_errors, json_option, print_table, to_json
from mqstore.errors import StoreNotFoundError
from mqstore.formats.kafka.decoders import check_decoder, decode_record, decoder_for_dir_name


def is_extra_file(p: Path) -> bool:
    """A Kafka 4.x metadata file ``dump`` shows besides segments: snapshots and quorum-state."""
    from mqstore.storage.kafka.layout import QUORUM_STATE, snapshot_kind

    return p.name == QUORUM_STATE or snapshot_kind(p.name) is not None


def extra_files(directory: Path) -> list[Path]:
    from mqstore.storage.kafka.layout import QUORUM_STATE, snapshot_files

    out = snapshot_files(directory)
    if (directory / QUORUM_STATE).is_file():
        out.append(directory / QUORUM_STATE)
    return out


def resolve_decoder(decoder: str, f: Path) -> str:
    """The decoder for the records of file ``f`` (``auto`` -> from its directory or kind)."""
    from mqstore.storage.kafka.layout import snapshot_kind

    if decoder != "auto":
        return check_decoder(decoder)
    if snapshot_kind(f.name) is not None:
        return "cluster-metadata"
    return decoder_for_dir_name(f.resolve().parent.name)


def annotate(objs: Iterable[dict[str, Any]], decoder: str) -> Iterator[dict[str, Any]]:
    """Add ``decoded`` (see :func:`mqstore.formats.kafka.decoders.decode_record`) to data records."""
    for o in objs:
        if decoder != "none" and o.get("type") == "record" and "controlType" not in o:
            dec = decode_record(decoder, o.get("key"), o.get("value"))
            if dec is not None:
                o["decoded"] = dec
        yield o


def dump_extra(f: Path, print_data: bool) -> Iterator[dict[str, Any]]:
    """Dump objects of a snapshot (as a segment) or of quorum-state (one object)."""
    from mqstore.storage.kafka.internal import read_quorum_state
    from mqstore.storage.kafka.layout import QUORUM_STATE, snapshot_id
    from mqstore.storage.kafka.tools import dump_log

    if f.name == QUORUM_STATE:
        yield {"type": "quorum_state", **read_quorum_state(f)}
        return
    sid = snapshot_id(f.name)
    if sid is not None:
        yield {"type": "kraft_snapshot", "endOffset": sid[0], "epoch": sid[1]}
    yield from dump_log(f, print_data=print_data)


def _j(obj: Any) -> str:
    return to_json(obj)


def decoded_text(obj: dict[str, Any]) -> str | None:
    """The ``key: ... payload: ...`` part of a dump line for a decoded record (Kafka's style)."""
    dec = obj.get("decoded")
    if dec is None:
        return None
    if "decodeError" in dec:
        return None
    if "apiKey" in dec:  # metadata record
        if dec.get("unknown"):
            return f" payload: {_j({'type': dec['type'], 'apiKey': dec['apiKey'], 'version': dec['version'], 'bytes': dec['bytes'].hex()})}"
        return f" payload: {_j({'type': dec['type'], 'version': dec['version'], 'data': dec['data']})}"
    if dec.get("type") == "UNKNOWN":
        return (f" key: {_j({'type': str(dec['keyVersion']), 'unknown': True, 'bytes': dec['keyBytes'].hex()})}"
                f" payload: {'<DELETE>' if dec['valueBytes'] is None else dec['valueBytes'].hex()}")
    key = _j({"type": str(dec["keyVersion"]), "data": dec["key"]})
    if dec["valueVersion"] is None:
        return f" key: {key} payload: <DELETE>"
    if "valueBytes" in dec:
        return f" key: {key} payload: {_j({'version': str(dec['valueVersion']), 'unknown': True, 'bytes': dec['valueBytes'].hex()})}"
    return f" key: {key} payload: {_j({'version': str(dec['valueVersion']), 'data': dec['value']})}"


def extra_text_line(obj: dict[str, Any]) -> str | None:
    """Text of the object kinds this module adds (None: not one of them)."""
    t = obj.get("type")
    if t == "quorum_state":
        fields = {k: v for k, v in obj.items() if k not in ("type", "file")}
        return "quorum-state: " + json.dumps(fields, separators=(",", ":"))
    if t == "kraft_snapshot":
        return f"snapshot: endOffset: {obj['endOffset']} epoch: {obj['epoch']}"
    return None


def verify_extra(p: Path, report: Any) -> None:
    """Snapshot checks for a snapshot file or for the snapshots of a directory; quorum-state parse
    (the KRaft readers are loaded only when the path has such files)."""
    from mqstore.storage.kafka.layout import has_kraft_files

    if has_kraft_files(p):
        from mqstore.storage.kafka.internal import verify_kraft_files

        verify_kraft_files(p, report)


@click.command("consumers")
@click.argument("logdir", type=click.Path())
@click.option("--group", "group_name", default=None, help="Only this consumer group.")
@json_option
@handle_errors
def consumers(logdir: str, group_name: str | None, as_json: bool) -> None:
    """Committed offsets and lag per group/partition from __consumer_offsets alone (offline describe)."""
    from mqstore.storage.kafka.internal import consumer_groups

    root = Path(logdir)
    if not root.exists():
        raise StoreNotFoundError("path not found", path=str(root))
    rep = consumer_groups(root, group=group_name)
    if as_json:
        for g in sorted(rep.groups.values(), key=lambda g: g.group):
            click.echo(to_json({
                "group": g.group, "kind": g.kind, "state": g.state, "protocolType": g.protocol_type,
                "protocol": g.protocol, "generation": g.generation, "leader": g.leader, "members": g.members,
                "offsets": [{"topic": c.topic, "partition": c.partition, "offset": c.offset,
                             "logEndOffset": c.log_end_offset, "lag": c.lag, "leaderEpoch": c.leader_epoch,
                             "metadata": c.metadata, "commitTimestamp": c.commit_timestamp, "source": c.source}
                            for c in g.offsets],
            }))
    else:
        print_table("consumer groups", ["group", "kind", "state", "protocol type", "protocol", "generation/epoch",
                                        "members"],
                    [(g.group, g.kind, g.state, g.protocol_type, g.protocol, g.generation, g.members)
                     for g in sorted(rep.groups.values(), key=lambda g: g.group)])
        print_table("committed offsets", ["group", "topic", "partition", "current offset", "log end offset", "lag"],
                    [(c.group, c.topic, c.partition, c.offset,
                      "-" if c.log_end_offset is None else c.log_end_offset, "-" if c.lag is None else c.lag)
                     for g in sorted(rep.groups.values(), key=lambda g: g.group) for c in g.offsets])
    for msg in rep.problems:
        click.echo(f"warning: undecodable __consumer_offsets record: {msg}", err=True)
    if group_name is not None and group_name not in rep.groups:
        click.echo(f"error: no group {group_name!r} in {', '.join(rep.offsets_partitions)}", err=True)
        sys.exit(1)
