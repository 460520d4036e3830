"""Child process of the time index crash test: a writer with the sparse time index on (background
services on: the reput thread writes the sidecars), putting into 2 topics x 2 queues with small
ConsumeQueue files (many file boundaries, many messages per millisecond) until killed.

Usage: python timeindex_child.py STORE START_INDEX
Prints ``ack <index>`` after each acknowledged ``put`` / ``put_batch``.
"""

from __future__ import annotations

import sys

from mqstore import MessageStore, StoreConfig


def child_config() -> StoreConfig:
    return StoreConfig(commit_log_file_size=65536, consume_queue_file_size=7 * 20, hash_slot_num=64, index_num=200,
                       enable_time_index=True)


def main() -> None:
    store, start = sys.argv[1], int(sys.argv[2])
    s = MessageStore.open(store, child_config())
    out = sys.stdout
    i = start
    while True:
        if i % 5 == 4:
            msgs = [dict(topic=f"T{j % 2}", body=b"b%d" % j, queue_id=(j // 2) % 2) for j in range(i, i + 6)]
            s.put_batch(msgs)
            out.write("".join(f"ack {j}\n" for j in range(i, i + 6)))
            i += 6
        else:
            s.put(f"T{i % 2}", b"b%d" % i, queue_id=(i // 2) % 2)
            out.write(f"ack {i}\n")
            i += 1
        out.flush()


if __name__ == "__main__":
    main()
