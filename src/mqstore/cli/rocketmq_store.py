"""The RocketMQ store a command works on: the one place the CLI turns ``STORE`` plus its options
(``--commitlog``, ``--readonly-commitlog``, geometry) into a configuration and an open store.

Every ``mqstore rocketmq ...`` command, whichever module it lives in (report, get-by-msgid, the
batch-queue commands, the Spark commands), takes the CommitLog directories the same way and
resolves the rest of the geometry from the files through
:func:`mqstore.storage.rocketmq.layout.resolve_config`.
"""

from __future__ import annotations

import contextvars
import functools
from pathlib import Path
from typing import Any

import click

#: (--commitlog, --readonly-commitlog, --store-type) of the running command (set by :func:`commitlog_options`)
_COMMITLOG: contextvars.ContextVar[tuple[str | None, str | None, str | None]] = contextvars.ContextVar(
    "mqstore_rocketmq_commitlog", default=(None, None, None))
#: (--dledger/--no-dledger, --dledger-id) of the running command: the DLedger CommitLog settings
_DLEDGER: contextvars.ContextVar[tuple[bool | None, str | None]] = contextvars.ContextVar(
    "mqstore_rocketmq_dledger", default=(None, None))


def commitlog_options(f: Any) -> Any:
    """``--commitlog DIR[,DIR...]``, ``--readonly-commitlog DIR[,DIR...]`` and ``--store-type`` for
    a command: the broker's ``storePathCommitLog``, ``readOnlyCommitLogStorePaths`` and
    ``storeType``; ``--dledger/--no-dledger`` and ``--dledger-id ID``: ``enableDLegerCommitLog`` and
    ``dLegerSelfId``; all seen by every :func:`store_config` call the command makes."""

    @functools.wraps(f)
    def wrapper(*args: Any, commitlog: str | None = None, readonly_commitlog: str | None = None,
                store_type: str | None = None, dledger: bool | None = None, dledger_id: str | None = None,
                **kwargs: Any) -> Any:
        token = _COMMITLOG.set((commitlog, readonly_commitlog, store_type))
        token2 = _DLEDGER.set((dledger, dledger_id))
        try:
            return f(*args, **kwargs)
        finally:
            _DLEDGER.reset(token2)
            _COMMITLOG.reset(token)

    wrapper = click.option("--dledger-id", "dledger_id", default=None, metavar="ID",
                           help="dLegerSelfId: the DLedger member whose CommitLog to read (STORE/dledger-ID; "
                                "default: the store's only one).")(wrapper)
    wrapper = click.option("--dledger/--no-dledger", "dledger", default=None,
                           help="The CommitLog is a DLedger one (enableDLegerCommitLog: STORE/dledger-<id>/data), "
                                "or not (default: detected from the files).")(wrapper)
    wrapper = click.option("--store-type", "store_type", type=click.Choice(["default", "defaultRocksDB"]),
                           default=None,
                           help="storeType: where the ConsumeQueue lives (default: files; defaultRocksDB: the "
                                "RocksDB database in consumequeue/, read only). Default: detected from the files.")(wrapper)
    wrapper = click.option("--readonly-commitlog", "readonly_commitlog", default=None, metavar="DIR[,DIR...]",
                           help="readOnlyCommitLogStorePaths: CommitLog directories read but never written.")(wrapper)
    return click.option("--commitlog", "commitlog", default=None, metavar="DIR[,DIR...]",
                        help="storePathCommitLog: the CommitLog directory, or a comma-separated list of "
                             "directories (default: STORE/commitlog).")(wrapper)


def store_config(store: Any, commitlog_file_size: int | None = None, slots: int | None = None,
                 items: int | None = None, cq_file_size: int | None = None) -> Any:
    """The configuration of the RocketMQ store directory ``store``: the options given (geometry
    and the running command's ``--commitlog``), the rest detected from the files."""
    from mqstore.errors import StoreNotFoundError
    from mqstore.storage.rocketmq.layout import resolve_config

    p = Path(store)
    if not p.exists():
        raise StoreNotFoundError(f"store directory {p} does not exist")
    if not p.is_dir():
        raise StoreNotFoundError(f"{p} is not a directory (a RocketMQ store is one)")
    commitlog, readonly, store_type = _COMMITLOG.get()
    dledger, dledger_id = _DLEDGER.get()
    if dledger_id is not None and dledger is None:
        dledger = True
    return resolve_config(p, None, background_services=False, commit_log_file_size=commitlog_file_size,
                          hash_slot_num=slots, index_num=items, consume_queue_file_size=cq_file_size,
                          store_path_commit_log=commitlog, read_only_commit_log_store_paths=readonly,
                          store_type=store_type, enable_dledger_commit_log=dledger, dledger_self_id=dledger_id)


def open_store(store: Path, read_only: bool = True, cfg: Any = None, *, defer_valid_end: bool = False) -> Any:
    """The existing store ``store`` opened through the API (read-only unless asked).
    ``defer_valid_end``: for a command that scans the whole CommitLog anyway (``dump``), whose
    scan then finds the valid end instead of the open's own walk
    (:class:`~mqstore.storage.rocketmq.store.RocketMQStore`)."""
    from mqstore.api.rocketmq import MessageStore

    cfg = cfg if cfg is not None else store_config(store)
    if defer_valid_end and read_only:
        from mqstore.storage.rocketmq.layout import resolve_config
        from mqstore.storage.rocketmq.store import RocketMQStore

        return MessageStore(RocketMQStore(store, resolve_config(store, cfg), read_only=True, create=False,
                                          defer_valid_end=True))
    return MessageStore.open(store, cfg, read_only=read_only, create=False)
