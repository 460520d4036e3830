"""When the IndexService rolls to a new IndexFile, what the new file is named and starts from,
and which index time the checkpoint records after a build (spec §4.2, §4.5).

One home for these dispatch decisions: :class:`~mqstore.storage.rocketmq.index.IndexService`
puts its keys along :func:`roll_plan`, and the Spark rebuild plans its IndexFile tasks with the
same :func:`roll_plan`, :func:`name_rolls` and :func:`checkpoint_index_time`, so both roll,
name and carry over the same way by construction.  Pure planning: the only file access is the
existence check of the naming rule (:func:`~mqstore.storage.rocketmq.layout.next_index_file_name`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mqstore.storage.rocketmq.layout import next_index_file_name


def keys_per_file(index_num: int) -> int:
    """Keys one IndexFile holds: item 0 is never used, a file is full at ``indexCount == indexNum``."""
    return max(index_num - 1, 0)


@dataclass(frozen=True, slots=True)
class FileKeys:
    """The keys ``[lo, hi)`` (indexes into the keys being put) that one file receives;
    ``new_file``: the file is created for them (else they continue the current file)."""

    lo: int
    hi: int
    new_file: bool


def roll_plan(keys: int, per_file: int, room: int = 0) -> list[FileKeys]:
    """How ``keys`` keys put in order are spread over files: the first ``room`` continue the
    current file (``room`` 0: there is none or it is full), then a new file every ``per_file``."""
    if keys < 0 or per_file <= 0 or room < 0:
        raise ValueError(f"bad roll plan: keys={keys} per_file={per_file} room={room}")
    out: list[FileKeys] = []
    lo = 0
    if room and keys:
        lo = min(room, keys)
        out.append(FileKeys(0, lo, False))
    while lo < keys:
        hi = min(lo + per_file, keys)
        out.append(FileKeys(lo, hi, True))
        lo = hi
    return out


@dataclass(frozen=True, slots=True)
class IndexRoll:
    """A file a build creates: its number among the new files, name, first key (index into the
    keys being put), key count, and the end values of the previous file it starts from."""

    number: int
    name: str
    first_key: int
    keys: int
    carry_phy: int
    carry_ts: int


def name_rolls(plan: list[FileKeys], first_ts: Mapping[int, int], last_of: Mapping[int, tuple[int, int]],
               directory: str | os.PathLike[str] | None = None, prev_name: str | None = None) -> list[IndexRoll]:
    """The new files of ``plan``, named as the IndexService names them in ``directory`` after a
    file named ``prev_name``.  ``first_ts[k]``: store time of key ``k`` for each new file's
    first key; ``last_of[k]``: ``(phy offset, store time)`` of key ``k - 1`` for each new file
    with a predecessor among the keys (the carry-over; ``(0, 0)`` otherwise)."""
    rolls: list[IndexRoll] = []
    prev = prev_name
    for fk in plan:
        if not fk.new_file:
            continue
        name = next_index_file_name(directory, prev, first_ts[fk.lo])
        phy, ts = last_of.get(fk.lo, (0, 0)) if fk.lo else (0, 0)
        rolls.append(IndexRoll(len(rolls), name, fk.lo, fk.hi - fk.lo, phy, ts))
        prev = name
    return rolls


def new_file_firsts(plan: list[FileKeys]) -> list[int]:
    """The first key of every new file of ``plan`` (the keys :func:`name_rolls` needs: its
    store time, and the values of the key before it)."""
    return [fk.lo for fk in plan if fk.new_file]


def checkpoint_index_time(files: int, end_time_of: Callable[[int], int]) -> int:
    """The index time a build records in the checkpoint: the end time of the last file it rolled
    away from (the IndexService reports a file full when it rolls the next one), 0 when it
    rolled none.  ``end_time_of(k)``: end store time of the build's file ``k``."""
    return end_time_of(files - 2) if files >= 2 else 0
