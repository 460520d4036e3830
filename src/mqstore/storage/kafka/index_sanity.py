"""Kafka's ``sanityCheck`` of an index file on load (spec §3.10) and its warm section, numpy-free: the one home of its
rules and wording, used by :meth:`mqstore.storage.kafka.index.OffsetIndex.sanity_check`,
:meth:`~mqstore.storage.kafka.index.TimeIndex.sanity_check` and the native path of ``kafka verify``."""

from __future__ import annotations

from pathlib import Path

#: bytes at the end of an index that Kafka's searches look at first (the warm section, spec §3.7)
WARM_SECTION_BYTES = 8192


def offset_index_sanity_error(path: Path, base: int, entries: int, last_offset: int, length: int) -> str | None:
    """Why an ``.index`` of ``length`` bytes, ``entries`` entries (the last naming ``last_offset``)
    fails the check, or None."""
    if entries != 0 and last_offset < base:
        return (f"corrupt index found, index file ({path}) has non-zero size but the last offset is "
                f"{last_offset} which is less than the base offset {base}")
    if length % 8 != 0:
        return (f"index file {path.name} is corrupt, found {length} bytes which is neither positive "
                f"nor a multiple of 8")
    return None


def time_index_sanity_error(path: Path, base: int, entries: int, first_ts: int, last_ts: int, last_offset: int,
                            length: int) -> str | None:
    """Why a ``.timeindex`` of ``length`` bytes and ``entries`` entries (first timestamp
    ``first_ts``, last entry ``(last_ts, last_offset)``) fails the check, or None."""
    if entries != 0:
        if last_ts < first_ts:
            return (f"corrupt time index found, time index file ({path}) has non-zero size but the last "
                    f"timestamp is {last_ts} which is less than the first timestamp {first_ts}")
        if last_offset < base:
            return (f"corrupt time index found, time index file ({path}) has non-zero size but the last "
                    f"offset is {last_offset} which is less than the base offset {base}")
    if length % 12 != 0:
        return (f"time index file {path.name} is corrupt, found {length} bytes which is not a "
                f"multiple of 12")
    return None
