"""Build RocketMQ 5.x stores with timer messages: the messages go into the CommitLog under
``rmq_sys_wheel_timer`` through the project's own writer; ``timerlog``/``timerwheel``/
``config/timercheck`` are then written with the format encoders following the broker's enqueue
rules (one unit per message, appended to the timerlog with a blank at a file's end; the slot of
the wheel time keeps its firstPos, takes the new unit as lastPos and counts +1, or -1 for a
delete marker; a unit's prevPos is the slot's previous lastPos, -1 for a new round)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from itertools import count
from pathlib import Path

from mqstore.api.rocketmq import MessageStore, StoreConfig
from mqstore.formats.rocketmq.javahash import java_string_hashcode
from mqstore.formats.rocketmq.timer import (
    DEFAULT_WHEEL_SLOTS,
    MAGIC_DEFAULT,
    MAGIC_DELETE,
    MIN_BLANK_LEN,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DEL_UNIQKEY,
    PROPERTY_TIMER_OUT_MS,
    SLOT_SIZE,
    TIMER_TOPIC,
    UNIT_SIZE,
    TimerCheckpoint,
    TimerLogUnit,
    WheelSlot,
    encode_blank,
    slot_index,
)

WRITE_TIME = 1_700_000_000_000


@dataclass
class TimerMsg:
    topic: str
    deliver_ms: int
    queue_id: int = 0
    delete: bool = False


def config() -> StoreConfig:
    ticks = count(WRITE_TIME - 10_000, 3)
    return StoreConfig(commit_log_file_size=64 * 1024, consume_queue_file_size=20 * 100, hash_slot_num=50,
                       index_num=200, background_services=False, clock=lambda: next(ticks))


def tree_hash(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


class TimerLogWriter:
    """Appends units like the broker's TimerLog: a unit that (with a blank after it) would not fit
    in the current file ends that file with a blank and starts the next one."""

    def __init__(self, directory: Path, file_size: int) -> None:
        self.dir = directory
        self.file_size = file_size
        self.files: dict[int, bytearray] = {}
        self.base = 0
        self.wrote = 0
        self.used: dict[int, int] = {}

    def append(self, data: bytes) -> int:
        if not self.files:
            self.files[0] = bytearray(self.file_size)
        if len(data) + MIN_BLANK_LEN > self.file_size - self.wrote:
            buf = self.files[self.base]
            buf[self.wrote:self.wrote + MIN_BLANK_LEN] = encode_blank(self.file_size - self.wrote)
            self.used[self.base] = self.wrote + MIN_BLANK_LEN
            self.base += self.file_size
            self.wrote = 0
        pos = self.base + self.wrote
        if self.base not in self.files:
            self.files[self.base] = bytearray(self.file_size)
        self.files[self.base][self.wrote:self.wrote + len(data)] = data
        self.wrote += len(data)
        return pos

    @property
    def end(self) -> int:
        return self.base + self.wrote

    def write(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        for base, buf in self.files.items():
            with open(self.dir / f"{base:020d}", "wb") as fh:  # sparse beyond the written bytes
                fh.write(bytes(buf[: self.used.get(base, self.wrote)]))
                fh.truncate(self.file_size)


def build_timer_store(root: Path, msgs: list[TimerMsg], *, timerlog_file_size: int = 100 * 1024 * 1024,
                      wheel_slots: int = DEFAULT_WHEEL_SLOTS, precision_ms: int = 1000,
                      last_read_time_ms: int = WRITE_TIME, plain: int = 2) -> dict:
    """A store with ``plain`` ordinary messages and the timer messages ``msgs``; returns what
    was written (CommitLog offsets/sizes, unit positions, slots)."""
    puts = []
    with MessageStore.open(root, config()) as s:
        for i in range(plain):
            s.put("PlainTopic", b"plain %d" % i, 0, keys=f"p{i}", tags="P")
        for i, m in enumerate(msgs):
            props = {PROPERTY_REAL_TOPIC: m.topic, PROPERTY_REAL_QUEUE_ID: str(m.queue_id),
                     PROPERTY_TIMER_OUT_MS: str(m.deliver_ms)}
            if m.delete:
                props[PROPERTY_TIMER_DEL_UNIQKEY] = f"del{i}"
            puts.append(s.put(TIMER_TOPIC, b"timer body %d" % i, 0, keys=f"t{i}", tags="T", properties=props))
    log = TimerLogWriter(root / "timerlog", timerlog_file_size)
    slots: dict[int, WheelSlot] = {}
    units = []
    for m, r in zip(msgs, puts, strict=True):
        idx = slot_index(m.deliver_ms, precision_ms, wheel_slots)
        t = m.deliver_ms // precision_ms
        cur = slots.get(idx)
        if cur is None or cur.time != t:
            cur = WheelSlot(t, -1, -1, 0, 0)
        magic = MAGIC_DEFAULT | (MAGIC_DELETE if m.delete else 0)
        unit = TimerLogUnit(cur.last_pos, magic, WRITE_TIME, m.deliver_ms - WRITE_TIME, r.commit_log_offset, r.size,
                            java_string_hashcode(m.topic))
        pos = log.append(unit.encode())
        units.append((pos, unit))
        slots[idx] = WheelSlot(t, pos if cur.first_pos == -1 else cur.first_pos, pos,
                               cur.num + (-1 if m.delete else 1), cur.magic)
    log.write()
    wheel = root / "timerwheel"
    with open(wheel, "wb") as fh:  # sparse: only the used slots are written
        fh.truncate(wheel_slots * SLOT_SIZE)
        for idx, slot in slots.items():
            fh.seek(idx * SLOT_SIZE)
            fh.write(slot.encode())
    (root / "config").mkdir(exist_ok=True)
    ck = TimerCheckpoint(last_read_time_ms=last_read_time_ms, last_timer_log_flush_pos=log.end,
                         last_timer_queue_offset=len(msgs), master_timer_queue_offset=len(msgs), state_version=0,
                         data_version_timestamp=WRITE_TIME, data_version_counter=3)
    (root / "config" / "timercheck").write_bytes(ck.encode())
    metrics = {"dataVersion": {"counter": 1, "stateVersion": 0, "timestamp": WRITE_TIME},
               "timingCount": {msgs[0].topic if msgs else "T": {"count": len(msgs), "timeStamp": WRITE_TIME}}}
    (root / "config" / "timermetrics").write_text(json.dumps(metrics))
    return {"puts": puts, "units": units, "slots": slots, "end": log.end}


def unit_count(file_size: int) -> int:
    return (file_size - MIN_BLANK_LEN) // UNIT_SIZE


def file_names(root: Path) -> list[str]:
    return sorted(os.listdir(root / "timerlog"))
