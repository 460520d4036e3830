"""The compiled recovery walk of a Kafka ``.log`` file: batch headers and checksums in one ``pread`` pass.

Recovery reads the ``.log`` with ``pread`` into one small reused buffer per thread, walking the
batch headers and checksumming each batch while its bytes are in the L2 cache: one pass, no page
faults (a fresh mapping of a 1 GiB segment spends more time faulting than checksumming) and no
SIGBUS if the file shrinks meanwhile.  The checksums are ISA-L's (shipped in the ``isal``
package), called from the compiled loop by symbol (:mod:`mqstore.kernels.native`).

Only the compiled loop lives here (numba stays in ``kernels``): it is handed an open file
descriptor and a byte range.  The file handling — opening, the split of a file into parts over the
threads, progress, a file that shrank — is :func:`mqstore.storage.kafka.file_scan.scan_check_file`,
whose twin is :func:`~mqstore.kernels.kafka.batches.scan_batches_py` +
:func:`~mqstore.kernels.kafka.batches.check_crcs_py` over the bytes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from mqstore.kernels.backend import native, numba_module
from mqstore.kernels.kafka.stops import STOP_FULL, STOP_LIMIT, STOP_READ_ERROR

if TYPE_CHECKING:
    import numpy as np

# (numpy and the batch columns are imported by the functions that use them: the one-shot commands'
# native path, recover_native, runs without numpy)

FILE_SCAN_BUFFER = 64 * 1024  # bytes per pread: copies from the page cache are fastest into an L2-sized buffer
PARALLEL_MIN_BYTES = 32 * 1024 * 1024  # files this large per thread are walked in parts
SPLIT_SEARCH_BYTES = 4 * 1024 * 1024  # how far past a cut a batch start is looked for
SPLIT_VERIFY_BYTES = 32 * 1024 * 1024  # CRC bytes spent verifying split candidates, per cut
NO_LIMIT = 1 << 62
RECOVER_MAX_PARTS = 64  # the most threads recover_native uses (MK_MAX_PARTS in _nat_kafka.c)


#: columns the file scan adds to the batch-header scan: the producer id, epoch and base sequence
#: of each whole v2 header (−1 for other batches), read while the header is in the buffer
PRODUCER_FIELDS = ("producer_id", "producer_epoch", "base_sequence")


def file_columns(n: int) -> dict[str, np.ndarray]:
    import numpy as np

    from mqstore.kernels.kafka.batches import empty_columns

    cols = empty_columns(n)
    cols["ok"] = np.zeros(n, dtype=bool)
    for f in PRODUCER_FIELDS:
        cols[f] = np.zeros(n, np.int64)
    return cols


def producer_fields_py(data: Any, scan: dict[str, Any]) -> dict[str, np.ndarray]:
    """Twin of the :data:`PRODUCER_FIELDS` columns the file scan adds, from the bytes."""
    import numpy as np

    mv = memoryview(data).cast("B")
    out = {f: np.full(scan["count"], -1, np.int64) for f in PRODUCER_FIELDS}
    for i in range(scan["count"]):
        p = int(scan["position"][i])
        if scan["magic"][i] >= 2 and scan["size"][i] >= 61:
            out["producer_id"][i] = int.from_bytes(mv[p + 43 : p + 51], "big", signed=True)
            out["producer_epoch"][i] = int.from_bytes(mv[p + 51 : p + 53], "big", signed=True)
            out["base_sequence"][i] = int.from_bytes(mv[p + 53 : p + 57], "big", signed=True)
    return out


def _nb() -> Any:
    return numba_module("mqstore.kernels.kafka.file_scan_nb")


def _file_scan_numba(fd: int, file_size: int, p: int, limit: int, buf: np.ndarray, cols: dict[str, np.ndarray],
                     ) -> tuple[int, int, int]:
    from mqstore.kernels.kafka.batches import BatchColumns

    return _nb()._file_scan(fd, file_size, p, limit, buf, BatchColumns.of(cols), cols["ok"],
                            *(cols[f] for f in PRODUCER_FIELDS))


def _file_scan_native(fd: int, file_size: int, p: int, limit: int, buf: np.ndarray, cols: dict[str, np.ndarray],
                      ) -> tuple[int, int, int]:
    from mqstore.kernels.kafka.batches import BatchColumns

    return _NAT.file_scan(fd, file_size, p, limit, buf, *BatchColumns.of(cols), cols["ok"],
                          *(cols[f] for f in PRODUCER_FIELDS))


def find_batch_start_numba(fd: int, file_end: int, lo: int, hi: int, buf: np.ndarray, buf2: np.ndarray,
                           verify_budget: int) -> int:
    """First position in ``[lo, hi)`` that looks like the start of a v2 batch whose CRC-32C
    verifies (and is followed by a plausible header or the end of the file); −1 if none.  A
    guess: the caller confirms it by walking the chain from the start of the file up to it."""
    return int(_nb().find_batch_start(fd, file_end, lo, hi, buf, buf2, verify_budget))


def find_batch_start_native(fd: int, file_end: int, lo: int, hi: int, buf: np.ndarray, buf2: np.ndarray,
                            verify_budget: int) -> int:
    """:func:`find_batch_start_numba` in C (``_nat_kafka``)."""
    return int(_NAT.find_batch_start(fd, file_end, lo, hi, buf, buf2, verify_budget))


def walk_part_numba(fd: int, file_size: int, start: int, stop_at: int, buffer_size: int,
                    report: Any = None) -> tuple[list[dict[str, np.ndarray]], int, int]:
    """Blocks of columns of the batches walked from ``start`` (numba kernel, see :func:`walk_part`)."""
    return _walk_part(_file_scan_numba, fd, file_size, start, stop_at, buffer_size, report)


def walk_part_native(fd: int, file_size: int, start: int, stop_at: int, buffer_size: int,
                     report: Any = None) -> tuple[list[dict[str, np.ndarray]], int, int]:
    """Blocks of columns of the batches walked from ``start`` (native kernel, see :func:`walk_part`)."""
    return _walk_part(_file_scan_native, fd, file_size, start, stop_at, buffer_size, report)


class Recovered(NamedTuple):
    """What :func:`recover_native` learns from a ``.log`` (the small results only: no columns)."""

    reason: int  # stop reason of the walk (kernels.kafka.stops; STOP_READ_ERROR: the rest is empty)
    valid_end: int  # where the walk stopped
    count: int  # batches walked
    n_valid: int  # batches before the first one whose checksum fails
    bad: tuple[int, int, int, int] | None  # (position, size, magic, stored crc) of that batch
    next_position: int  # position of batch n_valid (−1: n_valid == count)
    last_offset: int | None  # of the last valid batch (None: no valid batch)
    build_error: int  # kernels.kafka.index_build BUILD_* code of the index entries
    build_position: int  # position of the batch the build error concerns (−1: none)
    offset_index: bytes | None  # the .index bytes of the valid prefix (None on a build error)
    time_index: bytes | None  # the .timeindex bytes
    txn_batches: int  # magic-2 batches of the valid prefix with the transactional or control bit


def recover_parts(file_size: int, threads: int | None = None, min_part_bytes: int | None = None) -> int:
    """How many parts (threads) a file walk of ``file_size`` bytes uses (the rule of both walks)."""
    from mqstore.kernels.threads import default_threads

    min_part = PARALLEL_MIN_BYTES if min_part_bytes is None else max(1, min_part_bytes)
    return max(1, min(default_threads() if threads is None else max(1, threads), file_size // min_part))


def recover_native(fd: int, file_size: int, base_offset: int, index_interval_bytes: int, max_index_size: int, *,
                   threads: int | None = None, buffer_size: int = FILE_SCAN_BUFFER,
                   min_part_bytes: int | None = None) -> Recovered:
    """What ``LogSegment.recover`` learns from ``file[0:file_size]`` and the index bytes it writes,
    in one native call without numpy: the walk and checksums of
    :func:`mqstore.storage.kafka.file_scan.scan_check_file` (the same parts over the same threads,
    in C threads), the valid prefix of :func:`mqstore.storage.kafka.rebuild.analyze_log_file` and
    the entries of :func:`mqstore.kernels.kafka.index_build.build_index_entries` serialised as
    :func:`mqstore.storage.kafka.rebuild.index_bytes` does (those are its twin; tests compare)."""
    if _NAT is None:
        raise RuntimeError("the native Kafka kernels are not built or not selected")
    parts = min(recover_parts(file_size, threads, min_part_bytes), RECOVER_MAX_PARTS)
    r = _NAT.recover(fd, file_size, parts, SPLIT_SEARCH_BYTES, SPLIT_VERIFY_BYTES, buffer_size, base_offset,
                     index_interval_bytes, max_index_size // 8, max_index_size // 12)
    return Recovered(*r)


#: the columns of :func:`walk_columns_native`, in its order, with their memoryview formats
WALK_COLUMNS = (("position", "q"), ("size", "i"), ("base_offset", "q"), ("last_offset", "q"),
                ("max_timestamp", "q"), ("base_timestamp", "q"), ("partition_leader_epoch", "i"), ("magic", "b"),
                ("attributes", "i"), ("record_count", "i"), ("crc", "I"), ("ok", "B"), ("producer_id", "q"),
                ("producer_epoch", "q"), ("base_sequence", "q"))


def walk_columns_native(fd: int, file_size: int, *, threads: int | None = None, buffer_size: int = FILE_SCAN_BUFFER,
                        min_part_bytes: int | None = None) -> tuple[int, int, int, int, dict[str, memoryview]]:
    """``(stop reason, valid_end, n_valid, txn_batches, columns)`` of the walk :func:`recover_native` makes (the same
    parts over the same threads), the columns handed back as memoryviews (the scan columns, ``ok``
    and the producer columns of :func:`mqstore.storage.kafka.file_scan.scan_check_file`), without
    numpy; ``n_valid`` and ``txn_batches`` as :class:`Recovered` has them.  On ``STOP_READ_ERROR`` the
    columns are empty."""
    if _NAT is None:
        raise RuntimeError("the native Kafka kernels are not built or not selected")
    parts = min(recover_parts(file_size, threads, min_part_bytes), RECOVER_MAX_PARTS)
    reason, valid_end, _count, n_valid, txn, cols = _NAT.walk_columns(fd, file_size, parts, SPLIT_SEARCH_BYTES,
                                                                      SPLIT_VERIFY_BYTES, buffer_size)
    return reason, valid_end, n_valid, txn, {name: memoryview(b).cast(fmt) for (name, fmt), b in zip(WALK_COLUMNS, cols, strict=True)}


def _walk_part(scan: Any, fd: int, file_size: int, start: int, stop_at: int, buffer_size: int,
               report: Any = None) -> tuple[list[dict[str, np.ndarray]], int, int]:
    """Blocks of columns of the batches walked from ``start`` up to ``stop_at``: the walk reads
    with ``pread`` into a buffer of ``buffer_size`` bytes and checksums each batch (column ``ok``);
    returns ``(blocks, position, stop reason)``."""
    import numpy as np

    buf = np.empty(buffer_size, np.uint8)
    blocks: list[dict[str, np.ndarray]] = []
    p = start
    seen = 0
    step = 64 * 1024 * 1024 if report is not None else NO_LIMIT
    while True:
        room = (min(stop_at, file_size) - p) // 26 + 1  # a batch is at least 26 bytes
        est = 4096 if seen == 0 else int((min(stop_at, file_size) - p) * seen / max(1, p - start) * 1.05) + 64
        cols = file_columns(max(1, min(room, est)))
        limit = min(stop_at, p + step)
        n, p2, reason = scan(fd, file_size, p, limit, buf, cols)
        if n:
            blocks.append({k: v[:n] for k, v in cols.items()})
            seen += n
        p = int(p2)
        if reason == STOP_READ_ERROR:
            return blocks, p, STOP_READ_ERROR
        if report is not None:
            report(p)
        if reason == STOP_FULL or (reason == STOP_LIMIT and p < stop_at):
            continue
        return blocks, p, int(reason)


_NAT = native("_nat_kafka")


def _have_numba_file_scan() -> bool:
    return bool(_nb().HAVE_FILE_SCAN)


#: whether the file scan can run here: always with the native module (pread, and ISA-L's CRCs or
#: the C tables), with numba when ISA-L's symbols and pread resolve (:mod:`mqstore.kernels.native`)
HAVE_NATIVE = _NAT is not None  # the native walk is selected
HAVE_FILE_SCAN = True if _NAT is not None else _have_numba_file_scan()
walk_part = walk_part_native if _NAT is not None else walk_part_numba
find_batch_start = find_batch_start_native if _NAT is not None else find_batch_start_numba
