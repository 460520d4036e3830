"""Child process of the LMQ crash test: a writer with LMQ on (background services on) putting
messages that name 1-3 of 5 LMQ queues, reporting each acknowledged message with the LMQ queue
offsets it was given.

Usage: python lmq_crash_writer.py STORE FLUSH_TYPE START_INDEX
Prints ``ack <index> <commitLogOffset> <name>=<offset>,...`` after each ``put`` / ``put_batch``
returned (flushed to the pipe), until killed.
"""

from __future__ import annotations

import sys

from mqstore import MessageStore, StoreConfig


def lmq_writer_config(flush_type: str) -> StoreConfig:
    return StoreConfig(commit_log_file_size=65536, consume_queue_file_size=400, hash_slot_num=64, index_num=200,
                       flush_disk_type=flush_type, enable_lmq=True, enable_multi_dispatch=True)


def names_of(i: int) -> list[str]:
    return sorted({f"%LMQ%q{i % 5}", f"%LMQ%q{(i * 7) % 5}", f"%LMQ%q{(i // 3) % 5}"})


def body_of(i: int) -> bytes:
    return (f"l{i}-".encode() * 100)[: 100 + (i * 37) % 700]


def main() -> None:
    store, flush_type, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = MessageStore.open(store, lmq_writer_config(flush_type))
    out = sys.stdout
    i = start
    while True:
        n = 3 if i % 5 == 4 else 1
        msgs = [dict(topic=f"T{j % 2}", body=body_of(j), queue_id=j % 3,
                     properties={"INNER_MULTI_DISPATCH": ",".join(names_of(j))}) for j in range(i, i + n)]
        rs = s.put_batch(msgs)
        lines = []
        for j, r in zip(range(i, i + n), rs, strict=True):
            got = s.get_by_offset(r.commit_log_offset, check_crc=False).properties["INNER_MULTI_QUEUE_OFFSET"]
            pairs = ",".join(f"{q}={o}" for q, o in zip(names_of(j), got.split(","), strict=True))
            lines.append(f"ack {j} {r.commit_log_offset} {pairs}\n")
        out.write("".join(lines))
        out.flush()
        i += n


if __name__ == "__main__":
    main()
