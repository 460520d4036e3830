"""Recovery's scan of a Kafka ``.log`` file: every batch header and checksum in one ``pread`` pass.

The compiled walk (:func:`mqstore.kernels.kafka.file_scan.walk_part`) reads a byte range of an open
file; this module owns the file: it splits a large file into parts walked by several threads
(each part after the first starting at a guessed batch start that the part before it must reach),
reports progress and turns a file that shrank meanwhile into a typed error.
:func:`scan_check_file_py` is the twin (the whole file read at once, then the reference scan and
checksums); tests run both on the same files.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from mqstore.errors import InvalidArgumentError, TruncatedRecordError, UnsupportedFormatError
from mqstore.kernels.kafka.batches import SCAN_FIELDS, STOP_END, check_crcs_py, scan_batches_py
from mqstore.kernels.kafka.file_scan import (
    FILE_SCAN_BUFFER,
    HAVE_FILE_SCAN,
    HAVE_NATIVE,
    NO_LIMIT,
    PRODUCER_FIELDS,
    SPLIT_SEARCH_BYTES,
    SPLIT_VERIFY_BYTES,
    STOP_LIMIT,
    STOP_READ_ERROR,
    file_columns,
    find_batch_start_native,
    find_batch_start_numba,
    producer_fields_py,
    recover_parts,
    walk_part_native,
    walk_part_numba,
)
from mqstore.kernels.registry import register
from mqstore.kernels.threads import run_parallel

__all__ = ["HAVE_FILE_SCAN", "scan_check_file", "scan_check_file_native", "scan_check_file_numba",
           "scan_check_file_py"]


def scan_check_file_numba(fd: int, file_size: int, *, threads: int | None = None, progress: Any = None,
                          buffer_size: int = FILE_SCAN_BUFFER, min_part_bytes: int | None = None,
                          ) -> tuple[dict[str, Any], np.ndarray]:
    """:func:`scan_check_file` with the numba kernels."""
    return _scan_check_file(walk_part_numba, find_batch_start_numba, fd, file_size, threads=threads,
                            progress=progress, buffer_size=buffer_size, min_part_bytes=min_part_bytes)


def scan_check_file_native(fd: int, file_size: int, *, threads: int | None = None, progress: Any = None,
                           buffer_size: int = FILE_SCAN_BUFFER, min_part_bytes: int | None = None,
                           ) -> tuple[dict[str, Any], np.ndarray]:
    """:func:`scan_check_file` with the native kernels (``_nat_kafka``)."""
    return _scan_check_file(walk_part_native, find_batch_start_native, fd, file_size, threads=threads,
                            progress=progress, buffer_size=buffer_size, min_part_bytes=min_part_bytes)


def _scan_check_file(walk_part: Any, find_batch_start: Any, fd: int, file_size: int, *, threads: int | None = None,
                     progress: Any = None, buffer_size: int = FILE_SCAN_BUFFER, min_part_bytes: int | None = None,
                     ) -> tuple[dict[str, Any], np.ndarray]:
    """:func:`~mqstore.kernels.kafka.batches.scan_batches` and :func:`~mqstore.kernels.kafka.batches.check_crcs` of ``file[0:file_size]`` in one pass of ``pread``.

    Returns ``(scan, ok)``, identical to ``scan_batches(data)`` and ``check_crcs(data, scan)`` of the
    same bytes.  Large files are walked in ``threads`` parts (default: the CPUs): each part after
    the first starts at a guessed batch start near its cut (a v2 header whose CRC verifies), and
    the part before it must arrive exactly there, else the walk goes on sequentially from where
    the chain really leads — the guesses only ever cost time.  ``progress(done, total)`` is called
    from the calling thread.  Raises :class:`TruncatedRecordError` when the file holds fewer than
    ``file_size`` bytes (it shrank meanwhile) and ``OSError`` when a read fails.
    """
    if not HAVE_FILE_SCAN:  # pragma: no cover - see mqstore.kernels.native
        raise UnsupportedFormatError("the pread/ISA-L scan is not available on this platform")
    if buffer_size < 64:
        raise InvalidArgumentError(f"buffer_size must be ≥ 64, got {buffer_size}")
    parts = recover_parts(file_size, threads, min_part_bytes)
    cuts = [0]
    if parts > 1:
        scratch, scratch2 = np.empty(buffer_size, np.uint8), np.empty(buffer_size, np.uint8)
        for k in range(1, parts):
            lo = max(cuts[-1] + 1, file_size * k // parts)
            s = int(find_batch_start(fd, file_size, lo, min(file_size, lo + SPLIT_SEARCH_BYTES), scratch, scratch2,
                                      SPLIT_VERIFY_BYTES))
            if s > cuts[-1]:
                cuts.append(s)
    done = [0] * len(cuts)
    bounds = [*cuts[1:], NO_LIMIT]

    def reporter(k: int) -> Any:
        if progress is None:
            return None

        def report(p: int) -> None:
            done[k] = p - cuts[k]
            if k == 0:
                progress(min(file_size, sum(done)), file_size)
        return report

    results = run_parallel(walk_part, [(fd, file_size, cuts[k], bounds[k], buffer_size, reporter(k))
                                        for k in range(len(cuts))])
    blocks: list[dict[str, np.ndarray]] = []
    p, reason = 0, STOP_END
    for k, (bl, p_k, reason_k) in enumerate(results):
        blocks += bl
        p, reason = p_k, reason_k
        if reason != STOP_LIMIT:
            break
        if p != bounds[k]:  # the guess at cut k + 1 was not a batch start of this chain
            bl, p, reason = walk_part(fd, file_size, p, NO_LIMIT, buffer_size, reporter(0))
            blocks += bl
            break
    if reason == STOP_READ_ERROR:
        raise read_error(fd, p, file_size)
    if progress is not None:
        progress(file_size, file_size)
    out: dict[str, Any] = {}
    for f in (*SCAN_FIELDS, *PRODUCER_FIELDS, "ok"):
        out[f] = (np.concatenate([b[f] for b in blocks]) if len(blocks) > 1 else
                  blocks[0][f].copy() if blocks else file_columns(0)[f])
    ok = out.pop("ok")
    out.update(valid_end=int(p), stop_reason=int(reason), count=int(ok.shape[0]))
    return out, ok


def read_error(fd: int, p: int, file_size: int) -> TruncatedRecordError:
    """The error of a file walk that could not read at ``p``: raises the ``OSError`` of the read if
    there is one, else returns the :class:`TruncatedRecordError` of a file that shrank meanwhile."""
    data = os.pread(fd, 61, p)  # raises the OSError if there is one
    return TruncatedRecordError(
        f"the file ended at {p + len(data)} while being read (it held {file_size} bytes when the scan began)",
        offset=p)


def scan_check_file_py(fd: int, file_size: int, *, threads: int | None = None, progress: Any = None,
                       buffer_size: int = FILE_SCAN_BUFFER, min_part_bytes: int | None = None,
                       ) -> tuple[dict[str, Any], np.ndarray]:
    """Twin of :func:`scan_check_file`: the whole file read at once, then
    :func:`~mqstore.kernels.kafka.batches.scan_batches_py` and
    :func:`~mqstore.kernels.kafka.batches.check_crcs_py` (``threads``, ``buffer_size`` and
    ``min_part_bytes`` only tune the fast path; ``progress`` is called once at the end)."""
    data = os.pread(fd, file_size, 0) if file_size else b""
    if len(data) < file_size:
        raise TruncatedRecordError(f"the file holds {len(data)} of {file_size} bytes", offset=len(data))
    scan = scan_batches_py(data)
    scan.update(producer_fields_py(data, scan))
    ok = check_crcs_py(data, scan)
    if progress is not None:
        progress(file_size, file_size)
    return scan, ok


def read_spans(fd: int, starts: np.ndarray, length: int) -> np.ndarray:
    """``file[starts[i] : starts[i] + length]`` for every ``i``, as an ``(n, length)`` ``uint8``
    array read with ``pread`` (the native module's loop when built, else :func:`read_spans_py`):
    a few bytes of many batches without mapping or reading the rest of the file.  Raises
    :class:`TruncatedRecordError` when a span runs past the end of the file."""
    if not HAVE_NATIVE:
        return read_spans_py(fd, starts, length)
    st = np.ascontiguousarray(starts, np.int64)
    out = np.empty((st.shape[0], length), np.uint8)
    got = _native_module().pread_spans(fd, st, length, out)
    if got < st.shape[0]:
        os.pread(fd, 1, max(0, int(st[got])))  # raises the OSError if there is one
        raise TruncatedRecordError(f"{length} bytes at {int(st[got])} run past the end of the file",
                                   offset=int(st[got]))
    return out


def read_spans_py(fd: int, starts: np.ndarray, length: int) -> np.ndarray:
    """Twin of :func:`read_spans`: one ``os.pread`` per span."""
    out = np.empty((len(starts), length), np.uint8)
    for i, p in enumerate(np.asarray(starts, np.int64).tolist()):
        data = os.pread(fd, length, p) if p >= 0 else b""
        if len(data) < length:
            raise TruncatedRecordError(f"{length} bytes at {p} run past the end of the file", offset=p)
        out[i] = np.frombuffer(data, np.uint8)
    return out


def _native_module() -> Any:
    from mqstore.kernels.backend import native

    return native("_nat_kafka")


scan_check_file = scan_check_file_native if HAVE_NATIVE else scan_check_file_numba
register("kafka.scan_check_file", scan_check_file_numba, scan_check_file_py,
         native=scan_check_file_native if HAVE_NATIVE else None)
