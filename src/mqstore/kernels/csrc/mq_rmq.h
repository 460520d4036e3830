/* RocketMQ CommitLog helpers shared by the native RocketMQ kernels (record framing, the properties
 * scan; the Java hash of UTF-8 bytes comes from mq_javahash.h).  The rules are those of
 * mqstore/kernels/rocketmq/framing.py and properties.py (their numba twins in the *_nb modules);
 * every function here reads only inside the span it is given. */
#ifndef MQ_RMQ_H
#define MQ_RMQ_H

#include "mq_common.h"
#include "mq_javahash.h"

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

/* the Java hash loop is mq_javahash.h's (shared with the IndexFile kernels) */

/* the signed 32-bit value of a hash state */
static inline int64_t mq_state_to_int32(uint32_t h) { return (int64_t)(int32_t)h; }

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

/* The columns of a decoded record row (kernels/rocketmq/columns.py RECORD_FIELDS / F_*): the
 * fixed fields and the in-buffer spans of hosts, body, topic and properties. */
enum {
    MQ_F_SIZE, MQ_F_MAGIC, MQ_F_BODY_CRC, MQ_F_QUEUE_ID, MQ_F_FLAG, MQ_F_QUEUE_OFFSET, MQ_F_PHYSICAL_OFFSET,
    MQ_F_SYS_FLAG, MQ_F_BORN_TIMESTAMP, MQ_F_BORN_HOST_POS, MQ_F_BORN_HOST_WIDTH, MQ_F_STORE_TIMESTAMP,
    MQ_F_STORE_HOST_POS, MQ_F_STORE_HOST_WIDTH, MQ_F_RECONSUME_TIMES, MQ_F_PREPARED_TRANSACTION_OFFSET,
    MQ_F_BODY_START, MQ_F_BODY_LEN, MQ_F_TOPIC_START, MQ_F_TOPIC_LEN, MQ_F_PROPS_START, MQ_F_PROPS_LEN, MQ_N_FIELDS
};

/* The variable parts of the record at pos whose TOTALSIZE says it ends at rend (magic and
 * TOTALSIZE already checked): fills the span columns of o (MQ_F_BORN_HOST_WIDTH,
 * MQ_F_STORE_HOST_WIDTH, MQ_F_BODY_*, MQ_F_TOPIC_*, MQ_F_PROPS_*) and returns the length the fields
 * add up to (the caller compares it with TOTALSIZE), or -1 when a field runs past rend. */
static inline int64_t mq_record_spans(const uint8_t *buf, int64_t pos, int64_t rend, int32_t magic, int64_t *o)
{
    int64_t sys = mq_be32(buf + pos + 36);
    int64_t bw = (sys & 0x10) ? 20 : 8, sw = (sys & 0x20) ? 20 : 8;
    int64_t p = pos + 48 + bw + 8 + sw + 12;
    if (p + 4 > rend) return -1;
    int64_t body_len = mq_be32(buf + p);
    p += 4;
    if (body_len < 0 || p + body_len > rend) return -1;
    int64_t bs = p, tl, tw;
    p += body_len;
    if (magic == MQ_MAGIC_V2) {
        if (p + 2 > rend) return -1;
        tl = mq_be16(buf + p);
        p += 2;
        tw = 2;
    } else {
        if (p + 1 > rend) return -1;
        tl = (int8_t)buf[p];
        p += 1;
        tw = 1;
    }
    if (tl < 0 || p + tl > rend) return -1;
    int64_t tps = p;
    p += tl;
    if (p + 2 > rend) return -1;
    int64_t pl = mq_be16(buf + p);
    p += 2;
    if (pl < 0 || p + pl > rend) return -1;
    o[MQ_F_BORN_HOST_WIDTH] = bw;
    o[MQ_F_STORE_HOST_WIDTH] = sw;
    o[MQ_F_BODY_START] = bs;
    o[MQ_F_BODY_LEN] = body_len;
    o[MQ_F_TOPIC_START] = tps;
    o[MQ_F_TOPIC_LEN] = tl;
    o[MQ_F_PROPS_START] = p;
    o[MQ_F_PROPS_LEN] = pl;
    return 48 + bw + 8 + sw + 12 + 4 + body_len + tw + tl + 2 + pl;
}

/* columns.decode_one: the row (MQ_F_*) of the record at pos of buf[0:nbuf]; 0 when pos is not a
 * valid message record inside the buffer */
static int mq_decode_record(const uint8_t *buf, int64_t nbuf, int64_t pos, int64_t *o)
{
    if (pos < 0 || pos + 8 > nbuf) return 0;
    int64_t total = mq_be32(buf + pos), magic = mq_be32(buf + pos + 4);
    if ((magic != MQ_MAGIC_V1 && magic != MQ_MAGIC_V2) || total < MQ_FIXED_MIN || pos + total > nbuf) return 0;
    if (mq_record_spans(buf, pos, pos + total, (int32_t)magic, o) != total) return 0;
    int64_t bw = o[MQ_F_BORN_HOST_WIDTH], sw = o[MQ_F_STORE_HOST_WIDTH];
    o[MQ_F_SIZE] = total;
    o[MQ_F_MAGIC] = magic;
    o[MQ_F_BODY_CRC] = mq_be32(buf + pos + 8);
    o[MQ_F_QUEUE_ID] = mq_be32(buf + pos + 12);
    o[MQ_F_FLAG] = mq_be32(buf + pos + 16);
    o[MQ_F_QUEUE_OFFSET] = mq_be64(buf + pos + 20);
    o[MQ_F_PHYSICAL_OFFSET] = mq_be64(buf + pos + 28);
    o[MQ_F_SYS_FLAG] = mq_be32(buf + pos + 36);
    o[MQ_F_BORN_TIMESTAMP] = mq_be64(buf + pos + 40);
    o[MQ_F_BORN_HOST_POS] = pos + 48;
    o[MQ_F_STORE_TIMESTAMP] = mq_be64(buf + pos + 48 + bw);
    o[MQ_F_STORE_HOST_POS] = pos + 56 + bw;
    o[MQ_F_RECONSUME_TIMES] = mq_be32(buf + pos + 56 + bw + sw);
    o[MQ_F_PREPARED_TRANSACTION_OFFSET] = mq_be64(buf + pos + 60 + bw + sw);
    return 1;
}

#endif
