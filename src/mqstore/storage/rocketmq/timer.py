"""Read-only access to a RocketMQ 5.x store's timer files (docs/formats/rocketmq-timer.md):
``timerwheel``, ``timerlog/<20-digit offset>``, ``config/timercheck``, ``config/timermetrics``.

Everything here only reads (files are mapped read-only).  The timerlog is scanned with numpy over
the mapped files, never unit by unit in Python.  ``rebuild-index`` never touches these files: the
broker itself re-derives its timer state at start-up from ``timercheck`` and the
``rmq_sys_wheel_timer`` ConsumeQueue (it re-reads the timerlog from the checkpointed flush
position, revises the wheel and re-enqueues from the checkpointed queue offset), so an offline
rewrite could only disagree with what the broker will do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mqstore.errors import CorruptDataError, MqStoreError
from mqstore.formats.rocketmq.timer import (
    BLANK_MAGIC,
    DEFAULT_PRECISION_MS,
    MAGIC_DELETE,
    MAGIC_ROLL,
    MIN_BLANK_LEN,
    SLOT_DTYPE,
    SLOT_SIZE,
    UNIT_DTYPE,
    UNIT_SIZE,
    TimerCheckpoint,
)
from mqstore.kernels.arrays import unique
from mqstore.storage.mapped import ReadOnlyMap
from mqstore.storage.rocketmq.layout import TIMER_FILES, timer_files_present  # noqa: F401 (their home is layout)

_NAME = re.compile(r"^\d{20}$")


@dataclass(slots=True)
class TimerUnits:
    """The valid units of the timerlog, one row per unit, as native int64 columns."""

    pos: np.ndarray
    prev_pos: np.ndarray
    magic: np.ndarray
    write_time: np.ndarray
    delay: np.ndarray
    offset_py: np.ndarray
    size_py: np.ndarray
    topic_hash: np.ndarray

    @property
    def delivery_ms(self) -> np.ndarray:
        return self.write_time + self.delay

    def __len__(self) -> int:
        return len(self.pos)


@dataclass(slots=True)
class TimerScan:
    units: TimerUnits
    min_offset: int  # base offset of the oldest timerlog file (0 without files)
    end: int  # global offset just after the last valid unit
    file_size: int
    files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _empty_units() -> TimerUnits:
    e = np.empty(0, np.int64)
    return TimerUnits(e, e, e, e, e, e, e, e)


def read_checkpoint(root: Path) -> TimerCheckpoint | None:
    """``config/timercheck`` or ``None`` when absent; garbage is a :class:`CorruptDataError`."""
    path = Path(root) / "config" / "timercheck"
    if not path.is_file():
        return None
    with open(path, "rb") as fh:
        data = fh.read(4096)
    return TimerCheckpoint.decode(data, path=str(path))


def read_metrics(root: Path) -> dict | None:
    """``config/timermetrics`` (JSON: a data version and per-topic timer counts) or ``None``."""
    path = Path(root) / "config" / "timermetrics"
    if not path.is_file():
        return None
    try:
        text = path.read_text("utf-8")
        value = json.loads(text) if text.strip() else {}
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptDataError(f"timer metrics is not JSON: {exc}", path=str(path)) from None
    if not isinstance(value, dict):
        raise CorruptDataError("timer metrics is not a JSON object", path=str(path))
    return value


def read_wheel(root: Path) -> np.ndarray | None:
    """The whole ``timerwheel`` as a structured array (a copy: the mapping is closed), or ``None``."""
    path = Path(root) / "timerwheel"
    if not path.is_file():
        return None
    size = path.stat().st_size
    if size == 0 or size % SLOT_SIZE:
        raise CorruptDataError(f"timer wheel is {size} bytes, not a non-zero multiple of the {SLOT_SIZE}-byte slot",
                               path=str(path))
    with ReadOnlyMap(path, what="timer wheel") as m:
        return np.frombuffer(m.mm, SLOT_DTYPE).copy()  # type: ignore[arg-type]


def scan_timerlog(root: Path) -> TimerScan:
    """Every valid unit of ``timerlog/`` with the problems found (a file not of the common size,
    a gap between files, a unit with a bad size or magic, a truncated unit at a file's end)."""
    d = Path(root) / "timerlog"
    if not d.is_dir():
        return TimerScan(_empty_units(), 0, 0, 0)
    names = sorted(p.name for p in d.iterdir() if p.is_file())
    problems: list[str] = []
    bad = [n for n in names if not _NAME.match(n)]
    for n in bad:
        problems.append(f"timerlog/{n}: not a timerlog file name (20 digits)")
    names = [n for n in names if _NAME.match(n)]
    if not names:
        return TimerScan(_empty_units(), 0, 0, 0, [], problems)
    sizes = [(d / n).stat().st_size for n in names]
    file_size = max(sizes)
    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("pos", "prev_pos", "magic", "write_time", "delay",
                                                         "offset_py", "size_py", "topic_hash")}
    end = int(names[0])
    for i, (name, length) in enumerate(zip(names, sizes, strict=True)):
        base = int(name)
        where = f"timerlog/{name}"
        if i and base != int(names[i - 1]) + file_size:
            problems.append(f"{where}: starts at {base}, expected {int(names[i - 1]) + file_size} (a missing file)")
        if length != file_size:
            problems.append(f"{where}: is {length} bytes, the other timerlog files {file_size} (truncated)")
        last = i == len(names) - 1
        with ReadOnlyMap(d / name, what="timerlog file") as m:
            data = m.array
            n = len(data) // UNIT_SIZE
            u = np.frombuffer(data[: n * UNIT_SIZE], UNIT_DTYPE) if n else np.empty(0, UNIT_DTYPE)
            size = u["size"].astype(np.int64)
            magic = u["magic"].astype(np.int64)
            ok = (size == UNIT_SIZE) & ((magic | 0xF) == 0xF)
            k = int(np.argmin(ok)) if n and not ok.all() else n
            for c in cols:
                if c == "pos":
                    cols[c].append(base + UNIT_SIZE * np.arange(k, dtype=np.int64))
                else:
                    cols[c].append(u[c][:k].astype(np.int64))
            tail = k * UNIT_SIZE
            end = base + tail
            rest = data[tail:]
            blank = (len(rest) >= MIN_BLANK_LEN
                     and int(np.frombuffer(rest[12:16].tobytes(), ">i4")[0]) == BLANK_MAGIC)
            if blank:
                if not last:
                    end = base + file_size
            elif rest.any():
                if len(rest) < UNIT_SIZE:
                    problems.append(f"{where}: truncated timerlog unit at position {base + tail}: "
                                    f"{len(rest)} of {UNIT_SIZE} bytes")
                else:
                    problems.append(f"{where}: invalid timerlog unit at position {base + tail}: size "
                                    f"{int(size[k])} magic {int(magic[k]) & 0xFFFFFFFF:#x}")
                del u, size, magic, ok, rest, data
                break  # the broker's recovery stops at the first bad unit too
            elif not last:
                problems.append(f"{where}: ends at {base + tail} without a blank unit, yet a later file follows")
            del u, size, magic, ok, rest, data
    units = TimerUnits(*(np.concatenate(v) for v in cols.values()))
    return TimerScan(units, int(names[0]), end, file_size, names, problems)


@dataclass(slots=True)
class TimerState:
    """What the timer files say, read once."""

    wheel: np.ndarray | None
    checkpoint: TimerCheckpoint | None
    metrics: dict | None
    scan: TimerScan
    precision_ms: int = DEFAULT_PRECISION_MS
    problems: list[str] = field(default_factory=list)

    def pending_mask(self) -> np.ndarray:
        """Units whose wheel slot the broker has not read yet (slot time >= lastReadTimeMs)."""
        u = self.scan.units
        read_to = self.checkpoint.last_read_time_ms if self.checkpoint is not None else 0
        slot_ms = u.delivery_ms // self.precision_ms * self.precision_ms
        return slot_ms >= read_to

    def pending_per_second(self) -> list[dict]:
        """Pending messages per delivery second (delete markers counted apart)."""
        u = self.scan.units
        mask = self.pending_mask()
        sec = u.delivery_ms[mask] // 1000
        dele = (u.magic[mask] & MAGIC_DELETE) != 0
        secs, inv = unique(sec, return_inverse=True)
        deletes = np.bincount(inv, weights=dele, minlength=len(secs)).astype(np.int64)
        total = np.bincount(inv, minlength=len(secs)).astype(np.int64)
        return [{"second": int(s), "messages": int(t - x), "deletes": int(x)}
                for s, t, x in zip(secs.tolist(), total.tolist(), deletes.tolist(), strict=True)]

    def summary(self) -> dict:
        sc = self.scan
        u = sc.units
        mask = self.pending_mask()
        ck = self.checkpoint
        wheel_used = 0 if self.wheel is None else int(np.count_nonzero(self.wheel["time"] != 0))
        per = self.pending_per_second()
        return {
            "wheelSlots": None if self.wheel is None else len(self.wheel),
            "wheelSlotsUsed": wheel_used,
            "precisionMs": self.precision_ms,
            "timerLogFiles": sc.files,
            "timerLogFileSize": sc.file_size,
            "timerLogMinOffset": sc.min_offset,
            "timerLogEnd": sc.end,
            "units": len(u),
            "rollUnits": int(np.count_nonzero(u.magic & MAGIC_ROLL)),
            "deleteUnits": int(np.count_nonzero(u.magic & MAGIC_DELETE)),
            "pending": int(np.count_nonzero(mask & ((u.magic & MAGIC_DELETE) == 0))),
            "pendingFirstMs": int(u.delivery_ms[mask].min()) if mask.any() else None,
            "pendingLastMs": int(u.delivery_ms[mask].max()) if mask.any() else None,
            "checkpoint": None if ck is None else {
                "lastReadTimeMs": ck.last_read_time_ms, "lastTimerLogFlushPos": ck.last_timer_log_flush_pos,
                "lastTimerQueueOffset": ck.last_timer_queue_offset,
                "masterTimerQueueOffset": ck.master_timer_queue_offset, "stateVersion": ck.state_version,
                "dataVersionTimestamp": ck.data_version_timestamp, "dataVersionCounter": ck.data_version_counter,
                "flushPosBehindEnd": sc.end - ck.last_timer_log_flush_pos},
            "metricsTopics": None if self.metrics is None else len(self.metrics.get("timingCount", {}) or {}),
            "pendingPerSecond": per,
            "problems": self.problems + sc.problems,
        }


def load_timer_state(root: Path, precision_ms: int | None = None, *, strict: bool = False) -> TimerState:
    """Read the timer files (``precision_ms``: ``timerPrecisionMs``, inferred when ``None``).
    ``strict``: the first problem is raised as a
    :class:`CorruptDataError` (dump); otherwise problems are collected (inspect, verify)."""
    root = Path(root)
    problems: list[str] = []
    wheel = checkpoint = metrics = None
    for name, fn in (("timerwheel", read_wheel), ("config/timercheck", read_checkpoint),
                     ("config/timermetrics", read_metrics)):
        try:
            value = fn(root)
        except MqStoreError as exc:
            if strict:
                raise
            problems.append(f"{name}: {exc.message}")
            continue
        if name == "timerwheel":
            wheel = value
        elif name == "config/timercheck":
            checkpoint = value
        else:
            metrics = value
    scan = scan_timerlog(root)
    if strict and scan.problems:
        raise CorruptDataError(scan.problems[0], path=str(root / "timerlog"))
    if precision_ms is None:
        precision_ms = infer_precision(wheel, scan)
    return TimerState(wheel, checkpoint, metrics, scan, precision_ms, problems)  # type: ignore[arg-type]


#: the precisions a broker accepts for ``timerPrecisionMs`` (1000 by default), most likely first
PRECISIONS = (1000, 500, 200, 100, 50, 20, 10, 5, 2, 1)


def infer_precision(wheel: np.ndarray | None, scan: TimerScan) -> int:
    """``timerPrecisionMs`` from the files: a slot stores its time divided by the precision, so
    the precision is the one that maps the units the live slots end at onto the slots' times
    (the default when no slot points at a unit)."""
    u = scan.units
    if wheel is None or not len(u):
        return DEFAULT_PRECISION_MS
    used = np.flatnonzero(wheel["time"] != 0)
    last = wheel["last_pos"][used].astype(np.int64)
    i = np.searchsorted(u.pos, last)
    ok = (i < len(u)) & (u.pos[np.minimum(i, len(u) - 1)] == last)
    if not ok.any():
        return DEFAULT_PRECISION_MS
    times = wheel["time"][used][ok].astype(np.int64)[:1000]
    deliver = u.delivery_ms[i[ok]][:1000]
    for p in PRECISIONS:
        if np.array_equal(deliver // p, times):
            return p
    return DEFAULT_PRECISION_MS


def _chain_depths(parent: np.ndarray, weight: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pointer jumping over a forest given by ``parent`` (node -> parent index; a root points at
    itself): the root of every node, the node count from the node to its root inclusive and
    the weights summed over the same nodes.  O(n log n) numpy work, no Python loop per node."""
    n = len(parent)
    sentinel = n
    jump = np.append(np.where(parent == np.arange(n), sentinel, parent), sentinel)
    dist = np.append(np.ones(n, np.int64), 0)
    acc = np.append(weight.astype(np.int64), 0)
    while (jump[:n] != sentinel).any():
        dist = dist + dist[jump]
        acc = acc + acc[jump]
        jump = jump[jump]
    root = parent.copy()
    while True:
        nxt = root[root]
        if np.array_equal(nxt, root):
            break
        root = nxt
    return root, dist[:n], acc[:n]


def check_chains(state: TimerState) -> list[str]:
    """The wheel's slot chains: ``firstPos``/``lastPos`` are units inside the timerlog, every unit
    of a chain belongs to the slot's time, and walking ``prevPos`` from ``lastPos`` reaches
    ``firstPos`` with ``num`` messages on the way (delete markers count -1)."""
    problems: list[str] = []
    wheel = state.wheel
    sc = state.scan
    u = sc.units
    n = len(u)
    prec = state.precision_ms
    slot_time = u.delivery_ms // prec
    # each unit's prevPos: -1, or an earlier unit of the same slot time
    idx_prev = np.searchsorted(u.pos, u.prev_pos)
    found = (idx_prev < n) & (u.pos[np.minimum(idx_prev, max(n - 1, 0))] == u.prev_pos) if n else np.zeros(0, bool)
    expired = (u.prev_pos >= 0) & (u.prev_pos < sc.min_offset)
    bad_prev = (u.prev_pos != -1) & ~expired & ~(found & (u.prev_pos < u.pos))
    same_slot = np.ones(n, bool)
    same_slot[found] = slot_time[idx_prev[found]] == slot_time[found]
    for i in np.flatnonzero(bad_prev)[:20].tolist():
        problems.append(f"timerlog: unit at {int(u.pos[i])} links to prevPos {int(u.prev_pos[i])}, "
                        "not an earlier unit of the timerlog")
    for i in np.flatnonzero(found & ~bad_prev & ~same_slot)[:20].tolist():
        problems.append(f"timerlog: unit at {int(u.pos[i])} (slot time {int(slot_time[i])}) links to "
                        f"{int(u.prev_pos[i])} of another slot time ({int(slot_time[idx_prev[i]])})")
    if wheel is None:
        return problems
    slots = np.flatnonzero((wheel["time"] != 0) & (wheel["last_pos"] != -1))
    t = wheel["time"][slots].astype(np.int64)
    first = wheel["first_pos"][slots].astype(np.int64)
    last = wheel["last_pos"][slots].astype(np.int64)
    num = wheel["num"][slots].astype(np.int64)
    wrong_index = (t % len(wheel)) != slots
    for s in slots[wrong_index][:20].tolist():
        problems.append(f"timerwheel: slot {s} holds time {int(wheel['time'][s])}, which belongs to slot "
                        f"{int(wheel['time'][s]) % len(wheel)}")
    # slots whose units were all deleted with old timerlog files are history, not a problem
    live = (last >= sc.min_offset) & ~wrong_index
    def locate(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        i = np.searchsorted(u.pos, p)
        ok = (i < n) & (u.pos[np.minimum(i, max(n - 1, 0))] == p) if n else np.zeros(len(p), bool)
        return i, ok
    li, lok = locate(last)
    fi, fok = locate(first)
    first_expired = first < sc.min_offset
    for j in np.flatnonzero(live & ~lok)[:20].tolist():
        where = "past the timerlog end" if last[j] >= sc.end else "not at a unit of the timerlog"
        problems.append(f"timerwheel: slot {int(slots[j])} (time {int(t[j])}) lastPos {int(last[j])} is {where} "
                        f"(timerlog [{sc.min_offset}, {sc.end}))")
    for j in np.flatnonzero(live & ~fok & ~first_expired)[:20].tolist():
        where = "past the timerlog end" if first[j] >= sc.end else "not at a unit of the timerlog"
        problems.append(f"timerwheel: slot {int(slots[j])} (time {int(t[j])}) firstPos {int(first[j])} is {where} "
                        f"(timerlog [{sc.min_offset}, {sc.end}))")
    good = live & lok & (fok | first_expired)
    if not n or not good.any():
        return problems
    mism = good & (slot_time[np.minimum(li, n - 1)] != t)
    for j in np.flatnonzero(mism)[:20].tolist():
        problems.append(f"timerwheel: slot {int(slots[j])} (time {int(t[j])}) lastPos {int(last[j])} is a unit "
                        f"of slot time {int(slot_time[li[j]])}")
    good &= ~mism & fok  # a chain whose start was deleted cannot be walked to its end
    # the forest of prevPos links: a root is a unit with no (valid) previous unit
    parent = np.arange(n)
    link = found & ~bad_prev & same_slot
    parent[link] = idx_prev[link]
    weight = np.where((u.magic & MAGIC_DELETE) != 0, -1, 1)
    root, depth, wsum = _chain_depths(parent, weight)
    gj = np.flatnonzero(good)
    lu, fu = li[gj], fi[gj]
    d = depth[lu] - depth[fu]
    reach = (root[lu] == root[fu]) & (d >= 0)
    # the ancestor of L at distance d must be F: walk d steps by binary lifting of the parent
    cur = lu.copy()
    rem = np.where(reach, d, 0)
    jump = parent.copy()
    while rem.any():
        odd = (rem & 1) == 1
        cur[odd] = jump[cur[odd]]
        rem >>= 1
        jump = jump[jump]
    reach &= cur == fu
    for j in gj[~reach][:20].tolist():
        problems.append(f"timerwheel: slot {int(slots[j])} (time {int(t[j])}): walking prevPos from lastPos "
                        f"{int(last[j])} does not reach firstPos {int(first[j])}")
    net = wsum[lu] - wsum[fu] + weight[fu]
    badnum = reach & (net != num[gj])
    for j, k in zip(gj[badnum][:20].tolist(), np.flatnonzero(badnum)[:20].tolist(), strict=True):
        problems.append(f"timerwheel: slot {int(slots[j])} (time {int(t[j])}) says num {int(num[j])}, its chain "
                        f"holds {int(net[k])} (messages less delete markers)")
    return problems


def check_against_commitlog(state: TimerState, starts: np.ndarray, sizes: np.ndarray, timer_starts: np.ndarray,
                            cl_min: int, cl_end: int) -> list[str]:
    """Every unit's ``offsetPy``/``sizePy`` is a record of the CommitLog (sorted ``starts`` and
    their ``sizes``), of the timer topic (``timer_starts``: the sorted starts of its records).
    Units pointing below the CommitLog's first offset refer to deleted segments (skipped)."""
    u = state.scan.units
    problems: list[str] = []
    if not len(u):
        return problems
    live = u.offset_py >= cl_min
    i = np.searchsorted(starts, u.offset_py)
    ic = np.minimum(i, max(len(starts) - 1, 0))
    is_start = (i < len(starts)) & (starts[ic] == u.offset_py) if len(starts) else np.zeros(len(u), bool)
    size_ok = is_start & (sizes[ic] == u.size_py) if len(starts) else is_start
    for k in np.flatnonzero(live & ~is_start)[:50].tolist():
        where = "past the CommitLog end" if u.offset_py[k] >= cl_end else "not a record start"
        problems.append(f"timerlog: unit at {int(u.pos[k])} points at CommitLog offset {int(u.offset_py[k])}, "
                        f"{where} (CommitLog [{cl_min}, {cl_end}))")
    for k in np.flatnonzero(live & is_start & ~size_ok)[:50].tolist():
        problems.append(f"timerlog: unit at {int(u.pos[k])} says size {int(u.size_py[k])} for the record at "
                        f"{int(u.offset_py[k])}, which is {int(sizes[ic[k]])} bytes")
    on_topic = np.isin(u.offset_py, timer_starts)
    for k in np.flatnonzero(live & size_ok & ~on_topic)[:50].tolist():
        problems.append(f"timerlog: unit at {int(u.pos[k])} points at the record at {int(u.offset_py[k])}, "
                        "which is not a message of rmq_sys_wheel_timer")
    return problems


def verify_timer(root: Path, starts: np.ndarray, sizes: np.ndarray, timer_starts: np.ndarray, cl_min: int,
                 cl_end: int, precision_ms: int | None = None, state: TimerState | None = None) -> list[str]:
    """All timer checks of ``verify`` (empty when the store has no timer files); ``state``: the
    files as :func:`load_timer_state` read them (read here when ``None``)."""
    root = Path(root)
    if not timer_files_present(root):
        return []
    if state is None:
        state = load_timer_state(root, precision_ms)
    problems = list(state.problems) + list(state.scan.problems)
    ck = state.checkpoint
    if ck is not None and state.scan.files and ck.last_timer_log_flush_pos > state.scan.end:
        problems.append(f"config/timercheck: lastTimerLogFlushPos {ck.last_timer_log_flush_pos} is past the "
                        f"timerlog end {state.scan.end} (timerlog data lost)")
    problems += check_chains(state)
    problems += check_against_commitlog(state, starts, sizes, timer_starts, cl_min, cl_end)
    return problems
