"""The filters and payload decoders of the ``dump`` commands (both layouts): time bounds given as
ISO 8601 or epoch milliseconds, and ``--decode utf8|hex|json`` for payloads and keys.  Bad values
raise :class:`InvalidArgumentError` (one ``error:`` line, exit 2)."""

from __future__ import annotations

import datetime as _dt
import json
from typing import Any

from mqstore.errors import InvalidArgumentError

DECODERS = ("utf8", "hex", "json")
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)


def parse_time(text: str | None, option: str) -> int | None:
    """Epoch milliseconds of ``text``: digits are milliseconds; anything else is ISO 8601
    (``2024-05-01T12:00:00Z``, ``2024-05-01 12:00:00.250+02:00``, ``2024-05-01``); a time without
    an offset is UTC."""
    if text is None:
        return None
    t = text.strip()
    if t.lstrip("-").isdigit():
        return int(t)
    try:
        d = _dt.datetime.fromisoformat(t)
    except ValueError:
        raise InvalidArgumentError(f"{option}: {text!r} is neither epoch milliseconds nor an ISO 8601 time") from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.UTC)
    return (d - _EPOCH) // _dt.timedelta(milliseconds=1)  # exact (no float rounding)


def check_time_range(lo: int | None, hi: int | None) -> None:
    if lo is not None and hi is not None and lo > hi:
        raise InvalidArgumentError(f"--from-time ({lo}) is after --to-time ({hi})")


def check_decoder(mode: str | None) -> str | None:
    if mode is not None and mode not in DECODERS:
        raise InvalidArgumentError(f"--decode must be one of {', '.join(DECODERS)}, got {mode!r}")
    return mode


def decode_value(data: bytes | None, mode: str) -> Any:
    """``data`` shown as ``mode``: utf8 text (invalid bytes replaced), lowercase hex, or the parsed
    JSON value (bytes that are not JSON come back as ``{"notJson": <utf8 text>}``)."""
    if data is None:
        return None
    if mode == "hex":
        return data.hex()
    text = data.decode("utf-8", errors="replace")
    if mode == "utf8":
        return text
    try:
        return json.loads(text)
    except ValueError:
        return {"notJson": text}


def decode_text(data: bytes | None, mode: str) -> str:
    """:func:`decode_value` as one line of text (JSON compact)."""
    v = decode_value(data, mode)
    if v is None:
        return "null"
    if isinstance(v, str) and mode != "json":
        return v
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def parse_header_filter(spec: str | None) -> tuple[str, bytes | None] | None:
    """``--header KEY`` (the record has that header) or ``--header KEY=VALUE`` (with that UTF-8 value)."""
    if spec is None:
        return None
    key, sep, value = spec.partition("=")
    if not key:
        raise InvalidArgumentError(f"--header needs KEY or KEY=VALUE, got {spec!r}")
    return key, (value.encode() if sep else None)


def message_json(m: Any, decode: str | None) -> dict[str, Any]:
    """A RocketMQ message's JSON object (Spark column names) with the body decoded as asked."""
    d = m.to_json_dict()
    if decode is not None:
        d["body"] = decode_value(m.body, decode)
    return d


def print_messages(messages: list[Any], as_json: bool, title: str, decode: str | None = None) -> None:
    """RocketMQ messages as JSON lines or a table (bodies decoded as asked)."""
    from mqstore.cli.common import echo_json_lines, print_table

    if as_json:
        echo_json_lines(message_json(m, decode) for m in messages)
        return
    bodies = [decode_text(m.body, decode)[:64] if decode is not None else m.body[:32] for m in messages]
    rows = [(m.commit_log_offset, m.topic[:40], m.queue_id, m.queue_offset, m.store_timestamp, " ".join(m.keys)[:40],
             m.tags or "", m.size, b) for m, b in zip(messages, bodies, strict=True)]
    print_table(title, ["commitLogOffset", "topic", "queueId", "queueOffset", "storeTimestamp", "keys", "tags", "size",
                        "body"], rows)
