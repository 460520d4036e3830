/* Kafka's record-batch layout for mqstore's native kernels (_nat_kafka.c): the batch-header walk,
 * the index-entry rule of LogSegment.recover and the record-body walk, as plain C over pointers
 * (no Python objects: the callers hold the buffers and release the GIL around these). */
#ifndef MQ_KAFKA_H
#define MQ_KAFKA_H

#include <stdint.h>
#include "mq_common.h"

/* the scan columns (kernels/kafka/batches.py SCAN_FIELDS) */
typedef struct {
    int64_t *position;
    int32_t *size;
    int64_t *base_offset;
    int64_t *last_offset;
    int64_t *max_ts;
    int64_t *base_ts;
    int32_t *epoch;
    int8_t *magic;
    int32_t *attrs;
    int32_t *count;
    uint32_t *crc;
} mk_cols;

static inline int64_t mk_wrap_add(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline int64_t mk_wrap_sub(int64_t a, int64_t b) { return (int64_t)((uint64_t)a - (uint64_t)b); }

/* Header fields of the batch at file/buffer position p (h points at it; at least
 * min(61, end - p) bytes are readable, the size field says the batch fits in [p, end)) into row
 * n.  Returns the checksum kind: 0 none (the batch is invalid), 1 CRC-32C of [p+21, end of batch),
 * 2 CRC-32 of [p+16, end of batch). */
static inline int mk_header(const uint8_t *h, int64_t p, int64_t end, int64_t n, mk_cols *c)
{
    int32_t s = mq_be32(h + 8);
    int8_t m = (int8_t)h[16];
    int64_t total = (int64_t)s + 12;
    int64_t off = mq_be64(h);
    int kind = 0;
    c->position[n] = p;
    c->size[n] = (int32_t)total;
    c->magic[n] = m;
    if (m >= 2) {
        c->epoch[n] = mq_be32(h + 12);
        if (total >= 61 && p + 61 <= end) {
            c->crc[n] = mq_beu32(h + 17);
            c->attrs[n] = mq_beu16(h + 21);
            c->base_offset[n] = off;
            c->last_offset[n] = mk_wrap_add(off, mq_be32(h + 23));
            c->base_ts[n] = mq_be64(h + 27);
            c->max_ts[n] = mq_be64(h + 35);
            c->count[n] = mq_be32(h + 57);
            kind = 1;
        } else {
            c->crc[n] = p + 21 <= end ? mq_beu32(h + 17) : 0;
            c->attrs[n] = 0;
            c->base_offset[n] = off;
            c->last_offset[n] = off;
            c->base_ts[n] = -1;
            c->max_ts[n] = -1;
            c->count[n] = 0;
        }
    } else {
        c->epoch[n] = -1;
        c->crc[n] = mq_beu32(h + 12);
        c->attrs[n] = h[17];
        c->base_offset[n] = -1;
        c->last_offset[n] = off;
        c->count[n] = 1;
        c->base_ts[n] = (m == 1 && s >= 22) ? mq_be64(h + 18) : -1;
        c->max_ts[n] = c->base_ts[n];
        if ((m == 0 || m == 1) && total >= 26) kind = 2;
    }
    return kind;
}

/* Count the whole batches from `start` of a[0:end]: returns the stop reason (0 end, 1 torn,
 * 2 bad size), the count and the stop position through pointers. */
static int mk_scan_count(const uint8_t *a, int64_t end, int64_t start, int64_t *n_out, int64_t *p_out)
{
    int64_t p = start < 0 ? 0 : start, n = 0;
    int reason;
    for (;;) {
        if (p >= end - 17) { reason = 0; break; }
        int32_t s = mq_be32(a + p + 8);
        if (s < 14) { reason = 2; break; }
        if (p > end - 12 - s) { reason = 1; break; }
        n++;
        p += 12 + (int64_t)s;
    }
    *n_out = n;
    *p_out = p;
    return reason;
}

/* The columns of the first n batches from `start` (mk_scan_count said there are n). */
static void mk_scan_fill(const uint8_t *a, int64_t end, int64_t start, int64_t n, mk_cols *c)
{
    int64_t p = start < 0 ? 0 : start;
    for (int64_t i = 0; i < n; i++) {
        mk_header(a + p, p, end, i, c);
        p += (int64_t)mq_be32(a + p + 8) + 12;
    }
}

/* error codes of the index build (kernels/kafka/index_build.py) */
#define MK_BUILD_OK 0
#define MK_BUILD_OFFSET_OVERFLOW 1
#define MK_BUILD_OFFSET_NOT_INCREASING 2
#define MK_BUILD_OFFSET_INDEX_FULL 3
#define MK_BUILD_TIME_INDEX_FULL 4
#define MK_BUILD_POSITION_OVERFLOW 5

/* The entries LogSegment.recover appends for n batches (sizes, last offsets, max timestamps):
 * an offset entry every `interval` bytes, the time index following the largest timestamp so far,
 * then the final time entry.  Returns an MK_BUILD_* code (at: the batch it concerns), or -1 when
 * the output arrays are too short. */
static int mk_build_index(const int32_t *sizes, const int64_t *last, const int64_t *mts, int64_t n, int64_t base,
                          int64_t interval, int64_t max_off, int64_t max_time, int64_t *oi_off, int64_t *oi_pos,
                          int64_t cap_o, int64_t *ti_ts, int64_t *ti_off, int64_t cap_t, int64_t *no_out,
                          int64_t *nt_out, int64_t *at)
{
    int64_t no = 0, nt = 0, last_ts = -1, last_toff = base, last_ooff = base, max_so_far = -1, off_of_max = -1;
    int64_t last_entry_bytes = 0, valid = 0;
    int err = MK_BUILD_OK;
    *at = n;
    for (int64_t i = 0; i < n; i++) {
        int64_t lo = last[i];
        int64_t rel = mk_wrap_sub(lo, base);
        if (rel < 0 || rel > 2147483647) { err = MK_BUILD_OFFSET_OVERFLOW; *at = i; goto out; }
        if (mts[i] > max_so_far) {
            max_so_far = mts[i];
            off_of_max = lo;
        }
        if (valid - last_entry_bytes > interval) {
            if (no >= max_off) { err = MK_BUILD_OFFSET_INDEX_FULL; *at = i; goto out; }
            if (no > 0 && lo <= last_ooff) { err = MK_BUILD_OFFSET_NOT_INCREASING; *at = i; goto out; }
            if (valid > 2147483647) { err = MK_BUILD_POSITION_OVERFLOW; *at = i; goto out; }
            if (no >= cap_o) return -1;
            oi_off[no] = lo;
            oi_pos[no] = valid;
            no++;
            last_ooff = lo;
            if (nt >= max_time - 1) { err = MK_BUILD_TIME_INDEX_FULL; *at = i; goto out; }
            if (nt > 0 && off_of_max < last_toff) { err = MK_BUILD_OFFSET_NOT_INCREASING; *at = i; goto out; }
            if (max_so_far > last_ts) {
                if (nt >= cap_t) return -1;
                ti_ts[nt] = max_so_far;
                ti_off[nt] = off_of_max;
                nt++;
                last_ts = max_so_far;
                last_toff = off_of_max;
            }
            last_entry_bytes = valid;
        }
        valid += sizes[i];
    }
    if (max_so_far > last_ts) { /* the final entry (skipFullCheck, still bounded by the slots) */
        if (nt >= max_time) { err = MK_BUILD_TIME_INDEX_FULL; goto out; }
        if (nt > 0 && off_of_max < last_toff) { err = MK_BUILD_OFFSET_NOT_INCREASING; goto out; }
        if (nt >= cap_t) return -1;
        ti_ts[nt] = max_so_far;
        ti_off[nt] = off_of_max;
        nt++;
    }
out:
    *no_out = no;
    *nt_out = nt;
    return err;
}

/* ------------------------------------------------------------------ record bodies */

#define MK_OK 0
#define MK_ERR_TRUNCATED 1
#define MK_ERR_CORRUPT 2
#define MK_ERR_UNSUPPORTED 3
#define MK_ERR_CAPACITY (-100)

/* zig-zag varint at p of a[..end): the value, and *next = the position after it, or -1 truncated,
 * -2 too long, -3 unsupported (a tenth byte) */
static inline int64_t mk_varint(const uint8_t *a, int64_t p, int64_t end, int max_bytes, int64_t *next)
{
    uint64_t u = 0;
    int shift = 0;
    for (int i = 0; i < max_bytes; i++) {
        if (p + i >= end) { *next = -1; return 0; }
        uint64_t b = a[p + i];
        if (shift == 63) { *next = -3; return 0; }
        u |= (b & 0x7F) << shift;
        if (b < 128) {
            if (max_bytes == 5) u &= 0xFFFFFFFFu;
            *next = p + i + 1;
            return (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
        }
        shift += 7;
    }
    *next = -2;
    return 0;
}

typedef struct {
    const uint8_t *a;
    int64_t len;
    int64_t nb;
    const int64_t *bstart, *bend, *bcount, *bbase, *bts, *bmax;
    const uint8_t *blogappend;
} mk_bodies;

typedef struct {
    int64_t cap_r, cap_h;
    int64_t *off, *ts, *batch, *ks, *kl, *vs, *vl, *hf, *hks, *hkl, *hvs, *hvl;
} mk_rec_out;

#define MK_VARINT_ERR(nx) ((nx) == -3 ? MK_ERR_UNSUPPORTED : (nx) == -1 ? MK_ERR_TRUNCATED : MK_ERR_CORRUPT)

/* The records of the batch bodies a[bstart[b]:bend[b]] (kernels/kafka/records.py:_parse_bodies):
 * with `fill`, their offset, timestamp, batch and key/value/header spans for the offsets in
 * [lo, hi).  Returns MK_OK or MK_ERR_* (*eb: the batch), the counts through n/nh. */
static int mk_parse_bodies(const mk_bodies *d, int64_t lo, int64_t hi, int fill, mk_rec_out *o, int64_t *n_out,
                           int64_t *nh_out, int64_t *eb)
{
    const uint8_t *a = d->a;
    int64_t n = 0, nh = 0, nx;
    int err = MK_OK;
    *eb = -1;
    for (int64_t b = 0; b < d->nb; b++) {
        int64_t p = d->bstart[b], end = d->bend[b];
        if (p < 0 || end > d->len) { err = MK_ERR_TRUNCATED; goto fail; } /* the wrapper checks this first */
        if (d->bcount[b] < 0) { err = MK_ERR_CORRUPT; goto fail; }
        for (int64_t r = 0; r < d->bcount[b]; r++) {
            int64_t length = mk_varint(a, p, end, 5, &nx);
            if (nx < 0) { err = MK_VARINT_ERR(nx); goto fail; }
            p = nx;
            if (length < 0 || p + length > end) { err = MK_ERR_TRUNCATED; goto fail; }
            int64_t rec_end = p + length;
            if (p >= rec_end) { err = MK_ERR_TRUNCATED; goto fail; }
            p += 1; /* attributes */
            int64_t tsd = mk_varint(a, p, rec_end, 10, &nx);
            if (nx < 0) { err = MK_VARINT_ERR(nx); goto fail; }
            p = nx;
            int64_t od = mk_varint(a, p, rec_end, 5, &nx);
            if (nx < 0) { err = nx == -1 ? MK_ERR_TRUNCATED : MK_ERR_CORRUPT; goto fail; }
            p = nx;
            int64_t kl = mk_varint(a, p, rec_end, 5, &nx);
            if (nx < 0) { err = nx == -1 ? MK_ERR_TRUNCATED : MK_ERR_CORRUPT; goto fail; }
            p = nx;
            int64_t ks = p;
            if (kl >= 0) {
                if (p + kl > rec_end) { err = MK_ERR_TRUNCATED; goto fail; }
                p += kl;
            }
            int64_t vl = mk_varint(a, p, rec_end, 5, &nx);
            if (nx < 0) { err = nx == -1 ? MK_ERR_TRUNCATED : MK_ERR_CORRUPT; goto fail; }
            p = nx;
            int64_t vs = p;
            if (vl >= 0) {
                if (p + vl > rec_end) { err = MK_ERR_TRUNCATED; goto fail; }
                p += vl;
            }
            int64_t hn = mk_varint(a, p, rec_end, 5, &nx);
            if (nx < 0) { err = nx == -1 ? MK_ERR_TRUNCATED : MK_ERR_CORRUPT; goto fail; }
            p = nx;
            if (hn < 0) { err = MK_ERR_CORRUPT; goto fail; }
            int64_t off = mk_wrap_add(d->bbase[b], od);
            int keep = lo <= off && off < hi;
            if (keep && fill) {
                if (n >= o->cap_r) return MK_ERR_CAPACITY;
                o->off[n] = off;
                o->ts[n] = d->blogappend[b] ? d->bmax[b] : mk_wrap_add(d->bts[b], tsd);
                o->batch[n] = b;
                o->ks[n] = ks;
                o->kl[n] = kl;
                o->vs[n] = vs;
                o->vl[n] = vl;
                o->hf[n] = nh;
            }
            for (int64_t h = 0; h < hn; h++) {
                int64_t hkl = mk_varint(a, p, rec_end, 5, &nx);
                if (nx < 0) { err = nx == -1 ? MK_ERR_TRUNCATED : MK_ERR_CORRUPT; goto fail; }
                p = nx;
                if (hkl < 0) { err = MK_ERR_CORRUPT; goto fail; }
                if (p + hkl > rec_end) { err = MK_ERR_TRUNCATED; goto fail; }
                int64_t hks = p;
                p += hkl;
                int64_t hvl = mk_varint(a, p, rec_end, 5, &nx);
                if (nx < 0) { err = nx == -1 ? MK_ERR_TRUNCATED : MK_ERR_CORRUPT; goto fail; }
                p = nx;
                int64_t hvs = p;
                if (hvl >= 0) {
                    if (p + hvl > rec_end) { err = MK_ERR_TRUNCATED; goto fail; }
                    p += hvl;
                }
                if (keep) {
                    if (fill) {
                        if (nh >= o->cap_h) return MK_ERR_CAPACITY;
                        o->hks[nh] = hks;
                        o->hkl[nh] = hkl;
                        o->hvs[nh] = hvs;
                        o->hvl[nh] = hvl;
                    }
                    nh++;
                }
            }
            if (p != rec_end) { err = MK_ERR_CORRUPT; goto fail; }
            if (keep) n++;
        }
        if (p != end) { err = MK_ERR_CORRUPT; goto fail; }
        continue;
    fail:
        *eb = b;
        break;
    }
    *n_out = n;
    *nh_out = nh;
    return err;
}

#endif
