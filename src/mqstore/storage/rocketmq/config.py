"""Configuration of a RocketMQ-layout store (names follow ``MessageStoreConfig``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields

from mqstore.errors import InvalidArgumentError
from mqstore.formats.rocketmq.consumequeue import cq_file_size
from mqstore.formats.rocketmq.indexfile import check_geometry
from mqstore.formats.rocketmq.javahash import DEFAULT_DELAY_LEVELS, parse_delay_levels

FLUSH_ASYNC = "async"
#: the broker's ``storeType`` values this tool reads
STORE_TYPE_FILE = "default"
STORE_TYPE_ROCKSDB = "defaultRocksDB"
STORE_TYPES = (STORE_TYPE_FILE, STORE_TYPE_ROCKSDB)
FLUSH_SYNC = "sync"


@dataclass(slots=True)
class StoreConfig:
    """Settings of a store.  Defaults are the broker's.

    Durability promise, by ``flush_disk_type``:

    * ``"sync"`` (``SYNC_FLUSH``): ``put``/``put_batch`` return only after the CommitLog bytes of
      the message are ``msync``ed: an acknowledged message survives a machine crash.  Only flushed
      data is dispatched to the ConsumeQueues and IndexFiles.
    * ``"async"`` (``ASYNC_FLUSH``, default): ``put`` returns once the record is in the mapped file
      (the page cache): it survives a crash or ``kill -9`` of the process at once, and a machine
      crash once the flush service has run (every ``flush_interval_commit_log_ms``, at least
      ``flush_commit_log_least_pages`` pages, everything every
      ``flush_commit_log_thorough_interval_ms``) or after :meth:`MessageStore.flush` / ``close``.

    ConsumeQueues and IndexFiles are derived data: recovery rebuilds whatever a crash cut off
    from the CommitLog, so their flush intervals trade recovery time, never messages.
    """

    commit_log_file_size: int = 1024 * 1024 * 1024
    consume_queue_file_size: int = 300_000 * 20
    # ConsumeQueueExt (enableConsumeQueueExt): new ConsumeQueue units carry addresses of ext units
    # in consumequeue_ext/ (read through whenever the directory exists, whatever this says)
    enable_consume_queue_ext: bool = False
    mapped_file_size_consume_queue_ext: int = 48 * 1024 * 1024
    bit_map_length_consume_queue_ext: int = 64
    # LMQ / multi-dispatch (enableLmq, enableMultiDispatch; docs/formats/rocketmq-lmq.md): puts
    # assign queue offsets in the %LMQ% queues a message names in INNER_MULTI_DISPATCH, dispatch
    # writes its units into them as well
    enable_lmq: bool = False
    enable_multi_dispatch: bool = False
    max_lmq_consume_queue_num: int = 20_000
    # mqstore's sparse time index (not a broker setting): consumequeue_timeindex/ sidecars with the
    # store time of every time_index_interval-th ConsumeQueue unit; kept whenever the directory
    # exists.  2: an exact time lookup reads at most one CommitLog record (docs/formats/rocketmq-timeindex.md)
    enable_time_index: bool = False
    time_index_interval: int = 2
    # storePathCommitLog: None = STORE/commitlog; else one directory or a comma-separated list
    # (the broker's MultiPathMappedFileQueue: segments spread round-robin over the sorted paths)
    store_path_commit_log: str | None = None
    # readOnlyCommitLogStorePaths: comma-separated directories whose segments are read, never
    # created (new segments go to the other paths)
    read_only_commit_log_store_paths: str | None = None
    # enableDLegerCommitLog: the CommitLog is a DLedger log (<root>/dledger-<id>/data + index/,
    # docs/formats/rocketmq-dledger.md); read-only in mqstore.  None of these given: detected.
    enable_dledger_commit_log: bool = False
    # dLegerSelfId (the home directory dledger-<id>); None: the store's only DLedger home
    dledger_self_id: str | None = None
    # dLegerGroup: only DLedger 0.1 (RocketMQ 4.5) names the home <group>-<id>
    dledger_group: str | None = None
    # storePathDLedgerCommitLog: the data directory when it is not <home>/data
    store_path_dledger_commit_log: str | None = None
    # storeType: where the ConsumeQueue lives.  None = decided from the files
    # (layout.store_type_of); "default" = consumequeue/<topic>/<queueId>/ files;
    # "defaultRocksDB" = the RocksDB database in consumequeue/ (read-only, optional extra)
    store_type: str | None = None
    hash_slot_num: int = 5_000_000
    index_num: int = 5_000_000 * 4
    max_message_size: int = 4 * 1024 * 1024
    max_msgs_num_batch: int = 64
    flush_disk_type: str = FLUSH_ASYNC
    flush_interval_commit_log_ms: int = 500
    flush_commit_log_least_pages: int = 4
    flush_commit_log_thorough_interval_ms: int = 10_000
    flush_interval_consume_queue_ms: int = 1000
    flush_consume_queue_least_pages: int = 2
    flush_consume_queue_thorough_interval_ms: int = 60_000
    check_crc_on_recover: bool = True
    enabled_append_prop_crc: bool = False
    message_index_enable: bool = True
    auto_message_version_on_topic_len: bool = True
    message_delay_level: str = DEFAULT_DELAY_LEVELS
    file_reserved_time_hours: float = 72
    delete_when: str = "04"
    clean_resource_interval_ms: int = 10_000
    delete_file_batch_max: int = 10
    store_host: str = "127.0.0.1:10911"
    broker_name: str = "broker-a"
    background_services: bool = True  # reput thread, flush services, cleaner
    # False: this store only appends to the CommitLog; an external dispatcher (``mqstore spark
    # dispatch``) owns consumequeue/, index/ and the checkpoint's logics/index timestamps.
    dispatch_enabled: bool = True
    clock: Callable[[], int] | None = field(default=None, repr=False)  # ms since epoch; default: wall clock

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        if self.flush_disk_type not in (FLUSH_ASYNC, FLUSH_SYNC):
            raise InvalidArgumentError(f"flush_disk_type must be 'async' or 'sync', not {self.flush_disk_type!r}")
        if self.commit_log_file_size < 4096:
            raise InvalidArgumentError(f"commit_log_file_size must be at least 4096 bytes, not {self.commit_log_file_size}")
        if self.consume_queue_file_size < 20:
            raise InvalidArgumentError(f"consume_queue_file_size must be at least 20 bytes, not {self.consume_queue_file_size}")
        check_geometry(self.hash_slot_num, self.index_num)
        if self.mapped_file_size_consume_queue_ext < 24:
            raise InvalidArgumentError("mapped_file_size_consume_queue_ext must be at least 24 bytes, "
                                       f"not {self.mapped_file_size_consume_queue_ext}")
        from mqstore.formats.rocketmq.timeindex import check_interval

        check_interval(self.time_index_interval)
        for name in ("store_path_commit_log", "read_only_commit_log_store_paths", "store_path_dledger_commit_log"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentError(f"{name} must be a directory or a comma-separated list of directories")
        if self.max_lmq_consume_queue_num < 0:
            raise InvalidArgumentError("max_lmq_consume_queue_num must not be negative")
        for name in ("dledger_self_id", "dledger_group"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9_.%|-]+", value)
                                      or value in (".", "..")):
                raise InvalidArgumentError(f"{name} must be a plain name (letters, digits, '_', '-', '.'), not {value!r}")
        if not isinstance(self.enable_dledger_commit_log, bool):
            raise InvalidArgumentError("enable_dledger_commit_log must be true or false")
        if self.store_type not in (None, *STORE_TYPES):
            raise InvalidArgumentError(f"store_type must be one of {', '.join(STORE_TYPES)}, not {self.store_type!r}")
        if self.max_message_size <= 0:
            raise InvalidArgumentError("max_message_size must be positive")
        try:
            parse_delay_levels(self.message_delay_level)
        except (ValueError, KeyError, IndexError) as exc:
            raise InvalidArgumentError(f"invalid message_delay_level {self.message_delay_level!r}") from exc
        if not re.fullmatch(r"\d{1,2}(;\d{1,2})*", self.delete_when):
            raise InvalidArgumentError(f"delete_when must be hours like '04' or '04;16', not {self.delete_when!r}")

    @property
    def mapped_file_size_consume_queue(self) -> int:
        """The getter rounds up to a multiple of 20 (spec §2.1)."""
        return cq_file_size(self.consume_queue_file_size)

    @property
    def delay_table(self) -> dict[int, int]:
        return parse_delay_levels(self.message_delay_level)

    def now(self) -> int:
        if self.clock is not None:
            return int(self.clock())
        import time

        return time.time_ns() // 1_000_000

    @classmethod
    def from_dict(cls, values: dict[str, object]) -> StoreConfig:
        known = {f.name for f in fields(cls)}
        unknown = set(values) - known
        if unknown:
            raise InvalidArgumentError(f"unknown store settings: {', '.join(sorted(unknown))}")
        return cls(**values)  # type: ignore[arg-type]


MULTI_PATH_SPLITTER = ","


def split_paths(value: str | None) -> list[str]:
    """The directories of a ``storePathCommitLog``-style setting (comma-separated, trimmed,
    empty entries dropped, order and spelling kept)."""
    if not value:
        return []
    return [p.strip() for p in value.strip().split(MULTI_PATH_SPLITTER) if p.strip()]


TOPIC_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
MAX_TOPIC_LENGTH = 32767


def validate_topic(topic: object) -> str:
    """RocketMQ's topic rule; it also guarantees a topic can never name a path outside the store."""
    if not isinstance(topic, str):
        raise InvalidArgumentError(f"topic must be a string, not {type(topic).__name__}")
    from mqstore.errors import InvalidTopicError

    if not topic:
        raise InvalidTopicError("topic must not be empty")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(f"topic is {len(topic)} characters long (at most {MAX_TOPIC_LENGTH})")
    if not TOPIC_PATTERN.match(topic):
        raise InvalidTopicError(f"invalid topic {topic!r}: only letters, digits, '%', '|', '_' and '-' are allowed")
    return topic
