"""Timer messages (RocketMQ 5.x ``timerwheel``/``timerlog``/``config/timercheck``) for
``mqstore rocketmq inspect`` and ``mqstore rocketmq dump --timer``."""

from __future__ import annotations

from pathlib import Path

import click

from mqstore.cli.common import print_table

#: rows of the per-second table shown as text (JSON has them all)
TEXT_SECONDS = 30


def timer_info(store: Path) -> dict | None:
    """The ``timer`` section of ``inspect`` (``None`` when the store has no timer files).
    Problems in the files are listed in it, never raised."""
    from mqstore.storage.rocketmq.timer import load_timer_state, timer_files_present

    if not timer_files_present(store):
        return None
    return load_timer_state(store).summary()


def print_timer_info(t: dict) -> None:
    slots = "absent" if t["wheelSlots"] is None else f"{t['wheelSlotsUsed']} of {t['wheelSlots']} slots used"
    click.echo(f"timer: wheel {slots}, precision {t['precisionMs']} ms; timerlog {len(t['timerLogFiles'])} files, "
               f"units [{t['timerLogMinOffset']}, {t['timerLogEnd']}): {t['units']} units "
               f"({t['rollUnits']} roll, {t['deleteUnits']} delete), {t['pending']} pending")
    ck = t["checkpoint"]
    if ck is not None:
        print_table("timer checkpoint (config/timercheck)", list(ck), [tuple(ck.values())])
    per = t["pendingPerSecond"]
    if per:
        more = f" (first {TEXT_SECONDS} of {len(per)})" if len(per) > TEXT_SECONDS else ""
        print_table(f"pending timer messages per delivery second{more}", ["second", "messages", "deletes"],
                    [(p["second"], p["messages"], p["deletes"]) for p in per[:TEXT_SECONDS]])
    for p in t["problems"]:
        click.echo(f"timer problem: {p}")


def dump_timer(store: Path, engine, as_json: bool, limit: int | None, include_done: bool) -> None:
    """Pending timer messages (units whose slot the broker has not read yet) with their real
    topic and delivery time, read from the CommitLog records the units point at."""
    from mqstore.cli.common import echo_json_lines
    from mqstore.errors import InvalidArgumentError, MqStoreError
    from mqstore.formats.rocketmq.timer import (
        MAGIC_DELETE,
        MAGIC_ROLL,
        PROPERTY_REAL_QUEUE_ID,
        PROPERTY_REAL_TOPIC,
        PROPERTY_TIMER_OUT_MS,
    )
    from mqstore.storage.rocketmq.timer import load_timer_state, timer_files_present

    if not timer_files_present(store):
        raise InvalidArgumentError(f"{store} has no timer files (timerwheel, timerlog/, config/timercheck)")
    state = load_timer_state(store, strict=True)
    u = state.scan.units
    mask = state.pending_mask() if not include_done else u.pos >= 0
    import numpy as np

    rows = np.flatnonzero(mask)
    rows = rows[np.lexsort((u.pos[rows], u.delivery_ms[rows]))]
    if limit is not None:
        rows = rows[:limit]
    cl = engine.commit_log
    out = []
    for r in rows.tolist():
        off, size = int(u.offset_py[r]), int(u.size_py[r])
        item = {"timerLogPos": int(u.pos[r]), "wheelTimeMs": int(u.delivery_ms[r]),
                "writeTimeMs": int(u.write_time[r]), "magic": int(u.magic[r]),
                "roll": bool(u.magic[r] & MAGIC_ROLL), "delete": bool(u.magic[r] & MAGIC_DELETE),
                "commitLogOffset": off, "size": size, "realTopic": None, "realQueueId": None,
                "deliverMs": None, "msgId": None, "keys": None, "tags": None, "error": None}
        if off < cl.min_offset:
            item["error"] = f"the CommitLog below {cl.min_offset} is deleted"
        else:
            try:
                rec = cl.read_record(off)
            except MqStoreError as exc:
                item["error"] = exc.message
            else:
                p = rec.properties
                item["realTopic"] = p.get(PROPERTY_REAL_TOPIC)
                qid = p.get(PROPERTY_REAL_QUEUE_ID)
                item["realQueueId"] = int(qid) if qid is not None and qid.lstrip("-").isdigit() else qid
                dm = p.get(PROPERTY_TIMER_OUT_MS)
                item["deliverMs"] = int(dm) if dm is not None and dm.lstrip("-").isdigit() else dm
                item["msgId"] = p.get("UNIQ_KEY")
                item["keys"] = p.get("KEYS")
                item["tags"] = p.get("TAGS")
                if rec.total_size and rec.total_size != size:
                    item["error"] = f"the record at {off} is {rec.total_size} bytes, the unit says {size}"
        out.append(item)
    if as_json:
        echo_json_lines(out)
        return
    print_table(f"{'timer messages' if include_done else 'pending timer messages'} of {store}",
                ["timerLogPos", "deliverMs", "wheelTimeMs", "realTopic", "realQueueId", "commitLogOffset", "size",
                 "roll", "delete", "msgId", "error"],
                [(i["timerLogPos"], i["deliverMs"], i["wheelTimeMs"], i["realTopic"], i["realQueueId"],
                  i["commitLogOffset"], i["size"], i["roll"], i["delete"], i["msgId"], i["error"]) for i in out])

