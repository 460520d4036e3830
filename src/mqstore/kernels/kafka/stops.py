"""Why a walk of Kafka batches stopped: the stop reasons of the batch scans (numpy-free, so that
the one-shot commands' native path can name them without importing numpy)."""

from __future__ import annotations

# stop reasons of scan_batches (kernels/kafka/batches.py)
STOP_END = 0  # fewer than 18 bytes left: clean end of data
STOP_TORN = 1  # the last batch is cut short (torn write): end of data, not an error
STOP_BAD_SIZE = 2  # size field < 14: Kafka's CorruptRecordException
# and of the file walk (kernels/kafka/file_scan.py)
STOP_LIMIT = 3  # the walk reached ``stop_at`` (a part boundary)
STOP_FULL = 4  # the output columns are full: call again from the returned position
STOP_READ_ERROR = -1  # pread failed or returned fewer bytes than the file held when the scan began
