"""Record decoders of Kafka's internal topics, by name (what ``dump --decoder`` selects).

``cluster-metadata`` (``__cluster_metadata``: KRaft metadata records in data batches),
``offsets`` (``__consumer_offsets``), ``transaction`` (``__transaction_state``), ``share-state``
(``__share_group_state``) and ``none``.  :func:`decode_record` never raises on bad bytes: a record
that does not parse gives ``{"decodeError": message}`` with its raw key / value kept by the caller.
"""

from __future__ import annotations

import re
from typing import Any

from mqstore.errors import CorruptDataError, InvalidArgumentError

# The record schemas (coordinator_records, metadata_records) are imported by the functions that
# decode: the CLI builds its ``--decoder`` option from ``DECODERS`` in every kafka command, and a
# command that decodes nothing (verify, rebuild-index) should not load the schema tables.

DECODERS = ("cluster-metadata", "offsets", "transaction", "share-state", "none")

_PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")


def decoder_for_topic(topic: str) -> str:
    """The decoder Kafka's own tools would use for a topic (``none`` for ordinary topics)."""
    from mqstore.formats.kafka.coordinator_records import DECODER_BY_TOPIC

    return DECODER_BY_TOPIC.get(topic, "none")


def decoder_for_dir_name(name: str) -> str:
    """The decoder for a partition directory name (``__consumer_offsets-7`` -> ``offsets``)."""
    m = _PARTITION_DIR.match(name)
    return decoder_for_topic(m.group("topic")) if m else "none"


def check_decoder(name: str) -> str:
    if name not in DECODERS:
        raise InvalidArgumentError(f"unknown decoder {name!r} (one of {', '.join(DECODERS)})")
    return name


def decode_record(decoder: str, key: bytes | None, value: bytes | None) -> dict[str, Any] | None:
    """Decode the key/value of one data record with ``decoder``; ``None`` for ``none``."""
    if decoder == "none":
        return None
    from mqstore.formats.kafka.coordinator_records import decode_coordinator_record
    from mqstore.formats.kafka.metadata_records import decode_metadata_record

    try:
        if decoder == "cluster-metadata":
            return decode_metadata_record(value)
        return decode_coordinator_record(check_decoder(decoder), key, value)
    except CorruptDataError as exc:
        return {"decodeError": exc.message}
