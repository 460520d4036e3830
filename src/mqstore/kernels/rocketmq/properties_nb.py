"""The numba kernels of :mod:`mqstore.kernels.rocketmq.properties` (the properties text scanned in
place; the C twins are in ``kernels/csrc/mq_rmq.h``).  Imported on first use."""

from __future__ import annotations

import numpy as np
from numba import njit

from mqstore.kernels.rocketmq.properties import (
    P_DELAY,
    P_KEYS,
    P_MQOFF,
    P_MULTI,
    P_TAGS,
    P_UNIQ,
    PROP_SPANS,
)

_MULTI_NAME = np.frombuffer(b"INNER_MULTI_DISPATCH", np.uint8).copy()
_MQOFF_NAME = np.frombuffer(b"INNER_MULTI_QUEUE_OFFSET", np.uint8).copy()


@njit(cache=True, nogil=True)
def eq_bytes(buf: np.ndarray, a: int, b: int, n: int) -> bool:
    for k in range(n):
        if buf[a + k] != buf[b + k]:
            return False
    return True


@njit(cache=True, nogil=True)
def eq_const(buf: np.ndarray, a: int, n: int, const: np.ndarray) -> bool:
    if n != const.shape[0]:
        return False
    for k in range(n):
        if buf[a + k] != const[k]:
            return False
    return True


@njit(cache=True, nogil=True)
def prop_spans(buf: np.ndarray, a: int, b: int, out: np.ndarray) -> None:
    """Spans of the KEYS, TAGS, UNIQ_KEY, DELAY, INNER_MULTI_DISPATCH and INNER_MULTI_QUEUE_OFFSET values in the properties ``buf[a:b]`` with the
    exact rules of ``string2messageProperties`` (later duplicates win, empty names or values are
    ignored), in one pass over the bytes: a name is recognised by its bytes followed by ``\\x01``
    (names contain neither separator, so this is the first ``\\x01`` of the property).

    ``out[P_KEYS]``/``out[P_KEYS + 1]`` = start/end of the KEYS value (likewise ``P_TAGS``,
    ``P_UNIQ``, ``P_DELAY``, ``P_MULTI``, ``P_MQOFF``), -1 when absent.
    """
    for k in range(PROP_SPANS):
        out[k] = -1
    s = a
    while s < b:
        which = -1
        vs = s
        c0 = buf[s]
        if c0 == 75:  # K
            if s + 5 <= b and buf[s + 4] == 1 and buf[s + 1] == 69 and buf[s + 2] == 89 and buf[s + 3] == 83:
                which = P_KEYS
                vs = s + 5
        elif c0 == 84:  # T
            if s + 5 <= b and buf[s + 4] == 1 and buf[s + 1] == 65 and buf[s + 2] == 71 and buf[s + 3] == 83:
                which = P_TAGS
                vs = s + 5
        elif c0 == 85:  # U
            if (
                s + 9 <= b and buf[s + 8] == 1 and buf[s + 1] == 78 and buf[s + 2] == 73 and buf[s + 3] == 81
                and buf[s + 4] == 95 and buf[s + 5] == 75 and buf[s + 6] == 69 and buf[s + 7] == 89
            ):  # fmt: skip
                which = P_UNIQ
                vs = s + 9
        elif c0 == 68:  # D
            if (
                s + 6 <= b and buf[s + 5] == 1 and buf[s + 1] == 69 and buf[s + 2] == 76 and buf[s + 3] == 65
                and buf[s + 4] == 89
            ):  # fmt: skip
                which = P_DELAY
                vs = s + 6
        elif c0 == 73:  # I
            if s + 21 <= b and buf[s + 20] == 1 and eq_const(buf, s, 20, _MULTI_NAME):
                which = P_MULTI
                vs = s + 21
            elif s + 25 <= b and buf[s + 24] == 1 and eq_const(buf, s, 24, _MQOFF_NAME):
                which = P_MQOFF
                vs = s + 25
        e = vs
        while e < b and buf[e] != 2:
            e += 1
        if which >= 0 and e > vs:
            out[which] = vs
            out[which + 1] = e
        s = e + 1


@njit(cache=True, nogil=True)
def count_pieces(buf: np.ndarray, s: int, e: int) -> int:
    n = 0
    i = s
    while i < e:
        j = i
        while j < e and buf[j] != 32:
            j += 1
        if j > i:
            n += 1
        i = j + 1
    return n
