"""Child process of the queue-offset crash tests: a writer as an application runs it (background
services on), putting into 3 topics x 4 queues and reporting each acknowledged message.

Usage: python crash_writer.py STORE FLUSH_TYPE START_INDEX
Prints ``ack <index> <topic> <queue> <queueOffset> <commitLogOffset>`` after each ``put`` /
``put_batch`` returned (flushed to the pipe), until killed.
"""

from __future__ import annotations

import sys

from mqstore import MessageStore, StoreConfig


def writer_config(flush_type: str) -> StoreConfig:
    return StoreConfig(commit_log_file_size=65536, consume_queue_file_size=400, hash_slot_num=64, index_num=200,
                       flush_disk_type=flush_type)


def body_of(i: int) -> bytes:
    return (f"w{i}-".encode() * 200)[: 200 + (i * 53) % 900]


def topic_queue(i: int) -> tuple[str, int]:
    return f"T{i % 3}", (i // 3) % 4


def main() -> None:
    store, flush_type, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = MessageStore.open(store, writer_config(flush_type))
    out = sys.stdout
    i = start
    while True:
        if i % 7 == 6:
            msgs = []
            for j in range(i, i + 4):
                t, q = topic_queue(j)
                msgs.append(dict(topic=t, body=body_of(j), queue_id=q, keys=[f"k{j}"]))
            rs = s.put_batch(msgs)
            out.write("".join(f"ack {j} {m['topic']} {m['queue_id']} {r.queue_offset} {r.commit_log_offset}\n"
                              for j, m, r in zip(range(i, i + 4), msgs, rs, strict=True)))
            i += 4
        else:
            t, q = topic_queue(i)
            r = s.put(t, body_of(i), queue_id=q, keys=[f"k{i}"])
            out.write(f"ack {i} {t} {q} {r.queue_offset} {r.commit_log_offset}\n")
            i += 1
        out.flush()


if __name__ == "__main__":
    main()
