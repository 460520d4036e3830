"""Rebuild ``.index``/``.timeindex`` of one segment from its ``.log`` (Kafka's ``LogSegment.recover``).

:func:`analyze_log` is the single code path used by live recovery, the ``rebuild-index`` CLI, the
``verify`` command and the Spark job (one task per segment): it scans the batch headers (numba),
validates CRCs, finds the valid prefix and computes the index entries with the rule of spec §4.5.
The output of :func:`rebuild_indexes` is byte-identical to the files Kafka's recovery writes.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mqstore.errors import CorruptDataError, InvalidArgumentError, StoreNotFoundError
from mqstore.kernels.kafka.stops import STOP_BAD_SIZE, STOP_READ_ERROR, STOP_TORN
from mqstore.storage.kafka.layout import INDEX_SUFFIX, LOG_SUFFIX, TIMEINDEX_SUFFIX, parse_base_offset
from mqstore.storage.locks import PartitionLock

if TYPE_CHECKING:
    import numpy as np

    from mqstore.kernels.kafka.file_scan import Recovered

# numpy and the numpy kernels are imported by the functions that use them: with the native kernels
# built, rebuild_indexes (the `kafka rebuild-index` command) runs without importing numpy at all
# (kernels.kafka.file_scan.recover_native: the walk, checksums and index bytes in one call).

DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
SCAN_CHUNK = 64 * 1024 * 1024

ProgressFn = Callable[[int, int], None]


@dataclass
class LogAnalysis:
    """What a recovery pass learns about a ``.log``."""

    log_size: int
    scan: dict[str, Any]  # columns of every walked batch (see kernels.kafka.SCAN_FIELDS)
    crc_ok: np.ndarray  # per walked batch
    n_valid: int  # batches before the first invalid one
    valid_bytes: int  # bytes of those batches: where recovery truncates
    stop: str  # "end" | "torn" (torn last batch) | "bad_size" | "crc" (invalid batch)
    error: str | None  # Kafka's warning text for a corrupt record, else None

    @property
    def truncated_bytes(self) -> int:
        return self.log_size - self.valid_bytes


def _concat(parts: list[dict[str, Any]]) -> dict[str, Any]:
    import numpy as np

    from mqstore.kernels.kafka.batches import SCAN_FIELDS

    out: dict[str, Any] = {}
    for f in SCAN_FIELDS:
        out[f] = np.concatenate([p[f] for p in parts]) if parts else np.zeros(0, np.int64)
    out["count"] = int(sum(p["count"] for p in parts))
    return out


def scan_log(buf: Any, *, progress: ProgressFn | None = None, chunk: int = SCAN_CHUNK) -> dict[str, Any]:
    """:func:`scan_batches` over a whole buffer, in chunks so that progress can be shown."""
    import numpy as np

    from mqstore.kernels.kafka.batches import scan_batches

    mv = memoryview(buf).cast("B") if not isinstance(buf, np.ndarray) else memoryview(buf)
    total = len(mv)
    parts = []
    pos = 0
    reason = 0
    span = chunk
    while True:
        end_c = min(pos + span, total)
        res = scan_batches(mv[:end_c], pos)
        if res["count"]:
            parts.append(res)
        reason = res["stop_reason"]
        new_pos = res["valid_end"]
        if progress is not None:
            progress(new_pos, total)
        if reason == STOP_BAD_SIZE or end_c >= total:
            pos = new_pos
            break
        span = chunk if new_pos > pos else span * 2  # a batch larger than the chunk: widen
        pos = new_pos
    out = _concat(parts)
    out["valid_end"] = pos
    out["stop_reason"] = reason
    return out


def analyze_log(buf: Any, *, progress: ProgressFn | None = None) -> LogAnalysis:
    """Scan + validate a ``.log`` buffer and find the prefix Kafka's recovery keeps."""
    from mqstore.kernels.kafka.batches import check_crcs

    scan = scan_log(buf, progress=progress)
    return _analysis(len(buf), scan, check_crcs(buf, scan))


def analyze_log_file(fd: int, size: int, *, progress: ProgressFn | None = None,
                     threads: int | None = None) -> LogAnalysis:
    """:func:`analyze_log` of the first ``size`` bytes of an open file, read with ``pread`` in one
    pass (walk and checksums together, in parts over ``threads`` threads); the same answer as
    :func:`analyze_log` over a mapping of the file.  Falls back to that mapping where the compiled
    file scan is not available."""
    from mqstore.kernels.kafka.file_scan import HAVE_FILE_SCAN
    from mqstore.storage.kafka.file_scan import scan_check_file

    if not HAVE_FILE_SCAN:  # pragma: no cover - see mqstore.kernels.native
        if size == 0:
            return analyze_log(b"", progress=progress)
        with mmap.mmap(fd, size, access=mmap.ACCESS_READ) as mm:
            return analyze_log(mm, progress=progress)  # the scan columns are copies, not views
    scan, ok = scan_check_file(fd, size, threads=threads, progress=progress)
    return _analysis(size, scan, ok)


_SHARED: dict[tuple[int, int, int, int, int], LogAnalysis] | None = None
_TXN_BATCHES: dict[tuple[int, int, int, int, int], int] | None = None  # (native path) see txn_batches_of


@contextmanager
def shared_analyses() -> Iterator[None]:
    """Within the block, :func:`analyze_file` analyses an unchanged file once (same device,
    inode, size and modification time, and the same length asked): a one-shot command that reads
    a segment twice — the index check or rebuild, then the transaction replay of the partition —
    walks and checksums it once.  Outside the block every call analyses the file."""
    global _SHARED, _TXN_BATCHES
    outer, outer_txn = _SHARED, _TXN_BATCHES
    if outer is None:
        _SHARED, _TXN_BATCHES = {}, {}
    try:
        yield
    finally:
        _SHARED, _TXN_BATCHES = outer, outer_txn


def _file_key(fd: int, size: int) -> tuple[int, int, int, int, int]:
    st = os.fstat(fd)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, size)


def analyze_file(fd: int, size: int, *, progress: ProgressFn | None = None) -> LogAnalysis:
    """:func:`analyze_log_file` of an open file, remembered inside :func:`shared_analyses`."""
    if _SHARED is None:
        return analyze_log_file(fd, size, progress=progress)
    key = _file_key(fd, size)
    got = _SHARED.get(key)
    if got is None:
        got = _SHARED[key] = analyze_log_file(fd, size, progress=progress)
    else:
        if isinstance(got.crc_ok, memoryview):  # analysed by analyze_file_columns: the same columns, as numpy
            got = _SHARED[key] = _numpy_analysis(got)
        if progress is not None:
            progress(size, size)
    return got


def analyze_file_columns(fd: int, size: int) -> LogAnalysis | None:
    """:func:`analyze_file` without numpy when the native kernels are selected (else None): the
    walk of ``kafka rebuild-index`` (:func:`mqstore.kernels.kafka.file_scan.walk_columns_native`),
    the columns as memoryviews (integer items; the C kernels take them as they are).  Remembered
    inside :func:`shared_analyses` (for :func:`analyze_file`, as numpy arrays, and for
    :func:`txn_batches_of`)."""
    from mqstore.kernels.kafka.file_scan import HAVE_NATIVE, walk_columns_native

    if not HAVE_NATIVE:
        return None
    key = _file_key(fd, size) if _SHARED is not None else None
    if key is not None and key in _SHARED:  # type: ignore[operator]
        return _SHARED[key]  # type: ignore[index]
    reason, valid_end, n_valid, txn, cols = walk_columns_native(fd, size)
    if reason == STOP_READ_ERROR:
        from mqstore.storage.kafka.file_scan import read_error

        raise read_error(fd, valid_end, size)
    ok = cols.pop("ok")
    count = len(ok)
    scan: dict[str, Any] = {**cols, "valid_end": valid_end, "stop_reason": reason, "count": count}
    bad = None
    if n_valid < count:
        bad = (scan["position"][n_valid], scan["size"][n_valid], scan["magic"][n_valid], scan["crc"][n_valid])
    nxt = scan["position"][n_valid] if n_valid < count else -1
    valid_bytes, stop, error = _verdict(count, n_valid, reason, valid_end, bad, nxt)
    a = LogAnalysis(size, scan, ok, n_valid, valid_bytes, stop, error)  # type: ignore[arg-type]
    if key is not None and _SHARED is not None and _TXN_BATCHES is not None:
        _SHARED[key] = a
        _TXN_BATCHES[key] = txn
    return a


def _numpy_analysis(a: LogAnalysis) -> LogAnalysis:
    """The analysis with its memoryview columns as numpy arrays (views, no copies)."""
    import numpy as np

    from mqstore.kernels.kafka.batches import COLUMN_DTYPES, SCAN_FIELDS
    from mqstore.kernels.kafka.file_scan import PRODUCER_FIELDS

    dtypes = {**dict(COLUMN_DTYPES), **dict.fromkeys(PRODUCER_FIELDS, np.int64)}
    scan = dict(a.scan)
    for f in (*SCAN_FIELDS, *PRODUCER_FIELDS):
        scan[f] = np.frombuffer(a.scan[f], dtypes[f])
    return LogAnalysis(a.log_size, scan, np.frombuffer(a.crc_ok, np.uint8).view(bool), a.n_valid, a.valid_bytes,
                       a.stop, a.error)


def _analysis(size: int, scan: dict[str, Any], ok: np.ndarray) -> LogAnalysis:
    import numpy as np

    bad = np.nonzero(~ok)[0]
    count = scan["count"]
    n_valid = int(bad[0]) if bad.shape[0] else count
    first_bad = None
    if bad.shape[0]:
        first_bad = (int(scan["position"][n_valid]), int(scan["size"][n_valid]), int(scan["magic"][n_valid]),
                     int(scan["crc"][n_valid]))
    nxt = int(scan["position"][n_valid]) if n_valid < count else -1
    valid_bytes, stop, error = _verdict(count, n_valid, scan["stop_reason"], int(scan["valid_end"]), first_bad, nxt)
    return LogAnalysis(size, scan, ok, n_valid, valid_bytes, stop, error)


def _verdict(count: int, n_valid: int, reason: int, valid_end: int, bad: tuple[int, int, int, int] | None,
             next_position: int) -> tuple[int, str, str | None]:
    """``(valid_bytes, stop, error)`` of a walk of ``count`` batches whose first ``n_valid`` are
    valid: ``bad`` is ``(position, size, magic, stored crc)`` of the first invalid batch (None: all
    are valid), ``next_position`` the position of batch ``n_valid`` (when ``n_valid < count``)."""
    if bad is not None:
        p, s, magic, crc = bad
        if s < 61 and magic >= 2:
            error: str | None = f"record batch size {s} is smaller than the minimum allowed (61) at position {p}"
        else:
            error = f"CRC mismatch of the batch at position {p} (stored {crc})"
        stop = "crc"
    else:
        error = None
        stop = "end"
        if reason == STOP_BAD_SIZE:
            stop = "bad_size"
            error = f"record size is smaller than the minimum record overhead (14) at position {valid_end}"
        elif reason == STOP_TORN:
            stop = "torn"
    valid_bytes = next_position if n_valid < count else valid_end
    if n_valid == count and count == 0:
        valid_bytes = 0
    return valid_bytes, stop, error


def index_bytes(entries: dict[str, np.ndarray], base_offset: int) -> tuple[bytes, bytes]:
    """Serialise built entries as on disk (big-endian, relative offsets)."""
    import numpy as np

    n = entries["offset_offsets"].shape[0]
    oi = np.empty(n, dtype=[("rel", ">i4"), ("pos", ">i4")])
    oi["rel"] = entries["offset_offsets"] - base_offset
    oi["pos"] = entries["offset_positions"]
    m = entries["time_timestamps"].shape[0]
    ti = np.empty(m, dtype=[("ts", ">i8"), ("rel", ">i4")])
    ti["ts"] = entries["time_timestamps"]
    ti["rel"] = entries["time_offsets"] - base_offset
    return oi.tobytes(), ti.tobytes()


@dataclass
class RebuildResult:
    """Outcome of :func:`rebuild_indexes` for one segment."""

    log_path: str
    base_offset: int
    log_size: int
    batches: int  # valid batches indexed
    valid_bytes: int
    truncated_bytes: int  # bytes Kafka's recovery would cut from the .log (not cut here)
    stop: str
    error: str | None
    offset_index_path: str
    time_index_path: str
    offset_entries: int
    time_entries: int
    next_offset: int


def _check_index_args(index_interval_bytes: int, max_index_size: int) -> None:
    if index_interval_bytes < 0:
        raise InvalidArgumentError(f"index interval bytes must be ≥ 0, got {index_interval_bytes}")
    if max_index_size < 12:
        raise InvalidArgumentError(f"max index size must be ≥ 12 (one time-index entry), got {max_index_size}")


def indexes_of(analysis: LogAnalysis, base_offset: int, *, index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
               max_index_size: int = DEFAULT_MAX_INDEX_SIZE, path: str | None = None) -> tuple[bytes, bytes]:
    """``(offset_index_bytes, time_index_bytes)`` Kafka's recovery writes for an analysed log."""
    from mqstore.kernels.kafka.index_build import build_index_entries

    _check_index_args(index_interval_bytes, max_index_size)
    entries = build_index_entries(analysis.scan, analysis.n_valid, base_offset, index_interval_bytes,
                                  max_index_size, path=path)
    return index_bytes(entries, base_offset)


class MappedLog:
    """Read-only mapping of a whole ``.log`` (an empty file maps to ``b""``)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            self._f = open(self.path, "rb")
        except FileNotFoundError:
            raise StoreNotFoundError("log file not found", path=str(self.path)) from None
        size = os.fstat(self._f.fileno()).st_size
        self.size = size
        self.mm: Any = mmap.mmap(self._f.fileno(), size, access=mmap.ACCESS_READ) if size else b""

    def fileno(self) -> int:
        """The open file's descriptor (for ``pread``)."""
        return self._f.fileno()

    def analysis(self, *, progress: ProgressFn | None = None) -> LogAnalysis:
        """:func:`analyze_log` of the mapped bytes, read with ``pread`` (:func:`analyze_file`:
        the same answer, without faulting the mapping in; shared inside :func:`shared_analyses`)."""
        return analyze_file(self._f.fileno(), self.size, progress=progress)

    def close(self) -> None:
        if isinstance(self.mm, mmap.mmap):
            try:
                self.mm.close()
            except BufferError:  # a view (held by an exception's traceback) still uses the map:
                pass  # it is unmapped when the last view goes; never mask the error being raised
        self._f.close()

    def __enter__(self) -> MappedLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_TMP_CHARS = "abcdefghijklmnopqrstuvwxyz0123456789_"


def _temporary(path: Path) -> tuple[int, str]:
    """A new file ``<name>.XXXXXXXX.tmp`` next to ``path``, open for writing, mode 0600: what
    ``tempfile.mkstemp`` makes, without importing ``tempfile`` (and ``random``, ``shutil``: ~10 ms
    of a one-shot command)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tag = "".join(_TMP_CHARS[b % len(_TMP_CHARS)] for b in os.urandom(8))
        tmp = str(path.parent / f"{path.name}.{tag}.tmp")
        try:
            return os.open(tmp, flags, 0o600), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no usable temporary name next to {path}")


def atomic_write(path: Path, data: bytes, *, fsync: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file and a rename."""
    fd, tmp = _temporary(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if fsync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def rebuild_indexes(
    segment_log_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str] | None = None,
    *,
    index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
    max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
    progress: ProgressFn | None = None,
) -> RebuildResult:
    """Regenerate the ``.index`` and ``.timeindex`` of ONE segment from its ``.log``.

    The files are written (atomically) to ``out_dir`` (default: next to the ``.log``), trimmed to
    their entries, exactly as Kafka's ``recover()`` leaves them.  The ``.log`` itself is never
    modified; an invalid tail is reported in the result (``truncated_bytes``, ``error``).
    Deterministic: any process (CLI, Spark task) produces byte-identical output.
    """
    log_path = Path(segment_log_path)
    if log_path.suffix != LOG_SUFFIX:
        raise InvalidArgumentError("rebuild-index needs a .log file", path=str(log_path))
    base = parse_base_offset(log_path)
    out = Path(out_dir) if out_dir is not None else log_path.parent
    if not out.is_dir():
        raise StoreNotFoundError("output directory does not exist", path=str(out))
    _check_index_args(index_interval_bytes, max_index_size)
    # In place, the partition's writer lock is taken: a live writer's indexes are not replaced
    # under it (StoreLockedError), and no writer opens the partition meanwhile.
    lock = _partition_lock(out) if out.resolve() == log_path.parent.resolve() else None
    try:
        return _rebuild_into(log_path, base, out, index_interval_bytes, max_index_size, progress)
    finally:
        if lock is not None:
            lock.release()


def _partition_lock(directory: Path) -> Any:
    return PartitionLock(directory)


def segment_logs_of(directory: Path) -> list[Path]:
    """The partition's segment ``.log`` files in offset order (the segments the transaction replay reads)."""
    return sorted(f for f in directory.iterdir() if f.suffix == ".log" and f.name.split(".", 1)[0].isdigit())


def _native_recover() -> Any:
    """:func:`mqstore.kernels.kafka.file_scan.recover_native` when the native kernels are selected, else None."""
    from mqstore.kernels.kafka.file_scan import HAVE_NATIVE, recover_native

    return recover_native if HAVE_NATIVE else None


def _recover(fd: int, size: int, base: int, index_interval_bytes: int, max_index_size: int) -> Recovered | None:
    """The native one-call recovery of an open file (None: not available); remembered for
    :func:`txn_batches_of` inside :func:`shared_analyses`.  Raises the error of a failed read."""
    recover = _native_recover()
    if recover is None:
        return None
    r = recover(fd, size, base, index_interval_bytes, max_index_size)
    if r.reason == STOP_READ_ERROR:
        from mqstore.storage.kafka.file_scan import read_error

        raise read_error(fd, r.valid_end, size)
    if _TXN_BATCHES is not None:
        _TXN_BATCHES[_file_key(fd, size)] = r.txn_batches
    return r


def txn_batches_of(log_path: str | os.PathLike[str]) -> int | None:
    """How many magic-2 batches of the valid prefix of a ``.log`` carry the transactional or control
    attribute (0: its transaction replay has nothing to do), from the native recovery (remembered
    inside :func:`shared_analyses`); None when the native kernels are not selected.  Errors as
    :meth:`MappedLog.analysis` raises them."""
    if _native_recover() is None:
        return None
    try:
        fd = os.open(log_path, os.O_RDONLY)
    except FileNotFoundError:
        raise StoreNotFoundError("log file not found", path=str(log_path)) from None
    try:
        size = os.fstat(fd).st_size
        if size == 0:
            return 0
        if _TXN_BATCHES is not None and _SHARED is not None:
            key = _file_key(fd, size)
            got = _TXN_BATCHES.get(key)
            if got is not None:
                return got
            a = _SHARED.get(key)  # analysed by the columns path (a progress bar was shown)
            if a is not None:
                n = a.n_valid
                return int((((a.scan["attributes"][:n] & 0x30) != 0) & (a.scan["magic"][:n] >= 2)).sum())
        r = _recover(fd, size, parse_base_offset(Path(log_path)), DEFAULT_INDEX_INTERVAL_BYTES,
                     DEFAULT_MAX_INDEX_SIZE)
        return None if r is None else r.txn_batches
    finally:
        os.close(fd)


def _rebuild_into(log_path: Path, base: int, out: Path, index_interval_bytes: int, max_index_size: int,
                  progress: ProgressFn | None) -> RebuildResult:
    try:
        fd = os.open(log_path, os.O_RDONLY)
    except FileNotFoundError:
        raise StoreNotFoundError("log file not found", path=str(log_path)) from None
    rec = None
    try:
        size = os.fstat(fd).st_size
        if progress is None:  # (a progress bar is fed by the parts' walks: the columns path)
            rec = _recover(fd, size, base, index_interval_bytes, max_index_size)
        if rec is None:
            analysis = analyze_file(fd, size, progress=progress)
    except CorruptDataError as exc:
        raise type(exc)(exc.message, path=str(log_path), offset=exc.offset) from None
    finally:
        os.close(fd)
    if rec is not None:
        if rec.build_error:
            from mqstore.kernels.kafka.index_build import build_error

            raise build_error(rec.build_error, rec.build_position if rec.build_position >= 0 else None,
                              str(log_path))
        oi, ti = rec.offset_index, rec.time_index
        n = rec.n_valid
        valid_bytes, stop, error = _verdict(rec.count, n, rec.reason, rec.valid_end, rec.bad, rec.next_position)
        last_offset = rec.last_offset
    else:
        oi, ti = indexes_of(analysis, base, index_interval_bytes=index_interval_bytes,
                            max_index_size=max_index_size, path=str(log_path))
        n = analysis.n_valid
        size, valid_bytes, stop, error = analysis.log_size, analysis.valid_bytes, analysis.stop, analysis.error
        last_offset = int(analysis.scan["last_offset"][n - 1]) if n else None
    stem = log_path.name[: -len(LOG_SUFFIX)]
    oi_path = out / f"{stem}{INDEX_SUFFIX}"
    ti_path = out / f"{stem}{TIMEINDEX_SUFFIX}"
    atomic_write(oi_path, oi)
    atomic_write(ti_path, ti)
    next_offset = last_offset + 1 if n and last_offset is not None else base
    return RebuildResult(
        str(log_path), base, size, n, valid_bytes, size - valid_bytes, stop, error, str(oi_path), str(ti_path),
        len(oi) // 8, len(ti) // 12, next_offset,
    )
