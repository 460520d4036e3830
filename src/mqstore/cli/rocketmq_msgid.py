"""``mqstore rocketmq get-by-msgid``: a message by either kind of RocketMQ message id.

* an **offset message id** (``queryMsgById``): store host + CommitLog offset, 32 hex digits (IPv4)
  or 56 (IPv6): the record at that offset, when it is one whose store host is the id's;
* a **unique key** (``queryMsgByUniqueKey``): the client-made ``UNIQ_KEY`` property, 32 hex
  digits: looked up through the IndexFiles, where the broker indexes it as ``topic#uniqKey`` (so
  per topic: ``--topic`` or else every topic of the store), keeping exact matches only.

Both are 32 hex digits for IPv4 brokers, so an id is tried as an offset id first, then as a
unique key, as mqadmin does.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from mqstore.cli.common import handle_errors, json_option
from mqstore.cli.rocketmq_store import commitlog_options, store_config
from mqstore.errors import InvalidArgumentError, MqStoreError


@click.command("get-by-msgid")
@click.argument("store", type=click.Path(file_okay=False, path_type=Path))
@click.argument("msg_id")
@click.option("--topic", default=None, help="Topic of a unique key (default: every topic of the store).")
@click.option("--decode", default=None, help="Show bodies as utf8, hex or json.")
@commitlog_options
@json_option
@handle_errors
def get_by_msgid(store: Path, msg_id: str, topic: str | None, decode: str | None, as_json: bool) -> None:
    """A message by offset message id or by unique key (UNIQ_KEY); exit 1 when none matches."""
    from mqstore.api.rocketmq import MessageStore
    from mqstore.cli.filters import check_decoder, print_messages
    from mqstore.formats.rocketmq.msgid import decode_message_id

    check_decoder(decode)
    text = msg_id.strip()
    try:
        bytes.fromhex(text)
    except ValueError:
        raise InvalidArgumentError(f"message id {msg_id!r} is not hexadecimal") from None
    found = []
    kind = None
    with MessageStore.open(store, store_config(store), read_only=True, create=False) as s:
        try:
            host, offset = decode_message_id(text)
        except InvalidArgumentError:
            host, offset = None, -1
        if host is not None:
            try:
                m = s.get_by_offset(offset, check_crc=False)
            except MqStoreError:
                m = None
            if m is not None and str(m.store_host) == str(host) and (topic is None or m.topic == topic):
                found, kind = [m], "offset message id"
        if not found:
            topics = [topic] if topic is not None else sorted({t for t, _ in s.engine.consume_queues})
            for t in topics:
                found += [m for m in s.query_by_key(t, text) if m.uniq_key == text]
            kind = "unique key"
        if not found:
            click.echo(f"error: no message has the id {text} (neither an offset message id nor a unique key "
                       f"of {'topic ' + topic if topic else 'any topic'} in {store})", err=True)
            sys.exit(1)
        print_messages(found, as_json, f"{text} ({kind})", decode)
