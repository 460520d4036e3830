"""Compiled kernels of the RocketMQ layout, one concern per module.

* :mod:`.framing` – record boundaries (TOTALSIZE + magic walk, stop states, split points);
* :mod:`.properties` – the properties text (``name\\x01value\\x02``) scanned in place;
* :mod:`.scan` – the dispatch scan: CommitLog bytes → :class:`~.scan.DispatchBatch` columns;
* :mod:`.columns` – the reader: every field of records as named columns (and as Arrow arrays);
* :mod:`.index_build` – IndexFile bulk put (sequential and on several threads);
* :mod:`.chain_walk` – IndexFile queries: one chain-walk core under the single, batch and
  multi-file walks;
* :mod:`.put` – the batch record encoder of the put path.
"""
