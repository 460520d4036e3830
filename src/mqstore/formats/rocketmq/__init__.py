"""Pure codecs of the RocketMQ store files (bytes in, bytes out, no I/O).

* :mod:`.javahash`     – Java ``String.hashCode``, the index key hash, tagsCode;
* :mod:`.properties`   – the properties string (parse, encode in Java ``HashMap`` order);
* :mod:`.record`       – CommitLog message records (magic v1/v2), blank records, property CRC;
* :mod:`.consumequeue` – 20-byte ConsumeQueue units;
* :mod:`.indexfile`    – IndexFile header, slots, items, ``put_key`` / ``select_phy_offset``;
* :mod:`.checkpoint`   – the 4096-byte StoreCheckpoint;
* :mod:`.msgid`        – offset message ids and file names;
* :mod:`.rocksdb_cq`   – keys and values of the RocksDB ConsumeQueue and RocksDB config stores (5.2+).
"""
