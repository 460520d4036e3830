"""RocketMQ 5.x timer-message files (docs/formats/rocketmq-timer.md): the ``timerwheel`` slots,
the ``timerlog`` units and the ``config/timercheck`` checkpoint.  Pure bytes in / out.

All integers are big-endian and signed (Java).  Positions in the wheel and in ``prevPos`` are
global timerlog offsets (file base offset + position in the file); ``-1`` means "none".
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import numpy as np

from mqstore.errors import CorruptDataError, TruncatedRecordError

#: the system topic timer messages are written to before they are due
TIMER_TOPIC = "rmq_sys_wheel_timer"
#: message properties of a timer message (MessageConst)
PROPERTY_REAL_TOPIC = "REAL_TOPIC"
PROPERTY_REAL_QUEUE_ID = "REAL_QID"
PROPERTY_TIMER_OUT_MS = "TIMER_OUT_MS"
PROPERTY_TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
PROPERTY_TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
PROPERTY_TIMER_DELAY_MS = "TIMER_DELAY_MS"
PROPERTY_TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
PROPERTY_TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
PROPERTY_TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
PROPERTY_TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"

#: days covered by one turn of the wheel; the wheel holds twice that many slots
TIMER_WHEEL_TTL_DAY = 7
DAY_SECS = 86_400
DEFAULT_SLOTS_TOTAL = TIMER_WHEEL_TTL_DAY * DAY_SECS
#: slots in the ``timerwheel`` file (2 x slotsTotal, whatever the precision)
DEFAULT_WHEEL_SLOTS = 2 * DEFAULT_SLOTS_TOTAL
DEFAULT_PRECISION_MS = 1000
DEFAULT_TIMERLOG_FILE_SIZE = 100 * 1024 * 1024

SLOT_SIZE = 32
UNIT_SIZE = 52
#: a blank unit (end of a timerlog file) is ``int size, long 0, int BLANK_MAGIC`` = 16 bytes
MIN_BLANK_LEN = 16
#: ``0xBBCCDDEE ^ (1880681586 + 8)`` as a signed int
BLANK_MAGIC = struct.unpack(">i", struct.pack(">I", 0xBBCCDDEE ^ (1880681586 + 8)))[0]
MAGIC_DEFAULT = 1
MAGIC_ROLL = 2
MAGIC_DELETE = 4

#: the checkpoint's meaningful bytes (the broker maps a whole 4096-byte page)
TIMER_CHECKPOINT_SIZE = 56
TIMER_CHECKPOINT_OLD_SIZE = 32
TIMER_CHECKPOINT_FILE_SIZE = 4096

_SLOT = struct.Struct(">qqqii")
_UNIT = struct.Struct(">iqiqiqiiq")
_BLANK = struct.Struct(">iqi")
_CKPT = struct.Struct(">qqqqqqq")
assert _SLOT.size == SLOT_SIZE and _UNIT.size == UNIT_SIZE and _BLANK.size == MIN_BLANK_LEN
assert _CKPT.size == TIMER_CHECKPOINT_SIZE

#: numpy record dtypes for zero-copy views of whole files
SLOT_DTYPE = np.dtype([("time", ">i8"), ("first_pos", ">i8"), ("last_pos", ">i8"), ("num", ">i4"), ("magic", ">i4")])
UNIT_DTYPE = np.dtype([("size", ">i4"), ("prev_pos", ">i8"), ("magic", ">i4"), ("write_time", ">i8"),
                       ("delay", ">i4"), ("offset_py", ">i8"), ("size_py", ">i4"), ("topic_hash", ">i4"),
                       ("reserved", ">i8")])
assert SLOT_DTYPE.itemsize == SLOT_SIZE and UNIT_DTYPE.itemsize == UNIT_SIZE


def is_magic_ok(magic: int) -> bool:
    """A unit's magic is valid when it has no bit above the low four."""
    return (magic | 0xF) == 0xF


def slot_index(time_ms: int, precision_ms: int = DEFAULT_PRECISION_MS, wheel_slots: int = DEFAULT_WHEEL_SLOTS) -> int:
    """The slot of a delivery time: ``time_ms // precision_ms`` modulo the wheel's slot count."""
    if precision_ms <= 0 or wheel_slots <= 0:
        raise ValueError("precision and slot count must be positive")
    return (time_ms // precision_ms) % wheel_slots


@dataclass(frozen=True, slots=True)
class WheelSlot:
    """One 32-byte slot.  ``time`` is the slot's time divided by the precision (seconds at the
    default 1000 ms); an untouched slot is all zeros; ``-1`` positions: no unit."""

    time: int
    first_pos: int
    last_pos: int
    num: int = 0
    magic: int = 0

    def encode(self) -> bytes:
        return _SLOT.pack(self.time, self.first_pos, self.last_pos, self.num, self.magic)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, pos: int = 0) -> WheelSlot:
        if len(data) - pos < SLOT_SIZE:
            raise TruncatedRecordError(f"timer wheel slot needs {SLOT_SIZE} bytes, {max(len(data) - pos, 0)} left",
                                       offset=pos)
        return cls(*_SLOT.unpack_from(data, pos))


@dataclass(frozen=True, slots=True)
class TimerLogUnit:
    """One 52-byte timerlog unit: a timer message put on the wheel (or a delete marker)."""

    prev_pos: int
    magic: int
    write_time: int
    delay: int
    offset_py: int
    size_py: int
    topic_hash: int
    reserved: int = 0
    size: int = UNIT_SIZE

    @property
    def delivery_ms(self) -> int:
        """The wheel time of the unit: write time + delay (ms)."""
        return self.write_time + self.delay

    @property
    def is_roll(self) -> bool:
        return bool(self.magic & MAGIC_ROLL)

    @property
    def is_delete(self) -> bool:
        return bool(self.magic & MAGIC_DELETE)

    def encode(self) -> bytes:
        return _UNIT.pack(self.size, self.prev_pos, self.magic, self.write_time, self.delay, self.offset_py,
                          self.size_py, self.topic_hash, self.reserved)

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, pos: int = 0) -> TimerLogUnit:
        if len(data) - pos < UNIT_SIZE:
            raise TruncatedRecordError(f"timerlog unit needs {UNIT_SIZE} bytes, {max(len(data) - pos, 0)} left",
                                       offset=pos)
        size, prev, magic, wt, delay, opy, spy, th, res = _UNIT.unpack_from(data, pos)
        if size != UNIT_SIZE or not is_magic_ok(magic):
            raise CorruptDataError(f"timerlog unit has size {size} magic {magic:#x} (expected size {UNIT_SIZE} "
                                   "and a magic within 0xF)", offset=pos)
        return cls(prev, magic, wt, delay, opy, spy, th, res, size)


def encode_blank(remaining: int) -> bytes:
    """The 16-byte blank that ends a timerlog file: ``remaining`` is the file's free byte count."""
    return _BLANK.pack(remaining, 0, BLANK_MAGIC)


@dataclass(frozen=True, slots=True)
class TimerCheckpoint:
    """``config/timercheck``: seven longs (the last three, the data version, since 5.1)."""

    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    state_version: int = 0
    data_version_timestamp: int = 0
    data_version_counter: int = 0

    def encode(self, *, file_size: int = TIMER_CHECKPOINT_FILE_SIZE) -> bytes:
        return _CKPT.pack(self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
                          self.master_timer_queue_offset, self.state_version, self.data_version_timestamp,
                          self.data_version_counter).ljust(file_size, b"\0")

    @classmethod
    def decode(cls, data: bytes | bytearray | memoryview, path: str | None = None) -> TimerCheckpoint:
        """Decode and check plausibility: every field is a non-negative long (a garbage file
        almost surely has a negative one)."""
        n = len(data)
        if n >= TIMER_CHECKPOINT_SIZE:
            values = _CKPT.unpack_from(data, 0)
        elif n >= TIMER_CHECKPOINT_OLD_SIZE:
            values = (*struct.unpack_from(">qqqq", data, 0), 0, 0, 0)
        else:
            raise CorruptDataError(f"timer checkpoint is {n} bytes, expected {TIMER_CHECKPOINT_FILE_SIZE}", path=path)
        names = cls.__dataclass_fields__
        for name, v in zip(names, values, strict=True):
            if v < 0:
                raise CorruptDataError(f"timer checkpoint field {name} is {v} (negative: not a timer checkpoint)",
                                       path=path)
        return cls(*values)
