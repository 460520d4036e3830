"""Run GIL-free (``nogil``) kernels on several threads of one process.

Every kernel of the package releases the GIL, so a plain thread pool runs them on all cores.
Numba's own ``parallel=True`` threading layers are avoided on purpose: they are not fork safe and
the crash campaigns fork.  The pool here is dropped in a forked child (``os.register_at_fork``)
and recreated on first use.

The thread count of a call is ``threads=None`` (the default: :func:`default_threads`), ``1`` (the
sequential code, in the calling thread) or any ``N >= 1``.  ``MQSTORE_THREADS`` in the environment
overrides the default.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from mqstore.errors import InvalidArgumentError

if TYPE_CHECKING:  # (imported when a pool is first made: a one-shot command without one does not pay for it)
    from concurrent.futures import Future, ThreadPoolExecutor

MAX_DEFAULT_THREADS = 4

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_lock = threading.Lock()


def default_threads(reserve: int = 0) -> int:
    """``MQSTORE_THREADS`` when set, else ``os.cpu_count()`` less ``reserve`` CPUs (kept for the
    caller's other busy threads, such as the rebuild's read-ahead scan), at least 1 and at most
    :data:`MAX_DEFAULT_THREADS`."""
    env = os.environ.get("MQSTORE_THREADS", "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise InvalidArgumentError(f"MQSTORE_THREADS must be a positive integer, not {env!r}") from None
        if n < 1:
            raise InvalidArgumentError(f"MQSTORE_THREADS must be a positive integer, not {env!r}")
        return n
    return max(1, min((os.cpu_count() or 1) - max(0, reserve), MAX_DEFAULT_THREADS))


def resolve_threads(threads: int | None) -> int:
    """The thread count of a call: ``None`` → :func:`default_threads`; checked to be ``>= 1``."""
    if threads is None:
        return default_threads()
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidArgumentError(f"threads must be a positive integer, not {threads!r}")
    return threads


def _get_pool(workers: int) -> ThreadPoolExecutor:
    from concurrent.futures import ThreadPoolExecutor

    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < workers:
            old = _pool
            _pool = ThreadPoolExecutor(workers, thread_name_prefix="mqstore-kernel")
            _pool_size = workers
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def shutdown_pool() -> None:
    """Stop the pool's (idle) worker threads and wait for them; the next parallel call makes a new
    pool.  The CLI calls it before ending its process."""
    global _pool, _pool_size
    with _lock:
        pool, _pool, _pool_size = _pool, None, 0
    if pool is not None:
        pool.shutdown(wait=True)


def _forget_pool() -> None:  # in a forked child: the parent's worker threads do not exist here
    global _pool, _pool_size, _lock
    _pool = None
    _pool_size = 0
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_pool)


def run_parallel(fn: Callable[..., Any], calls: Sequence[tuple[Any, ...]]) -> list[Any]:
    """``[fn(*args) for args in calls]``, the first call in this thread and the others in the
    pool at the same time; exceptions propagate (after every call has finished)."""
    if len(calls) <= 1:
        return [fn(*args) for args in calls]
    pool = _get_pool(len(calls) - 1)
    futures: list[Future[Any]] = [pool.submit(fn, *args) for args in calls[1:]]
    try:
        first = fn(*calls[0])
    finally:
        rest = [f.exception() for f in futures]  # wait for all before anything is raised
    for exc in rest:
        if exc is not None:
            raise exc
    return [first, *(f.result() for f in futures)]


def split_even(n: int, parts: int) -> list[tuple[int, int]]:
    """``parts`` contiguous ``(start, stop)`` ranges covering ``range(n)`` (sizes differ by <= 1)."""
    parts = max(1, min(parts, n)) if n else 1
    bounds = [n * i // parts for i in range(parts + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(parts)]


def fill_in_parts(scratch: list[Any], parts: Sequence[Any], measure: Callable[[Any], int | None],
                  fill: Callable[[Any, Any], tuple[int, bool]]) -> tuple[memoryview, int, list[tuple[int, bool]]]:
    """Write the output of several parts of a job at the same time into one buffer, in part order.

    ``measure(part)`` gives an upper bound of a part's bytes (None: the job cannot be done this
    way; nothing is written); each part is then written by ``fill(part, region)`` — one call per
    part on the thread pool, so ``fill`` should release the GIL — into its own region of the
    ``uint8`` buffer kept in ``scratch[0]`` (grown when too small), and returns ``(bytes used,
    complete)``.  The regions are then moved together, up to and including the first part that
    is not complete.  Returns ``(view of the bytes, number of parts kept, fill results)``; the
    view is valid until ``scratch`` is used again.  ``(empty view, 0, [])`` when a measure says
    None."""
    import numpy as np

    needs = []
    for part in parts:
        need = measure(part)
        if need is None:
            return memoryview(b""), 0, []
        needs.append(need)
    total = sum(needs)
    if not scratch or len(scratch[0]) < total:
        scratch[:] = [np.empty(max(total, 1), np.uint8)]
    out = scratch[0]
    starts = [0]
    for need in needs[:-1]:
        starts.append(starts[-1] + need)
    done = run_parallel(lambda part, a, need: fill(part, out[a : a + need]),
                        list(zip(parts, starts, needs, strict=True)))
    cursor = 0
    kept = 0
    for (used, complete), a in zip(done, starts, strict=True):
        if a != cursor:
            np.copyto(out[cursor : cursor + used], out[a : a + used])  # overlapping: numpy buffers it
        cursor += used
        kept += 1
        if not complete:
            break
    return memoryview(out)[:cursor], kept, done


def ordered_map(fn: Callable[[Any, int], Any], items: Sequence[Any], depth: int) -> Iterator[Any]:
    """``fn(item, slot)`` for every item, up to ``depth`` of them at once on the thread pool, the
    results yielded in item order as each is ready (a pipeline: the caller consumes result k — e.g.
    writes it — while the next ones are computed).  ``slot`` is in ``range(depth + 1)`` and no two
    calls whose results may be alive at the same time share one, so ``fn`` can write into a buffer
    per slot that stays valid until the caller asks for the next result.  ``depth <= 1`` runs
    everything in the calling thread.  When the caller stops early, the calls still running are
    waited for (their buffers and inputs stay valid until they end)."""
    if depth <= 1 or len(items) <= 1:
        for k, item in enumerate(items):
            yield fn(item, k & 1)
        return
    pool = _get_pool(depth)
    pending: list[Future[Any]] = []
    try:
        for k, item in enumerate(items):
            if len(pending) >= depth:
                yield pending.pop(0).result()
            pending.append(pool.submit(fn, item, k % (depth + 1)))
        while pending:
            yield pending.pop(0).result()
    finally:
        for f in pending:
            f.cancel()
        for f in pending:
            if not f.cancelled():
                f.exception()  # wait for it; its error (if any) is of no use to a caller that stopped
