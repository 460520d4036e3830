"""The KRaft ``quorum-state`` file of ``__cluster_metadata-0/`` (pure bytes in / out).

One JSON object (UTF-8, one line) that the raft client rewrites on every election:

* ``data_version`` 0 (Kafka 3.x, static voters): ``clusterId`` (string), ``leaderId`` (int, −1 =
  none), ``leaderEpoch`` (int), ``votedId`` (int, −1 = none), ``appliedOffset`` (int, always 0),
  ``currentVoters`` (list of ``{"voterId": n}``, null when unknown);
* ``data_version`` 1 (KIP-853, dynamic voters): ``leaderId``, ``leaderEpoch``, ``votedId`` and
  ``votedDirectoryId`` (Kafka uuid text, the voted replica's log directory id; absent or the
  zero uuid when none).  The voter set lives in the log (KRaftVoters control records) instead.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from mqstore.errors import CorruptDataError

_REQUIRED = {
    0: (("leaderId", int), ("leaderEpoch", int), ("votedId", int)),
    1: (("leaderId", int), ("leaderEpoch", int), ("votedId", int)),
}


def decode_quorum_state(data: bytes) -> dict[str, Any]:
    """Parse and check a ``quorum-state`` file; returns the JSON object (fields as stored).

    Raises :class:`CorruptDataError` for bytes that are not a JSON object, an unknown
    ``data_version`` or a missing / mistyped required field.
    """
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CorruptDataError(f"quorum-state is not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise CorruptDataError("quorum-state is not a JSON object")
    version = obj.get("data_version")
    if not isinstance(version, int) or isinstance(version, bool) or version not in _REQUIRED:
        raise CorruptDataError(f"quorum-state data_version {version!r} is not known (0 or 1)")
    for name, typ in _REQUIRED[version]:
        v = obj.get(name)
        if not isinstance(v, typ) or isinstance(v, bool):
            raise CorruptDataError(f"quorum-state v{version}: field {name} missing or not an integer")
    if version == 0:
        voters = obj.get("currentVoters")
        if voters is not None and (not isinstance(voters, list) or not all(
                isinstance(x, dict) and isinstance(x.get("voterId"), int) for x in voters)):
            raise CorruptDataError("quorum-state v0: currentVoters is not a list of {voterId}")
    elif "votedDirectoryId" in obj and not isinstance(obj["votedDirectoryId"], str):
        raise CorruptDataError("quorum-state v1: votedDirectoryId is not a string")
    return obj


def encode_quorum_state(state: Mapping[str, Any]) -> bytes:
    """The file bytes for ``state`` (one JSON line, as the broker writes it)."""
    return json.dumps(dict(state), separators=(",", ":")).encode("utf-8") + b"\n"
