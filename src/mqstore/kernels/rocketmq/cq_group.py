"""The ConsumeQueue units of a dispatch batch grouped by queue, three ways.

:func:`group_units` takes the unit columns of a batch (topic id, queue id, CommitLog offset, size,
tags code; CommitLog order) and returns them grouped by queue in one call: the groups in key order
(topic id, then queue id as an unsigned 32-bit number: the order of
:func:`mqstore.storage.rocketmq.lmq.queue_groups`), the rows of a group in their order, and every
unit's 20 bytes (big-endian CommitLog offset, size, tags code: spec §3.1) laid out group after
group, so that storage appends a queue's units of the batch with one copy.  Where those bytes go
(files, their size, queue offsets) is storage's business; the kernel only sees arrays.

The native module ``_nat_rmq_scan`` runs it when built, else the numba kernel of
:mod:`.cq_group_nb` (imported on first use); :func:`group_units_py` is the numpy twin.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from mqstore.errors import InvalidArgumentError
from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.registry import register

_NAT: Any = native("_nat_rmq_scan")

#: one ConsumeQueue unit: CommitLog offset (8), size (4), tags code (8), big-endian
UNIT_DTYPE = np.dtype([("offset", ">i8"), ("size", ">i4"), ("tags_code", ">i8")])


class UnitGroups(NamedTuple):
    """Group ``g`` is queue ``(topic_id[g], queue_id[g])``: rows and unit bytes
    ``[start[g], start[g + 1])`` of ``rows`` and of ``units`` (20 bytes a row)."""

    topic_id: np.ndarray  # int32, one per group
    queue_id: np.ndarray  # int32, one per group
    start: np.ndarray  # int64, groups + 1
    rows: np.ndarray  # int64, the batch rows grouped
    units: np.ndarray  # uint8, 20 bytes per row, grouped

    def __len__(self) -> int:
        return len(self.topic_id)

    def unit_bytes(self, g: int) -> np.ndarray:
        return self.units[20 * int(self.start[g]) : 20 * int(self.start[g + 1])]


def _nb() -> Any:
    return numba_module("mqstore.kernels.rocketmq.cq_group_nb")


def _args(topic_id: np.ndarray, queue_id: np.ndarray, offset: np.ndarray, size: np.ndarray,
          tags_code: np.ndarray) -> tuple[np.ndarray, ...]:
    cols = (np.ascontiguousarray(topic_id, np.int32), np.ascontiguousarray(queue_id, np.int32),
            np.ascontiguousarray(offset, np.int64), np.ascontiguousarray(size, np.int32),
            np.ascontiguousarray(tags_code, np.int64))
    if any(c.ndim != 1 or len(c) != len(cols[0]) for c in cols):
        raise InvalidArgumentError("group_units: the unit columns differ in length")
    return cols


def _outputs(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return (np.empty(n, np.int64), np.empty(20 * n, np.uint8), np.empty(n, np.int32), np.empty(n, np.int32),
            np.empty(n + 1, np.int64))


def group_units_native(topic_id: np.ndarray, queue_id: np.ndarray, offset: np.ndarray, size: np.ndarray,
                       tags_code: np.ndarray) -> UnitGroups:
    """:func:`group_units` in C (``_nat_rmq_scan.group_units``: a hash of the queues, one pass)."""
    cols = _args(topic_id, queue_id, offset, size, tags_code)
    n = len(cols[0])
    rows, units, g_tid, g_qid, g_start = _outputs(n)
    ng = _NAT.group_units(*cols, rows, units, g_tid, g_qid, g_start, np.empty(n, np.int32))
    return UnitGroups(g_tid[:ng], g_qid[:ng], g_start[: ng + 1], rows, units)


def group_units_numba(topic_id: np.ndarray, queue_id: np.ndarray, offset: np.ndarray, size: np.ndarray,
                      tags_code: np.ndarray) -> UnitGroups:
    """:func:`group_units` on the numba kernel (a stable sort of the queue keys)."""
    cols = _args(topic_id, queue_id, offset, size, tags_code)
    n = len(cols[0])
    rows, units, g_tid, g_qid, g_start = _outputs(n)
    ng = _nb().group_units_kernel(*cols, rows, units, g_tid, g_qid, g_start)
    return UnitGroups(g_tid[:ng], g_qid[:ng], g_start[: ng + 1], rows, units)


def group_units_py(topic_id: np.ndarray, queue_id: np.ndarray, offset: np.ndarray, size: np.ndarray,
                   tags_code: np.ndarray) -> UnitGroups:
    """Twin of :func:`group_units`: rows per queue in a dict, the groups sorted by key, the units
    through a big-endian structured array."""
    tid, qid, off, sz, tags = _args(topic_id, queue_id, offset, size, tags_code)
    groups: dict[tuple[int, int], list[int]] = {}
    for i, (t, q) in enumerate(zip(tid.tolist(), qid.tolist(), strict=True)):
        groups.setdefault((t, q & 0xFFFFFFFF), []).append(i)
    keys = sorted(groups)
    rows = np.array([i for k in keys for i in groups[k]], np.int64)
    starts = np.zeros(len(keys) + 1, np.int64)
    np.cumsum([len(groups[k]) for k in keys], out=starts[1:])
    arr = np.empty(len(rows), UNIT_DTYPE)
    arr["offset"], arr["size"], arr["tags_code"] = off[rows], sz[rows], tags[rows]
    return UnitGroups(np.array([t for t, _ in keys], np.int32),
                      np.array([q for _, q in keys], np.uint32).astype(np.int32), starts, rows,
                      arr.view(np.uint8).reshape(-1).copy())


group_units = group_units_native if _NAT is not None else group_units_numba
register("rocketmq.group_units", group_units_numba, group_units_py,
         native=group_units_native if _NAT is not None else None)
