"""Typed errors of mqstore.

Every error a user can cause (bad input, corrupt files, bad arguments, a locked store) is raised
as a subclass of :class:`MqStoreError` with a message that names what is wrong and, where there
is one, the file and the byte offset.  The CLI turns these into one error line and a non-zero
exit code; it never prints a traceback for them.
"""

from __future__ import annotations


class MqStoreError(Exception):
    """Base class of every error raised on purpose by mqstore."""

    def __init__(self, message: str, *, path: str | None = None, offset: int | None = None) -> None:
        self.path = path
        self.offset = offset
        where = []
        if path is not None:
            where.append(str(path))
        if offset is not None:
            where.append(f"offset {offset}")
        full = f"{message} ({', '.join(where)})" if where else message
        super().__init__(full)
        self.message = message


# ----------------------------------------------------------------------------- input / arguments
class InvalidArgumentError(MqStoreError, ValueError):
    """A caller passed a value that can never be valid (bad option, negative size, bad JSON)."""


class InvalidTopicError(InvalidArgumentError):
    """A topic name breaks the naming rule (it could escape the store directory, or the broker
    would reject it)."""


class InvalidKeyError(InvalidArgumentError):
    """A message key or property name/value that cannot be stored."""


class PathOutsideStoreError(InvalidArgumentError):
    """A path (or a symlink) would lead outside the store directory."""


class MessageTooLargeError(InvalidArgumentError):
    """Body, properties or the whole record exceed the configured limits."""


class PropertiesTooLargeError(MessageTooLargeError):
    """The encoded properties string is longer than 32767 bytes (RocketMQ PROPERTIES_SIZE_EXCEEDED)."""


# ----------------------------------------------------------------------------- formats / corruption
class CorruptDataError(MqStoreError):
    """Bytes on disk (or handed to a decoder) do not form a valid structure."""


class UnknownMagicError(CorruptDataError):
    """A record or batch carries a magic value we do not know."""


class TruncatedRecordError(CorruptDataError):
    """A record or batch ends before its declared length."""


class CrcMismatchError(CorruptDataError):
    """A stored checksum does not match the data it covers."""


class CorruptIndexError(CorruptDataError):
    """An index file (ConsumeQueue, IndexFile, Kafka .index/.timeindex) fails its sanity checks."""


class UnsupportedFormatError(CorruptDataError):
    """The data is recognisably of a format version or codec mqstore does not support."""


class DecompressionLimitError(CorruptDataError):
    """A compressed batch inflates past the configured limit (a decompression bomb, or a batch far
    larger than any producer writes); decoding stops at the limit."""


# ----------------------------------------------------------------------------- store state
class StoreError(MqStoreError):
    """A store-level operation cannot be carried out."""


class StoreLockedError(StoreError):
    """Another process holds the store's writer lock."""


class StoreNotFoundError(StoreError, FileNotFoundError):
    """The store directory, partition directory or file does not exist."""


class StoreClosedError(StoreError):
    """The store was closed."""


class ReadOnlyStoreError(StoreError):
    """A write was attempted on a store opened read-only."""


class GeometryMismatchError(StoreError):
    """Files on disk do not have the size the configuration says they must have."""


class OffsetOutOfRangeError(StoreError, IndexError):
    """An offset lies outside the range the store holds."""


class IndexFullError(StoreError):
    """An index file has no room for another entry (callers roll to a new file)."""


class FlushError(StoreError, OSError):
    """Data could not be made durable (fsync failed, disk full)."""


class RocksDBError(StoreError):
    """A RocksDB directory of a store (the RocksDB ConsumeQueue, the RocksDB config stores) cannot
    be read: the optional ``rocksdict`` binding is missing, the directory is not a readable RocksDB
    database, or it is not the database the broker writes there."""


class ObjectStoreError(StoreError):
    """An object store or remote file system (``s3://``, ``gs://``, ``hdfs://``) refused or failed a
    request: bad or missing credentials, access denied, an unreachable endpoint."""


class DataLossError(StoreError):
    """Requested data is no longer available (deleted by retention or truncated) and the
    caller asked to fail rather than skip it."""


# ----------------------------------------------------------------------------- kafka layer
class IndexOrderError(InvalidArgumentError):
    """An index append would break the index's ordering rule (Kafka's InvalidOffsetException for
    offsets, IllegalStateException for time-index timestamps)."""


class OffsetOverflowError(InvalidArgumentError):
    """An offset cannot be stored as an int32 relative to a segment's base offset (Kafka's
    IndexOffsetOverflowException / LogSegmentOffsetOverflowException)."""


class UnknownTopicPartitionError(InvalidArgumentError):
    """A topic or partition named by an option (subscribe, assign, offsets JSON) is not among the
    partition directories found under the given paths."""


# ----------------------------------------------------------------------------- spark rocketmq source
class SourceOptionError(InvalidArgumentError):
    """An option of a Spark data source is malformed or contradictory (bad JSON, bad number)."""


class UnknownTopicError(SourceOptionError):
    """An option names a topic, broker or queue that none of the given stores holds."""


class OffsetOptionOutOfRangeError(SourceOptionError, DataLossError):
    """A requested offset lies outside what a queue (or CommitLog) holds and ``failOnDataLoss`` is
    true."""


# ----------------------------------------------------------------------------- spark beyond local mode
class ClusterError(MqStoreError):
    """Spark's executors cannot do what the driver planned: they do not see a path the driver
    sees, or cannot run the Python worker."""


class PathNotVisibleError(ClusterError, FileNotFoundError):
    """A path the driver sees (a store, an output or checkpoint directory) is missing on an
    executor host: it is not on a filesystem every node mounts at the same path."""


class WorkerPythonError(ClusterError):
    """The Python interpreter Spark's executors should run is missing, cannot import mqstore, or
    cannot be chosen safely for the cluster (``spark.pyspark.python`` / ``PYSPARK_PYTHON``)."""
