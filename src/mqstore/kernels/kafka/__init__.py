"""Compiled kernels of the Kafka layout, one concern per module.

* :mod:`.batches` – the batch-header walk into columns and the batch checksums;
* :mod:`.file_scan` – the same walk with checksums as one ``pread`` pass over a file descriptor
  (the file handling is :mod:`mqstore.storage.kafka.file_scan`);
* :mod:`.index_build` – the index entries of recovery (spec §4.5);
* :mod:`.index_search` – ``.index``/``.timeindex`` searches (spec §3.7);
* :mod:`.records` – records as columns (the generic decoder and the Spark source's body parser).
"""
