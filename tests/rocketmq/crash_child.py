"""Child process of the crash tests: appends messages and reports each acknowledged one.

Usage: python crash_child.py STORE FLUSH_TYPE START_INDEX
Prints ``ack <index> <commitLogOffset>`` after each ``put`` returned (flushed to the pipe), until
killed.
"""

from __future__ import annotations

import sys

from mqstore import MessageStore, StoreConfig


def body_of(i: int) -> bytes:
    return (f"message-{i}-".encode() * (1 + i % 9))[: 20 + (i * 37) % 400]


def main() -> None:
    store, flush_type, start = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cfg = StoreConfig(commit_log_file_size=16384, consume_queue_file_size=400, hash_slot_num=64, index_num=40,
                      flush_disk_type=flush_type, flush_interval_commit_log_ms=5, flush_interval_consume_queue_ms=5)
    s = MessageStore.open(store, cfg)
    out = sys.stdout
    i = start
    while True:
        if i % 5 == 4:
            rs = s.put_batch([dict(topic=f"T{j % 3}", body=body_of(j), queue_id=j % 2, keys=[f"key-{j}", "shared"])
                              for j in range(i, i + 3)])
            for j, r in enumerate(rs):
                out.write(f"ack {i + j} {r.commit_log_offset}\n")
            i += 3
        elif i % 5 in (1, 3):  # string keys and tags: the one-call native path (append_common)
            r = s.put(f"T{i % 3}", body_of(i), queue_id=i % 2, keys=f"key-{i} shared", tags="TagA")
            out.write(f"ack {i} {r.commit_log_offset}\n")
            i += 1
        else:
            r = s.put(f"T{i % 3}", body_of(i), queue_id=i % 2, keys=[f"key-{i}", "shared"])
            out.write(f"ack {i} {r.commit_log_offset}\n")
            i += 1
        out.flush()


if __name__ == "__main__":
    main()
