"""The layout of a RocketMQ store directory: the one home of its file naming, segment listing and
geometry detection, used by the store, the CLI, the rebuilds and the Spark layer.

::

    <root>/commitlog/<20-digit offset>                  CommitLog segments (all one size)
    <root>/consumequeue/<topic>/<queueId>/<20-digit offset>  ConsumeQueue files (all one size)
    <root>/consumequeue_ext/<topic>/<queueId>/<20-digit offset>  ConsumeQueueExt files (all one size)
    <root>/index/<yyyyMMddHHmmssSSS>                    IndexFiles (all one geometry)
    <root>/consumequeue_timeindex/<topic>/<queueId>/<20-digit offset>.timeindex  mqstore's sparse
                                                        time index (storage/rocketmq/timeindex.py)
    <root>/checkpoint, <root>/abort, <root>/lock

The CommitLog may live elsewhere (``storePathCommitLog``: one directory or a comma-separated
list, plus ``readOnlyCommitLogStorePaths``): :func:`commit_log_dirs` says where.  A broker with
``enableDLegerCommitLog`` keeps it as a DLedger log instead (``<root>/dledger-<selfId>/data`` and
``index/``; DLedger 0.1: ``<group>-<selfId>``): :func:`dledger_home` says where, and
:func:`detect_dledger` tells such a store from its files (docs/formats/rocketmq-dledger.md).

Geometry is detected from headers first, then from file sizes: an IndexFile's geometry from the
item count of a full file (every file but the newest), else the broker defaults when the size
fits, else the first common slots:items ratio the size and every header allow.  Configuration
rule (:func:`resolve_config`): a value the caller gives explicitly wins (a file that does not
match it is a :class:`~mqstore.errors.GeometryMismatchError` when it is opened); a value not
given is detected from the files, and the broker default is used only when there are none.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mqstore.errors import (
    GeometryMismatchError,
    InvalidArgumentError,
    PathOutsideStoreError,
    StoreNotFoundError,
)
from mqstore.formats.rocketmq.indexfile import (
    DEFAULT_HASH_SLOT_NUM,
    DEFAULT_INDEX_NUM,
    HASH_SLOT_SIZE,
    INDEX_HEADER_SIZE,
    INDEX_ITEM_SIZE,
    IndexHeader,
    index_file_size,
)
from mqstore.storage.fileio import FileIO
from mqstore.storage.layout import is_offset_name, offset_files, offset_name, topic_queue_dirs
from mqstore.storage.mapped import ensure_inside
from mqstore.storage.rocketmq.config import (
    STORE_TYPE_FILE,
    STORE_TYPE_ROCKSDB,
    StoreConfig,
    split_paths,
)

COMMITLOG_DIR = "commitlog"
CONSUMEQUEUE_DIR = "consumequeue"
CONSUMEQUEUE_EXT_DIR = "consumequeue_ext"
INDEX_DIR = "index"
CHECKPOINT_FILE = "checkpoint"
ABORT_FILE = "abort"
LOCK_FILE = "lock"
INDEX_NAME_DIGITS = 17
#: slots:items ratios tried, in this order, when no full IndexFile tells the item count
INDEX_RATIOS = (4, 10, 1, 2, 5, 8, 16, 20)

segment_name = offset_name


# =============================================================================== names
def index_file_name(timestamp_ms: int) -> str:
    """``yyyyMMddHHmmssSSS`` of ``timestamp_ms`` in UTC (17 digits)."""
    t = _dt.datetime.fromtimestamp(timestamp_ms / 1000.0, tz=_dt.UTC)
    return t.strftime("%Y%m%d%H%M%S") + f"{timestamp_ms % 1000:03d}"


def index_file_name_to_ms(name: str) -> int:
    """Inverse of :func:`index_file_name`."""
    try:
        t = _dt.datetime.strptime(name[:14], "%Y%m%d%H%M%S").replace(tzinfo=_dt.UTC)
        return int(t.timestamp()) * 1000 + int(name[14:17])
    except ValueError as exc:
        raise InvalidArgumentError(f"not an IndexFile name (yyyyMMddHHmmssSSS): {name!r}") from exc


def is_index_name(name: str) -> bool:
    return len(name) == INDEX_NAME_DIGITS and is_offset_name(name)


def next_index_file_name(directory: str | os.PathLike[str] | None, prev_name: str | None, first_timestamp: int) -> str:
    """Name of a new IndexFile whose first key has ``first_timestamp``: its UTC
    ``yyyyMMddHHmmssSSS``, or 1 ms after the previous file's name when that is not greater; then
    1 ms later again while a file of that name exists in ``directory`` (when given)."""
    name = index_file_name(max(first_timestamp, 0))
    if prev_name is not None and is_index_name(prev_name) and name <= prev_name:
        name = index_file_name(index_file_name_to_ms(prev_name) + 1)
    if directory is not None:
        d = Path(directory)
        while (d / name).exists():
            name = index_file_name(index_file_name_to_ms(name) + 1)
    return name


def index_tmp_name(name: str) -> str:
    """The temporary name an IndexFile is sized under before it is renamed into place."""
    return f".{name}.tmp"


def is_index_tmp_name(name: str) -> bool:
    return name.startswith(".") and name.endswith(".tmp")


# =============================================================================== listing
def commitlog_dir(root: str | os.PathLike[str]) -> Path:
    return Path(root) / COMMITLOG_DIR


def commit_log_dirs(root: str | os.PathLike[str], store_path_commit_log: str | None = None,
                    read_only_paths: str | None = None) -> tuple[list[str], list[str]]:
    """The CommitLog directories of a store: ``(paths, read-only paths)``.  Without a
    ``storePathCommitLog`` setting it is ``root/commitlog``, which must lie inside the store
    (a symlink out of it is refused: name the real directory with ``--commitlog``)."""
    paths = split_paths(store_path_commit_log)
    ro = split_paths(read_only_paths)
    if not paths:
        root = Path(root)
        try:
            paths = [str(ensure_inside(root, commitlog_dir(root)))]
        except PathOutsideStoreError as exc:
            raise PathOutsideStoreError(
                f"{commitlog_dir(root)} leads outside the store directory {root}; give the CommitLog "
                "directory explicitly (--commitlog DIR, StoreConfig.store_path_commit_log)") from exc
    return paths, ro


def _segment_files_of(root: str | os.PathLike[str], dirs: Sequence[str | os.PathLike[str]] | None) -> list[Path]:
    """The segment files of the CommitLog directories ``dirs`` (default ``root/commitlog``), by
    offset; a name in two directories is an error (the broker would map it twice)."""
    if dirs is None:
        return segment_files(commitlog_dir(root))
    by_off: dict[int, Path] = {}
    for d in dict.fromkeys(str(x) for x in dirs):
        for p in segment_files(d):
            off = int(p.name)
            if off in by_off and by_off[off].resolve() != p.resolve():
                raise GeometryMismatchError(f"segment {p.name} is in two CommitLog directories: {by_off[off]} and {p}",
                                            path=str(p))
            by_off.setdefault(off, p)
    return [by_off[k] for k in sorted(by_off)]


def consumequeue_ext_dir(root: str | os.PathLike[str]) -> Path:
    return Path(root) / CONSUMEQUEUE_EXT_DIR


def index_dir(root: str | os.PathLike[str]) -> Path:
    return Path(root) / INDEX_DIR


def consumequeue_dir(root: str | os.PathLike[str]) -> Path:
    return Path(root) / CONSUMEQUEUE_DIR


def segment_files(directory: str | os.PathLike[str]) -> list[Path]:
    """The segment files (20-digit offset names) of a CommitLog or ConsumeQueue directory, in
    offset order; sub-directories and other names are skipped, as the broker does."""
    return offset_files(directory)


def index_files(root: str | os.PathLike[str]) -> list[Path]:
    """The IndexFiles of a store (numeric names), oldest first."""
    d = index_dir(root)
    if not d.is_dir():
        return []
    return sorted((p for p in d.iterdir() if is_offset_name(p.name) and p.is_file()), key=lambda p: p.name)


def consume_queue_dirs(root: str | os.PathLike[str]) -> list[tuple[str, int, Path]]:
    """``(topic, queueId, directory)`` of every ConsumeQueue of a store, sorted (see
    :func:`topic_queue_dirs`)."""
    return topic_queue_dirs(consumequeue_dir(root))


#: the file every RocksDB database directory has (names the current MANIFEST)
#: the timer's files (5.x timer wheel), relative to the store root
TIMER_FILES = ("timerwheel", "timerlog", "config/timercheck", "config/timermetrics")


def timer_files_present(root: str | os.PathLike[str]) -> bool:
    """Whether the store has any timer file (readers import the timer module only then)."""
    return any((Path(root) / name).exists() for name in TIMER_FILES)


ROCKSDB_MARKER = "CURRENT"


def is_rocksdb_dir(directory: str | os.PathLike[str]) -> bool:
    """Whether ``directory`` holds a RocksDB database (its ``CURRENT`` file)."""
    return (Path(directory) / ROCKSDB_MARKER).is_file()


def store_type_of(root: str | os.PathLike[str], config: StoreConfig | None = None) -> str:
    """Where the ConsumeQueue of a store lives: the one rule every reader uses.  The configured
    ``store_type`` (the broker's ``storeType``) wins; otherwise a RocksDB database in
    ``consumequeue/`` (RocketMQ >= 5.2, ``storeType=defaultRocksDB``) makes it
    ``defaultRocksDB``, unless ``consumequeue/`` also holds classic queue directories (a store
    migrated back to files keeps its old database beside them; a combined store writes both):
    then the files are read, as by a broker with ``storeType=default``."""
    explicit = getattr(config, "store_type", None)
    if explicit:
        return str(explicit)
    if not is_rocksdb_dir(consumequeue_dir(root)):
        return STORE_TYPE_FILE
    return STORE_TYPE_FILE if consume_queue_dirs(root) else STORE_TYPE_ROCKSDB


@dataclass(frozen=True, slots=True)
class SegmentFile:
    """One CommitLog segment file: its path, the global offset of its first byte, its size."""

    path: str
    base: int
    size: int

    @property
    def end(self) -> int:
        return self.base + self.size


def _sizes(paths: Sequence[Path]) -> list[tuple[Path, int]]:
    out = []
    for p in paths:
        try:
            out.append((p, p.stat().st_size))
        except FileNotFoundError:  # deleted by retention meanwhile
            continue
    return out


def commitlog_segments(root: str | os.PathLike[str], *, size: int | None = None,
                       dirs: Sequence[str | os.PathLike[str]] | None = None) -> list[SegmentFile]:
    """The CommitLog segments of a store, ascending, an empty newest file left out (a segment
    being created).  With ``size``, only files of exactly that size are listed (a tailing reader
    skips a file another process is still sizing); without, the files must agree in size
    (:class:`GeometryMismatchError` naming the odd one).  ``dirs``: the CommitLog directories
    when they are not ``root/commitlog`` (:func:`commit_log_dirs`)."""
    segs = [SegmentFile(str(p), int(p.name), n) for p, n in _sizes(_segment_files_of(root, dirs))]
    return _checked_segments(segs, size)


def _checked_segments(segs: list[SegmentFile], size: int | None) -> list[SegmentFile]:
    if size is not None:
        return [s for s in segs if s.size == size]
    if segs and segs[-1].size == 0:
        segs.pop()
    odd = next((s for s in segs if s.size != segs[0].size), None)
    if odd is not None:
        raise GeometryMismatchError(f"CommitLog segments differ in size ({segs[0].size} and {odd.size} bytes)",
                                    path=odd.path)
    return segs


def commitlog_segments_io(io: FileIO, root: str) -> list[SegmentFile]:
    """:func:`commitlog_segments` of a store reached through a :class:`~mqstore.storage.fileio.FileIO`
    (an object store: ``root/commitlog/`` is a prefix listing); the store's own ``commitlog/``
    directory only (no ``storePathCommitLog``)."""
    entries = io.list(io.join(root, COMMITLOG_DIR))
    segs = sorted((SegmentFile(e.path, int(e.name), e.size) for e in entries
                   if not e.is_dir and is_offset_name(e.name)), key=lambda s: s.base)
    return _checked_segments(segs, None)


def consume_queue_topics_io(io: FileIO, root: str) -> set[str]:
    """The topics with a non-empty ConsumeQueue file in a store reached through ``io`` (the
    rule of :func:`consume_queue_dirs`: ``consumequeue/<topic>/<queueId>/<offset>``)."""
    out = set()
    for t in io.list(io.join(root, CONSUMEQUEUE_DIR)):
        if not t.is_dir or t.name in out:
            continue
        for q in io.list(t.path):
            if q.is_dir and is_offset_name(q.name) and any(
                    not f.is_dir and f.size and is_offset_name(f.name) for f in io.list(q.path)):
                out.add(t.name)
                break
    return out


def remote_store_kind_io(io: FileIO, root: str) -> str | None:
    """What a store reached through ``io`` holds that the ranged readers do not read: ``"dledger"``
    (a DLedger CommitLog), ``"rocksdb"`` (the RocksDB ConsumeQueue), or ``None``."""
    for e in io.list(root):
        if e.is_dir and (e.name.startswith(DLEDGER_HOME_PREFIX) and len(e.name) > len(DLEDGER_HOME_PREFIX)):
            return "dledger"
    if io.stat(io.join(root, CONSUMEQUEUE_DIR, ROCKSDB_MARKER)) is not None:
        return "rocksdb"
    return None


# =============================================================================== DLedger CommitLog
# (enableDLegerCommitLog; docs/formats/rocketmq-dledger.md; read by storage/rocketmq/dledger.py)
DLEDGER_HOME_PREFIX = "dledger-"
DLEDGER_DATA_DIR = "data"
DLEDGER_INDEX_DIR = "index"
DLEDGER_CHECKPOINT_FILE = "checkpoint"
CURRTERM_FILE = "currterm"
_LEGACY_HOME = re.compile(r"^(?P<group>.+)-(?P<id>[^-]+)$")



@dataclass(frozen=True, slots=True)
class DLedgerHome:
    """The directories of one DLedger member's files."""

    home: Path
    self_id: str
    data_dirs: tuple[str, ...]
    index_dir: Path

    @property
    def checkpoint(self) -> Path:
        return self.home / DLEDGER_CHECKPOINT_FILE

    @property
    def currterm(self) -> Path:
        return self.home / CURRTERM_FILE


def _looks_like_home(d: Path) -> bool:
    return d.is_dir() and not d.is_symlink() and ((d / DLEDGER_DATA_DIR).is_dir() or (d / DLEDGER_INDEX_DIR).is_dir())


def find_dledger_homes(root: str | os.PathLike[str]) -> list[Path]:
    """The DLedger homes directly under a store root: ``dledger-<id>`` with a ``data/`` or
    ``index/`` directory, and (DLedger 0.1) ``<group>-<id>`` with both and data files."""
    r = Path(root)
    if not r.is_dir():
        return []
    out = []
    for d in sorted(r.iterdir()):
        if d.name.startswith(DLEDGER_HOME_PREFIX) and len(d.name) > len(DLEDGER_HOME_PREFIX) and _looks_like_home(d):
            out.append(d)
        elif (_LEGACY_HOME.match(d.name) and not d.name.startswith(".") and (d / DLEDGER_DATA_DIR).is_dir()
              and (d / DLEDGER_INDEX_DIR).is_dir() and not d.is_symlink() and offset_files(d / DLEDGER_DATA_DIR)):
            out.append(d)
    return out


def is_dledger_store(root: str | os.PathLike[str]) -> bool:
    """Whether the store root holds a DLedger CommitLog."""
    return bool(find_dledger_homes(root))


def dledger_home(root: str | os.PathLike[str], config: StoreConfig) -> DLedgerHome:
    """The DLedger home of a store for ``config`` (``dledger_self_id`` / ``dledger_group`` /
    ``store_path_dledger_commit_log``; the store's only home when no id is given)."""
    r = Path(root)
    sid = config.dledger_self_id
    if sid is not None:
        names = [DLEDGER_HOME_PREFIX + sid] + ([f"{config.dledger_group}-{sid}"] if config.dledger_group else [])
        found = [r / n for n in names if (r / n).is_dir()]
        if not found:
            raise StoreNotFoundError(f"{r} has no DLedger directory {' or '.join(names)}")
        home = found[0]
    else:
        homes = find_dledger_homes(r)
        if not homes:
            raise StoreNotFoundError(f"{r} has no DLedger CommitLog (a dledger-<selfId>/data directory)")
        if len(homes) > 1:
            raise InvalidArgumentError(f"{r} holds several DLedger members ({', '.join(h.name for h in homes)}): "
                                       "name one with --dledger-id ID")
        home = homes[0]
        sid = home.name[len(DLEDGER_HOME_PREFIX):] if home.name.startswith(DLEDGER_HOME_PREFIX) else home.name.rsplit("-", 1)[1]
    home = ensure_inside(r, home)
    data = split_paths(config.store_path_dledger_commit_log) or [str(home / DLEDGER_DATA_DIR)]
    for d in [*data, str(home / DLEDGER_INDEX_DIR)]:
        if Path(d).exists() and not Path(d).is_dir():
            raise StoreNotFoundError(f"{d} is not a directory (a DLedger member keeps data/ and index/ directories)",
                                     path=d)
    return DLedgerHome(home, sid, tuple(data), home / DLEDGER_INDEX_DIR)


def detect_dledger(root: str | os.PathLike[str], given: dict) -> dict:
    """The DLedger settings a store's files tell (``enable_dledger_commit_log`` and the data file
    size) when the settings ``given`` do not choose the classic CommitLog.  (Classic segments
    next to a DLedger home are those of a store migrated to DLedger: read below it.)"""
    if given.get("enable_dledger_commit_log") is False:
        return {}
    if not given.get("enable_dledger_commit_log") and not is_dledger_store(root):
        return {}
    out: dict = {"enable_dledger_commit_log": True}
    try:
        cfg = StoreConfig(enable_dledger_commit_log=True, dledger_self_id=given.get("dledger_self_id"),
                          dledger_group=given.get("dledger_group"),
                          store_path_dledger_commit_log=given.get("store_path_dledger_commit_log"))
        home = dledger_home(root, cfg)
    except (StoreNotFoundError, InvalidArgumentError):
        return out  # reported when the store is opened
    sizes = [p.stat().st_size for d in home.data_dirs for p in offset_files(d)]
    sizes = [n for n in sizes if n]
    if sizes:
        out["commit_log_file_size"] = max(set(sizes), key=lambda n: (sizes.count(n), n))
    return out


# =============================================================================== geometry
def _most_common(sizes: Sequence[int]) -> int | None:
    """The size most non-empty files have (the larger on a tie): a truncated or half-created file
    does not hide the store's geometry, and is reported when it is opened."""
    counts = Counter(n for n in sizes if n)
    return max(counts.items(), key=lambda kv: (kv[1], kv[0]))[0] if counts else None


def detect_segment_size(root: str | os.PathLike[str], dirs: Sequence[str | os.PathLike[str]] | None = None) -> int | None:
    """The CommitLog segment size of a store (``None`` without segments); ``dirs`` as in
    :func:`commitlog_segments`."""
    return _most_common([n for _, n in _sizes(_segment_files_of(root, dirs))])


def detect_ext_file_size(root: str | os.PathLike[str]) -> int | None:
    """The ConsumeQueueExt file size of a store (``None`` without ext files)."""
    base = consumequeue_ext_dir(root)
    if not base.is_dir():
        return None
    sizes = [n for tdir in sorted(base.iterdir()) if tdir.is_dir() for qdir in sorted(tdir.iterdir())
             if qdir.is_dir() for _, n in _sizes(segment_files(qdir))]
    return _most_common(sizes)


def detect_cq_file_size(root: str | os.PathLike[str]) -> int | None:
    """The ConsumeQueue file size of a store (``None`` without ConsumeQueue files)."""
    return _most_common([n for _t, _q, qdir in consume_queue_dirs(root) for _, n in _sizes(segment_files(qdir))])


def read_index_header(path: str | os.PathLike[str]) -> IndexHeader:
    with open(path, "rb") as fh:
        return IndexHeader.decode(fh.read(INDEX_HEADER_SIZE))


def detect_index_geometry(files: Sequence[str | os.PathLike[str]]) -> tuple[int, int] | None:
    """``(hash_slot_num, index_num)`` of existing IndexFiles (oldest first), headers first: a file
    followed by a newer one was full, its item count is ``index_num``; else the broker defaults
    when the size fits; else the first ratio of :data:`INDEX_RATIOS` that the size and every
    header allow (``None`` when nothing fits).  Files of another size than most are left out."""
    all_sized = _sizes([Path(f) for f in files])
    size = _most_common([n for _, n in all_sized])
    if size is None or size < INDEX_HEADER_SIZE:
        return None
    sized = [(p, n) for p, n in all_sized if n == size]
    headers = [read_index_header(p) for p, _ in sized]
    for h in headers[:-1]:
        items = h.index_count
        rest = size - INDEX_HEADER_SIZE - INDEX_ITEM_SIZE * items
        if items > 1 and rest > 0 and rest % HASH_SLOT_SIZE == 0:
            slots = rest // HASH_SLOT_SIZE
            if all(g.hash_slot_count <= slots and g.index_count <= items for g in headers):
                return slots, items
    if size == index_file_size(DEFAULT_HASH_SLOT_NUM, DEFAULT_INDEX_NUM):
        return DEFAULT_HASH_SLOT_NUM, DEFAULT_INDEX_NUM
    for ratio in INDEX_RATIOS:
        slots, r = divmod(size - INDEX_HEADER_SIZE, HASH_SLOT_SIZE + INDEX_ITEM_SIZE * ratio)
        if r == 0 and slots > 0 and all(h.index_count <= slots * ratio and h.hash_slot_count <= slots for h in headers):
            return slots, slots * ratio
    return None


def detect_geometry(root: str | os.PathLike[str], store_path_commit_log: str | None = None,
                    read_only_paths: str | None = None) -> dict[str, Any]:
    """The geometry settings the files of a store tell (only those they tell), named as in
    :class:`StoreConfig`; ext files switch ``enable_consume_queue_ext`` on."""
    out: dict[str, Any] = {}
    if store_path_commit_log or read_only_paths:
        paths, ro = commit_log_dirs(root, store_path_commit_log, read_only_paths)
        seg = detect_segment_size(root, paths + ro)
    else:
        seg = detect_segment_size(root)
    if seg is not None:
        out["commit_log_file_size"] = seg
    ext = detect_ext_file_size(root)
    if ext is not None:
        out["enable_consume_queue_ext"] = True
        out["mapped_file_size_consume_queue_ext"] = ext
    cq = detect_cq_file_size(root)
    if cq is not None:
        out["consume_queue_file_size"] = cq
    ix = detect_index_geometry(index_files(root))
    if ix is not None:
        out["hash_slot_num"], out["index_num"] = ix
    interval = detect_time_index_interval(root)
    if interval is not None:
        out["enable_time_index"] = True
        out["time_index_interval"] = interval
    return out


def detect_time_index_interval(root: str | os.PathLike[str]) -> int | None:
    """The interval of the newest readable time index sidecar (``None`` without sidecars)."""
    from mqstore.errors import MqStoreError
    from mqstore.formats.rocketmq.timeindex import HEADER_SIZE, TimeIndexHeader
    from mqstore.storage.rocketmq.timeindex import all_sidecars

    for _t, _q, p in reversed(all_sidecars(root)):
        try:
            with open(p, "rb") as fh:
                return TimeIndexHeader.decode(fh.read(HEADER_SIZE)).interval
        except (MqStoreError, OSError):
            continue
    return None


def resolve_config(root: str | os.PathLike[str], config: StoreConfig | Mapping[str, Any] | None = None,
                   **settings: Any) -> StoreConfig:
    """The configuration to open ``root`` with.  A :class:`StoreConfig` is explicit and returned
    as given.  Otherwise the settings of ``config`` (a mapping) and ``settings`` win, and the
    geometry not given is detected from the files (the IndexFile slots and items as a pair, only
    when neither is given); a setting given as ``None`` counts as not given."""
    if isinstance(config, StoreConfig):
        return config
    given = {k: v for k, v in {**dict(config or {}), **settings}.items() if v is not None}
    detected = detect_geometry(root, given.get("store_path_commit_log"),
                               given.get("read_only_commit_log_store_paths")) if Path(root).is_dir() else {}
    if Path(root).is_dir():  # a DLedger CommitLog (enableDLegerCommitLog): its data files tell the segment size
        detected.update(detect_dledger(root, given))
    if "hash_slot_num" in given or "index_num" in given:
        detected.pop("hash_slot_num", None)
        detected.pop("index_num", None)
    if Path(root).is_dir() and has_lmq(root):
        detected["enable_lmq"] = detected["enable_multi_dispatch"] = True
    return StoreConfig.from_dict({**detected, **given})


def has_lmq(root: str | os.PathLike[str]) -> bool:
    """Whether a store shows the broker ran with LMQ (``enableLmq`` + ``enableMultiDispatch``): it
    has an LMQ ConsumeQueue (``consumequeue/%LMQ%...``) or ``config/lmqConsumerOffset.json``."""
    base = consumequeue_dir(root)
    if (Path(root) / "config" / "lmqConsumerOffset.json").is_file():
        return True
    try:
        return base.is_dir() and any(p.name.startswith("%LMQ%") and p.is_dir() for p in base.iterdir())
    except OSError:
        return False
