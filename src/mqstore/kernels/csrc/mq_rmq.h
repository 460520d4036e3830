/* RocketMQ CommitLog helpers shared by the native RocketMQ kernels (record framing, the Java
 * String.hashCode of UTF-8 bytes, the properties scan).  The rules are those of
 * mqstore/kernels/rocketmq/framing.py, properties.py and kernels/javahash.py (their numba twins in
 * the *_nb modules); every function here reads only inside the span it is given. */
#ifndef MQ_RMQ_H
#define MQ_RMQ_H

#include "mq_common.h"

/* ---------------------------------------------------------------- record framing */

#define MQ_MAGIC_V1 ((int32_t)-626843481)     /* 0xDAA320A7 */
#define MQ_MAGIC_V2 ((int32_t)-626843477)     /* 0xDAA320AB */
#define MQ_BLANK_MAGIC ((int32_t)-875286124)  /* 0xCBD43194 */
#define MQ_MIN_RECORD_SIZE 91
#define MQ_FIXED_MIN 88

/* stop states (framing.py ST_*) */
#define MQ_ST_RANGE 0
#define MQ_ST_LIMIT 1
#define MQ_ST_BLANK 2
#define MQ_ST_TRUNC 3
#define MQ_ST_NOHDR 4
#define MQ_ST_BADMAGIC 5
#define MQ_ST_BAD 6
#define MQ_ST_FULL 7
#define MQ_ST_OK (-1)

/* framing.head: the state of the record header at pos (ST_OK: walkable) and its TOTALSIZE */
static inline int mq_rmq_head(const uint8_t *buf, int64_t pos, int64_t end, int64_t min_size, int64_t *total_out)
{
    int64_t remaining = end - pos;
    if (remaining <= 4) {
        *total_out = 0;
        return MQ_ST_NOHDR;
    }
    int64_t total = mq_be32(buf + pos);
    int32_t magic = remaining >= 8 ? mq_be32(buf + pos + 4) : 0;
    *total_out = total;
    if (magic == MQ_BLANK_MAGIC) return MQ_ST_BLANK;
    if (total < 0 || total > remaining) return MQ_ST_TRUNC;
    if (magic != MQ_MAGIC_V1 && magic != MQ_MAGIC_V2) return MQ_ST_BADMAGIC;
    if (total < min_size) return MQ_ST_BAD;
    return MQ_ST_OK;
}

/* ---------------------------------------------------------------- Java hash of UTF-8 bytes */

#define MQ_REPL 0xFFFD

/* one code point at buf[i] (i < e), invalid input gives U+FFFD over its maximal valid prefix
 * (Python's decode("utf-8", "replace")); *next is the index after it */
static inline int64_t mq_utf8_next(const uint8_t *buf, int64_t i, int64_t e, int64_t *next)
{
    int64_t b0 = buf[i];
    if (b0 < 0x80) { *next = i + 1; return b0; }
    if (b0 < 0xC2 || b0 > 0xF4) { *next = i + 1; return MQ_REPL; }
    int need;
    int64_t cp, lo, hi;
    if (b0 < 0xE0) {
        need = 1; cp = b0 & 0x1F; lo = 0x80; hi = 0xBF;
    } else if (b0 < 0xF0) {
        need = 2; cp = b0 & 0x0F; lo = b0 == 0xE0 ? 0xA0 : 0x80; hi = b0 == 0xED ? 0x9F : 0xBF;
    } else {
        need = 3; cp = b0 & 0x07; lo = b0 == 0xF0 ? 0x90 : 0x80; hi = b0 == 0xF4 ? 0x8F : 0xBF;
    }
    int64_t j = i + 1;
    if (j >= e) { *next = j; return MQ_REPL; }
    int64_t b = buf[j];
    if (b < lo || b > hi) { *next = j; return MQ_REPL; }
    cp = (cp << 6) | (b & 0x3F);
    j++;
    for (int k = 0; k < need - 1; k++) {
        if (j >= e) { *next = j; return MQ_REPL; }
        b = buf[j];
        if (b < 0x80 || b > 0xBF) { *next = j; return MQ_REPL; }
        cp = (cp << 6) | (b & 0x3F);
        j++;
    }
    *next = j;
    return cp;
}

/* continue the Java hash state h (wrapping; the low 32 bits matter) over the UTF-8 bytes buf[s:e] */
static inline uint64_t mq_hash_continue(const uint8_t *buf, int64_t s, int64_t e, uint64_t h)
{
    int64_t i = s;
    while (i < e) {
        if (i + 4 <= e) {
            uint64_t b0 = buf[i], b1 = buf[i + 1], b2 = buf[i + 2], b3 = buf[i + 3];
            if (((b0 | b1 | b2 | b3) & 0x80) == 0) {
                h = h * 923521u + b0 * 29791u + b1 * 961u + b2 * 31u + b3;
                i += 4;
                continue;
            }
        }
        uint8_t b = buf[i];
        if (b < 0x80) {
            h = h * 31u + b;
            i++;
            continue;
        }
        int64_t cp = mq_utf8_next(buf, i, e, &i);
        if (cp >= 0x10000) {
            int64_t v = cp - 0x10000;
            h = h * 31u + (uint64_t)(0xD800 + (v >> 10));
            h = h * 31u + (uint64_t)(0xDC00 + (v & 0x3FF));
        } else {
            h = h * 31u + (uint64_t)cp;
        }
    }
    return h;
}

/* the signed 32-bit value of a hash state */
static inline int64_t mq_state_to_int32(uint64_t h) { return (int64_t)(int32_t)(uint32_t)h; }

/* IndexFile.indexKeyHashMethod: abs(hashCode), 0 for Integer.MIN_VALUE */
static inline int64_t mq_index_hash_of_state(uint64_t h)
{
    int64_t v = mq_state_to_int32(h);
    if (v < 0) v = -v;
    if (v > 0x7FFFFFFF) v = 0;
    return v;
}

/* ---------------------------------------------------------------- properties */

/* slots of mq_prop_spans's output (properties.py P_*) */
#define MQ_P_KEYS 0
#define MQ_P_TAGS 2
#define MQ_P_UNIQ 4
#define MQ_P_DELAY 6
#define MQ_P_MULTI 8
#define MQ_P_MQOFF 10
#define MQ_PROP_SPANS 12

/* the spans of the KEYS, TAGS, UNIQ_KEY, DELAY, INNER_MULTI_DISPATCH and INNER_MULTI_QUEUE_OFFSET
 * values of the properties buf[a:b] (string2messageProperties: later duplicates win, empty values
 * are ignored); -1 when absent */
static inline void mq_prop_spans(const uint8_t *buf, int64_t a, int64_t b, int64_t *out)
{
    for (int k = 0; k < MQ_PROP_SPANS; k++) out[k] = -1;
    int64_t s = a;
    while (s < b) {
        int which = -1;
        int64_t vs = s;
        switch (buf[s]) {
        case 'K':
            if (s + 5 <= b && buf[s + 4] == 1 && memcmp(buf + s, "KEYS", 4) == 0) { which = MQ_P_KEYS; vs = s + 5; }
            break;
        case 'T':
            if (s + 5 <= b && buf[s + 4] == 1 && memcmp(buf + s, "TAGS", 4) == 0) { which = MQ_P_TAGS; vs = s + 5; }
            break;
        case 'U':
            if (s + 9 <= b && buf[s + 8] == 1 && memcmp(buf + s, "UNIQ_KEY", 8) == 0) { which = MQ_P_UNIQ; vs = s + 9; }
            break;
        case 'D':
            if (s + 6 <= b && buf[s + 5] == 1 && memcmp(buf + s, "DELAY", 5) == 0) { which = MQ_P_DELAY; vs = s + 6; }
            break;
        case 'I':
            if (s + 21 <= b && buf[s + 20] == 1 && memcmp(buf + s, "INNER_MULTI_DISPATCH", 20) == 0) {
                which = MQ_P_MULTI; vs = s + 21;
            } else if (s + 25 <= b && buf[s + 24] == 1 && memcmp(buf + s, "INNER_MULTI_QUEUE_OFFSET", 24) == 0) {
                which = MQ_P_MQOFF; vs = s + 25;
            }
            break;
        default:
            break;
        }
        const uint8_t *hit = vs < b ? memchr(buf + vs, 2, (size_t)(b - vs)) : NULL;
        int64_t e = hit ? (int64_t)(hit - buf) : b;
        if (which >= 0 && e > vs) {
            out[which] = vs;
            out[which + 1] = e;
        }
        s = e + 1;
    }
}

/* the number of non-empty space-separated pieces of buf[s:e] (the KEYS value) */
static inline int64_t mq_count_pieces(const uint8_t *buf, int64_t s, int64_t e)
{
    int64_t n = 0, i = s;
    while (i < e) {
        int64_t j = i;
        while (j < e && buf[j] != ' ') j++;
        if (j > i) n++;
        i = j + 1;
    }
    return n;
}

#endif
