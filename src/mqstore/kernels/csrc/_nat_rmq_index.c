/* mqstore.kernels._nat_rmq_index: RocketMQ key hashes and the IndexFile bulk build in C (the
 * native twins of mqstore/kernels/javahash.py and mqstore/kernels/rocketmq/index_build.py).
 *
 * IndexFile layout (big-endian): a 40-byte header (beginTimestamp, endTimestamp, beginPhyOffset,
 * endPhyOffset: int64; hashSlotCount, indexCount: int32), `slots` 4-byte hash slots, then
 * `index_num` 20-byte items (keyHash int32, phyOffset int64, timeDiff int32, prevIndex int32).
 * The in-memory header is an int64[6] array in that field order (index_build.HEADER_FIELDS).
 *
 * bulk_put is IndexFileBuffer.put_hash for keys start, start + 1, ... until the file is full, with
 * the header written through as putKey does (the count last).  slots_of / slot_phase / item_phase
 * are the three phases of the byte-identical bulk put on several threads, driven from Python
 * (index_build.bulk_put_parallel explains them); every call runs without the GIL.
 */
#include "mq_common.h"
#include "mq_javahash.h"

#define HEADER_SIZE 40
#define ITEM_SIZE 20
#define INT_MAX32 2147483647LL

/* ---------------------------------------------------------------- argument helpers */

static int value_error(const char *msg)
{
    PyErr_SetString(PyExc_ValueError, msg);
    return -1;
}

/* span [s, s + n) clamped into [0, size] the way the numba kernels clamp it */
static inline void clamp_span(int64_t s, int64_t n, int64_t size, int64_t *a, int64_t *b)
{
    int64_t lo = s < 0 ? 0 : (s > size ? size : s);
    int64_t hi = s + n;
    if (hi < lo) hi = lo;
    if (hi > size) hi = size;
    *a = lo;
    *b = hi;
}

/* ---------------------------------------------------------------- hashes */

/* hash_spans(buf, starts int64[n], lens int64[n], out int32[n]): Java hashCode of each span */
static PyObject *hash_spans(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 4, "hash_spans(buf, starts, lens, out)") < 0) return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *b, *s, *l, *o;
    if (!(b = mq_views_add(&vs, args[0], 0, 0, "buf")) || !(s = mq_views_add(&vs, args[1], 8, 0, "starts")) ||
        !(l = mq_views_add(&vs, args[2], 8, 0, "lens")) || !(o = mq_views_add(&vs, args[3], 4, 1, "out")))
        goto fail;
    Py_ssize_t n = mq_len(s);
    if (mq_len(l) != n || mq_len(o) < n) {
        value_error("hash_spans: starts, lens and out differ in length");
        goto fail;
    }
    const uint8_t *p = b->buf;
    const int64_t *st = s->buf, *ln = l->buf;
    int32_t *out = o->buf;
    int64_t size = b->len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        int64_t a, e;
        clamp_span(st[r], ln[r], size, &a, &e);
        out[r] = (int32_t)mq_hash_continue(p, a, e, 0);
    }
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    Py_RETURN_NONE;
fail:
    mq_views_release(&vs);
    return NULL;
}

/* index_hash_spans(buf, topic_starts, topic_lens, key_starts, key_lens, out int32): index hash of
 * topic + "#" + key per row */
static PyObject *index_hash_spans(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 6, "index_hash_spans(buf, ts, tl, ks, kl, out)") < 0) return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *b, *ts, *tl, *ks, *kl, *o;
    if (!(b = mq_views_add(&vs, args[0], 0, 0, "buf")) || !(ts = mq_views_add(&vs, args[1], 8, 0, "topic_starts")) ||
        !(tl = mq_views_add(&vs, args[2], 8, 0, "topic_lens")) || !(ks = mq_views_add(&vs, args[3], 8, 0, "key_starts")) ||
        !(kl = mq_views_add(&vs, args[4], 8, 0, "key_lens")) || !(o = mq_views_add(&vs, args[5], 4, 1, "out")))
        goto fail;
    Py_ssize_t n = mq_len(ks);
    if (mq_len(ts) != n || mq_len(tl) != n || mq_len(kl) != n || mq_len(o) < n) {
        value_error("index_hash_spans: the span columns and out differ in length");
        goto fail;
    }
    const uint8_t *p = b->buf;
    const int64_t *tsv = ts->buf, *tlv = tl->buf, *ksv = ks->buf, *klv = kl->buf;
    int32_t *out = o->buf;
    int64_t size = b->len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        int64_t ta, te, ka, ke;
        clamp_span(tsv[r], tlv[r], size, &ta, &te);
        clamp_span(ksv[r], klv[r], size, &ka, &ke);
        uint32_t h = mq_hash_continue(p, ta, te, 0) * 31u + '#';
        out[r] = mq_index_hash_of_state(mq_hash_continue(p, ka, ke, h));
    }
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    Py_RETURN_NONE;
fail:
    mq_views_release(&vs);
    return NULL;
}

/* prefix_hash_spans(buf, starts, lens, prefix, out int32): index hash of each span continued from
 * the state `prefix` (of "topic#") */
static PyObject *prefix_hash_spans(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 5, "prefix_hash_spans(buf, starts, lens, prefix, out)") < 0) return NULL;
    unsigned long long prefix = PyLong_AsUnsignedLongLongMask(args[3]);
    if (PyErr_Occurred()) return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *b, *s, *l, *o;
    if (!(b = mq_views_add(&vs, args[0], 0, 0, "buf")) || !(s = mq_views_add(&vs, args[1], 8, 0, "starts")) ||
        !(l = mq_views_add(&vs, args[2], 8, 0, "lens")) || !(o = mq_views_add(&vs, args[4], 4, 1, "out")))
        goto fail;
    Py_ssize_t n = mq_len(s);
    if (mq_len(l) != n || mq_len(o) < n) {
        value_error("prefix_hash_spans: starts, lens and out differ in length");
        goto fail;
    }
    const uint8_t *p = b->buf;
    const int64_t *st = s->buf, *ln = l->buf;
    int32_t *out = o->buf;
    int64_t size = b->len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        int64_t a, e;
        clamp_span(st[r], ln[r], size, &a, &e);
        out[r] = mq_index_hash_of_state(mq_hash_continue(p, a, e, (uint32_t)prefix));
    }
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    Py_RETURN_NONE;
fail:
    mq_views_release(&vs);
    return NULL;
}

/* hash_joined(kbuf, kstarts int64[n + 1], prefix, out int32[n]): index hash of key i =
 * kbuf[kstarts[i] : kstarts[i + 1] - 1] continued from `prefix` */
static PyObject *hash_joined(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 4, "hash_joined(kbuf, kstarts, prefix, out)") < 0) return NULL;
    unsigned long long prefix = PyLong_AsUnsignedLongLongMask(args[2]);
    if (PyErr_Occurred()) return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *b, *s, *o;
    if (!(b = mq_views_add(&vs, args[0], 0, 0, "kbuf")) || !(s = mq_views_add(&vs, args[1], 8, 0, "kstarts")) ||
        !(o = mq_views_add(&vs, args[3], 4, 1, "out")))
        goto fail;
    Py_ssize_t n = mq_len(s) - 1;
    if (n < 0 || mq_len(o) < n) {
        value_error("hash_joined: kstarts must hold one more entry than out");
        goto fail;
    }
    const uint8_t *p = b->buf;
    const int64_t *st = s->buf;
    int32_t *out = o->buf;
    int64_t size = b->len;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        int64_t a, e;
        clamp_span(st[r], st[r + 1] - 1 - st[r], size, &a, &e);
        out[r] = mq_index_hash_of_state(mq_hash_continue(p, a, e, (uint32_t)prefix));
    }
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    Py_RETURN_NONE;
fail:
    mq_views_release(&vs);
    return NULL;
}

/* ---------------------------------------------------------------- IndexFile bulk build */

/* an item's timeDiff: seconds since begin_ts (truncated toward zero), clamped to [0, INT_MAX];
 * 0 while the file has no begin timestamp */
static inline int64_t time_diff(int64_t t, int64_t begin_ts)
{
    if (begin_ts <= 0) return 0;
    int64_t d = t - begin_ts;
    int64_t q = d / 1000; /* C division truncates toward zero, as Java's */
    if (q > INT_MAX32) return INT_MAX32;
    return q < 0 ? 0 : q;
}

static inline int64_t slot_of(int32_t h, int64_t slots)
{
    int64_t s = (int64_t)h % slots;
    return s < 0 ? s + slots : s;
}

/* the file geometry against its buffer: 0, or -1 with an exception set */
static int check_file(const Py_buffer *b, int64_t slots, int64_t index_num)
{
    if (slots <= 0 || index_num <= 1 || slots > INT_MAX32 || index_num > INT_MAX32)
        return value_error("index file: bad geometry");
    if (b->len < HEADER_SIZE + slots * 4 + index_num * ITEM_SIZE)
        return value_error("index file: the buffer is smaller than its geometry");
    return 0;
}

#define PREFETCH_AHEAD 16

/* bulk_put(buf, slots, index_num, header int64[6], key_hash int32[n], phy int64[n], ts int64[n],
 * start) -> keys put */
static PyObject *bulk_put(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 8, "bulk_put(buf, slots, index_num, header, key_hash, phy, ts, start)") < 0) return NULL;
    int64_t slots, index_num, start;
    if (mq_get_i64(args[1], &slots) < 0 || mq_get_i64(args[2], &index_num) < 0 || mq_get_i64(args[7], &start) < 0)
        return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *b, *hd, *khv, *phv, *tsv;
    if (!(b = mq_views_add(&vs, args[0], 0, 1, "buf")) || !(hd = mq_views_add(&vs, args[3], 8, 1, "header")) ||
        !(khv = mq_views_add(&vs, args[4], 4, 0, "key_hash")) || !(phv = mq_views_add(&vs, args[5], 8, 0, "phy")) ||
        !(tsv = mq_views_add(&vs, args[6], 8, 0, "ts")))
        goto fail;
    if (check_file(b, slots, index_num) < 0) goto fail;
    int64_t n = mq_len(khv);
    if (mq_len(hd) != 6 || mq_len(phv) != n || mq_len(tsv) != n || start < 0 || start > n) {
        value_error("bulk_put: bad header or key arrays");
        goto fail;
    }
    uint8_t *a = b->buf;
    int64_t *header = hd->buf;
    const int32_t *kh = khv->buf;
    const int64_t *phy = phv->buf, *ts = tsv->buf;
    int64_t begin_ts = header[0], end_ts = header[1], begin_phy = header[2], end_phy = header[3];
    int64_t hsc = header[4], ic = header[5];
    if (ic < 1) {
        value_error("bulk_put: indexCount below 1");
        goto fail;
    }
    int64_t i = start;
    Py_BEGIN_ALLOW_THREADS
    uint8_t *slot0 = a + HEADER_SIZE;
    uint8_t *items = slot0 + slots * 4;
    int wrote_begin = 0, wrote_hsc = 0;
    while (i < n && ic < index_num) {
        if (i + PREFETCH_AHEAD < n) __builtin_prefetch(slot0 + 4 * slot_of(kh[i + PREFETCH_AHEAD], slots), 1);
        int32_t h = kh[i];
        uint8_t *sp = slot0 + 4 * slot_of(h, slots);
        int64_t sv = mq_be32(sp);
        if (sv <= 0 || sv > ic) sv = 0;
        int64_t t = ts[i], p = phy[i];
        uint8_t *it = items + ic * ITEM_SIZE;
        mq_put_be32(it, h);
        mq_put_be64(it + 4, p);
        mq_put_be32(it + 12, (int32_t)time_diff(t, begin_ts));
        mq_put_be32(it + 16, (int32_t)sv);
        mq_put_be32(sp, (int32_t)ic);
        if (ic <= 1) {
            begin_phy = p;
            begin_ts = t;
            wrote_begin = 1;
        }
        if (sv == 0) {
            hsc++;
            wrote_hsc = 1;
        }
        ic++;
        end_phy = p;
        end_ts = t;
        i++;
    }
    if (i > start) { /* header write-through (only the fields putKey touched), the count last */
        if (wrote_begin) {
            mq_put_be64(a + 16, begin_phy);
            mq_put_be64(a, begin_ts);
        }
        if (wrote_hsc) mq_put_be32(a + 32, (int32_t)hsc);
        mq_put_be64(a + 24, end_phy);
        mq_put_be64(a + 8, end_ts);
        mq_put_be32(a + 36, (int32_t)ic);
    }
    Py_END_ALLOW_THREADS
    header[0] = begin_ts;
    header[1] = end_ts;
    header[2] = begin_phy;
    header[3] = end_phy;
    header[4] = hsc;
    header[5] = ic;
    mq_views_release(&vs);
    return PyLong_FromLongLong(i - start);
fail:
    mq_views_release(&vs);
    return NULL;
}

/* slots_of(key_hash int32, start, j0, j1, slots, out int32): out[j] = slot of key start + j */
static PyObject *slots_of(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 6, "slots_of(key_hash, start, j0, j1, slots, out)") < 0) return NULL;
    int64_t start, j0, j1, slots;
    if (mq_get_i64(args[1], &start) < 0 || mq_get_i64(args[2], &j0) < 0 || mq_get_i64(args[3], &j1) < 0 ||
        mq_get_i64(args[4], &slots) < 0)
        return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *khv, *o;
    if (!(khv = mq_views_add(&vs, args[0], 4, 0, "key_hash")) || !(o = mq_views_add(&vs, args[5], 4, 1, "out"))) goto fail;
    if (slots <= 0 || start < 0 || j0 < 0 || j1 < j0 || j1 > mq_len(o) || start + j1 > mq_len(khv)) {
        value_error("slots_of: range outside the arrays");
        goto fail;
    }
    const int32_t *kh = khv->buf;
    int32_t *out = o->buf;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t j = j0; j < j1; j++) out[j] = (int32_t)slot_of(kh[start + j], slots);
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    Py_RETURN_NONE;
fail:
    mq_views_release(&vs);
    return NULL;
}

/* slot_phase(buf, slots, ic0, sl int32[m], lo, hi, key_bounds int64[nb], prev_out int32[m],
 * marks int64[nb]) -> new slots: the part owning the slots lo <= s < hi (see index_build) */
static PyObject *slot_phase(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 9, "slot_phase(buf, slots, ic0, sl, lo, hi, key_bounds, prev_out, marks)") < 0) return NULL;
    int64_t slots, ic0, lo, hi;
    if (mq_get_i64(args[1], &slots) < 0 || mq_get_i64(args[2], &ic0) < 0 || mq_get_i64(args[4], &lo) < 0 ||
        mq_get_i64(args[5], &hi) < 0)
        return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *b, *slv, *kbv, *pov, *mkv;
    if (!(b = mq_views_add(&vs, args[0], 0, 1, "buf")) || !(slv = mq_views_add(&vs, args[3], 4, 0, "sl")) ||
        !(kbv = mq_views_add(&vs, args[6], 8, 0, "key_bounds")) || !(pov = mq_views_add(&vs, args[7], 4, 1, "prev_out")) ||
        !(mkv = mq_views_add(&vs, args[8], 8, 1, "marks")))
        goto fail;
    int64_t m = mq_len(slv), nb = mq_len(kbv);
    if (slots <= 0 || lo < 0 || hi < lo || hi > slots || b->len < HEADER_SIZE + 4 * slots || mq_len(pov) < m ||
        mq_len(mkv) < nb || ic0 < 0 || ic0 + m > INT_MAX32) {
        value_error("slot_phase: arguments outside the file or arrays");
        goto fail;
    }
    uint8_t *slot0 = (uint8_t *)b->buf + HEADER_SIZE;
    const int32_t *sl = slv->buf;
    const int64_t *kb = kbv->buf;
    int32_t *own = pov->buf; /* the part's key list lives in prev_out until each entry is replaced */
    int64_t *marks = mkv->buf;
    int64_t new_slots = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t c = 0, k = 0;
    for (int64_t j = 0; j < m; j++) {
        while (k < nb && kb[k] == j) marks[k++] = c;
        int64_t s = sl[j];
        own[c] = (int32_t)j;
        c += (s >= lo) & (s < hi);
    }
    while (k < nb) marks[k++] = c;
    for (int64_t q = 0; q < c; q++) {
        if (q + PREFETCH_AHEAD < c) __builtin_prefetch(slot0 + 4 * (int64_t)sl[own[q + PREFETCH_AHEAD]], 1);
        int64_t j = own[q];
        uint8_t *sp = slot0 + 4 * (int64_t)sl[j];
        int64_t ic = ic0 + j;
        int64_t sv = mq_be32(sp);
        if (sv <= 0 || sv > ic) {
            sv = 0;
            new_slots++;
        }
        own[q] = (int32_t)sv;
        mq_put_be32(sp, (int32_t)ic);
    }
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    return PyLong_FromLongLong(new_slots);
fail:
    mq_views_release(&vs);
    return NULL;
}

/* item_phase(buf, slots, index_num, begin_ts, ic0, key_hash, phy, ts, start, j0, j1, sl, bounds
 * int64[parts + 1], prevs int32[parts, m], cursors int64[parts]): the items of keys j0 <= j < j1 */
static PyObject *item_phase(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 15, "item_phase(buf, slots, index_num, begin_ts, ic0, key_hash, phy, ts, start, j0, j1, "
                               "sl, bounds, prevs, cursors)") < 0)
        return NULL;
    int64_t slots, index_num, begin_ts, ic0, start, j0, j1;
    if (mq_get_i64(args[1], &slots) < 0 || mq_get_i64(args[2], &index_num) < 0 || mq_get_i64(args[3], &begin_ts) < 0 ||
        mq_get_i64(args[4], &ic0) < 0 || mq_get_i64(args[8], &start) < 0 || mq_get_i64(args[9], &j0) < 0 ||
        mq_get_i64(args[10], &j1) < 0)
        return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *b, *khv, *phv, *tsv, *slv, *bdv, *prv, *cuv;
    if (!(b = mq_views_add(&vs, args[0], 0, 1, "buf")) || !(khv = mq_views_add(&vs, args[5], 4, 0, "key_hash")) ||
        !(phv = mq_views_add(&vs, args[6], 8, 0, "phy")) || !(tsv = mq_views_add(&vs, args[7], 8, 0, "ts")) ||
        !(slv = mq_views_add(&vs, args[11], 4, 0, "sl")) || !(bdv = mq_views_add(&vs, args[12], 8, 0, "bounds")) ||
        !(prv = mq_views_add(&vs, args[13], 4, 0, "prevs")) || !(cuv = mq_views_add(&vs, args[14], 8, 1, "cursors")))
        goto fail;
    if (check_file(b, slots, index_num) < 0) goto fail;
    int64_t n = mq_len(khv), m = mq_len(slv), parts = mq_len(bdv) - 1;
    if (mq_len(phv) != n || mq_len(tsv) != n || start < 0 || j0 < 0 || j1 < j0 || j1 > m || start + j1 > n ||
        ic0 < 1 || ic0 + j1 > index_num || parts < 1 || mq_len(prv) < parts * m || mq_len(cuv) < parts) {
        value_error("item_phase: arguments outside the file or arrays");
        goto fail;
    }
    uint8_t *items = (uint8_t *)b->buf + HEADER_SIZE + slots * 4;
    const int32_t *kh = khv->buf, *sl = slv->buf, *prevs = prv->buf;
    const int64_t *phy = phv->buf, *ts = tsv->buf, *bounds = bdv->buf;
    int64_t *cursors = cuv->buf;
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t j = j0; j < j1; j++) {
        int64_t i = start + j, s = sl[j], p = 0;
        while (p + 1 < parts && s >= bounds[p + 1]) p++;
        int64_t c = cursors[p];
        if (c < 0 || c >= m) {
            bad = 1;
            break;
        }
        int32_t sv = prevs[p * m + c];
        cursors[p] = c + 1;
        uint8_t *it = items + (ic0 + j) * ITEM_SIZE;
        mq_put_be32(it, kh[i]);
        mq_put_be64(it + 4, phy[i]);
        mq_put_be32(it + 12, (int32_t)time_diff(ts[i], begin_ts));
        mq_put_be32(it + 16, sv);
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        value_error("item_phase: a slot range's list ran out (inconsistent slot phase)");
        goto fail;
    }
    mq_views_release(&vs);
    Py_RETURN_NONE;
fail:
    mq_views_release(&vs);
    return NULL;
}

/* index_keys(key_row int64[k], key_hash int32[k], sys_flag int32[n], offsets int64[n], store_ts int64[n],
 * resume_offset, resume_skip, out_hash int32[k], out_off int64[k], out_ts int64[k]) -> keys selected:
 * the keys a dispatch batch puts into the IndexFiles (IndexService.build): not of a ROLLBACK
 * message, and past the resume point (offsets below resume_offset skipped, and the first
 * resume_skip keys at resume_offset), with their record's offset and store time. */
static PyObject *index_keys(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 10, "index_keys(key_row, key_hash, sys_flag, offsets, store_ts, resume_offset, resume_skip, "
                               "out_hash, out_off, out_ts)") < 0)
        return NULL;
    int64_t resume, skip;
    if (mq_get_i64(args[5], &resume) < 0 || mq_get_i64(args[6], &skip) < 0) return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *kr, *kh, *sf, *of, *st, *oh, *oo, *ot;
    if (!(kr = mq_views_add(&vs, args[0], 8, 0, "key_row")) || !(kh = mq_views_add(&vs, args[1], 4, 0, "key_hash")) ||
        !(sf = mq_views_add(&vs, args[2], 4, 0, "sys_flag")) || !(of = mq_views_add(&vs, args[3], 8, 0, "offsets")) ||
        !(st = mq_views_add(&vs, args[4], 8, 0, "store_ts")) || !(oh = mq_views_add(&vs, args[7], 4, 1, "out_hash")) ||
        !(oo = mq_views_add(&vs, args[8], 8, 1, "out_off")) || !(ot = mq_views_add(&vs, args[9], 8, 1, "out_ts")))
        goto fail;
    int64_t k = mq_len(kr), n = mq_len(sf);
    if (mq_len(kh) != k || mq_len(of) != n || mq_len(st) != n || mq_len(oh) < k || mq_len(oo) < k || mq_len(ot) < k) {
        value_error("index_keys: column lengths differ");
        goto fail;
    }
    const int64_t *rows = kr->buf, *offs = of->buf, *tsv = st->buf;
    const int32_t *hv = kh->buf, *sys = sf->buf;
    int32_t *out_h = oh->buf;
    int64_t *out_o = oo->buf, *out_t = ot->buf;
    int64_t m = 0, bad = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t skipped = 0;
    for (int64_t i = 0; i < k; i++) {
        int64_t r = rows[i];
        if (r < 0 || r >= n) {
            bad = 1;
            break;
        }
        if ((sys[r] & 0xC) == 0xC) continue; /* TRANSACTION_ROLLBACK_TYPE: never indexed */
        int64_t off = offs[r];
        if (resume >= 0) {
            if (off < resume) continue;
            if (off == resume && skipped < skip) {
                skipped++;
                continue;
            }
        }
        out_h[m] = hv[i];
        out_o[m] = off;
        out_t[m] = tsv[r];
        m++;
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        value_error("index_keys: a key row outside the batch");
        goto fail;
    }
    mq_views_release(&vs);
    return PyLong_FromLongLong(m);
fail:
    mq_views_release(&vs);
    return NULL;
}

/* ---------------------------------------------------------------- verify: IndexFile items */

static void locate_run(const int64_t *a, int64_t n, const int64_t *x, int64_t m, int64_t *out)
{
    int64_t cur = 0, prev = INT64_MIN;
    for (int64_t k = 0; k < m; k++) out[k] = mq_locate(a, n, x[k], &cur, &prev);
}

/* locate(starts int64[>= n], n, offsets int64[m], out int64[m]) */
static PyObject *locate(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 4, "locate(starts, n, offsets, out)") < 0) return NULL;
    int64_t n;
    if (mq_get_i64(args[1], &n) < 0) return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *a, *x, *o;
    if (!(a = mq_views_add(&vs, args[0], 8, 0, "starts")) || !(x = mq_views_add(&vs, args[2], 8, 0, "offsets")) ||
        !(o = mq_views_add(&vs, args[3], 8, 1, "out")))
        goto fail;
    if (n < 0 || n > mq_len(a) || mq_len(o) < mq_len(x)) {
        value_error("locate: bad lengths");
        goto fail;
    }
    const int64_t *av = a->buf, *xv = x->buf;
    int64_t *ov = o->buf, m = mq_len(x);
    Py_BEGIN_ALLOW_THREADS
    locate_run(av, n, xv, m, ov);
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    Py_RETURN_NONE;
fail:
    mq_views_release(&vs);
    return NULL;
}

/* check_items(items u8 (20 bytes each), count, begin_ts, cl_min, starts int64[>= n], n, key_splits
 * int64[n + 1], keys int64 (the low 32 bits: a key hash), store_ts int64[>= n], codes uint8[count],
 * first_item) -> items with a code; the items are numbered from first_item.
 * Codes (bits): 1 live item not at a record with keys, 2 its hash is none of the record's keys,
 * 4 its time difference is not the record's, 8 its link is not older, 16 negative time difference. */
static PyObject *check_items(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 11, "check_items(items, count, begin_ts, cl_min, starts, n, key_splits, keys, store_ts, "
                               "codes, first_item)") < 0)
        return NULL;
    int64_t count, begin_ts, cl_min, n, first_item;
    if (mq_get_i64(args[1], &count) < 0 || mq_get_i64(args[2], &begin_ts) < 0 || mq_get_i64(args[3], &cl_min) < 0 ||
        mq_get_i64(args[5], &n) < 0 || mq_get_i64(args[10], &first_item) < 0)
        return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *it, *st, *ks, *kv, *tv, *cv;
    if (!(it = mq_views_add(&vs, args[0], 0, 0, "items")) || !(st = mq_views_add(&vs, args[4], 8, 0, "starts")) ||
        !(ks = mq_views_add(&vs, args[6], 8, 0, "key_splits")) || !(kv = mq_views_add(&vs, args[7], 8, 0, "keys")) ||
        !(tv = mq_views_add(&vs, args[8], 8, 0, "store_ts")) || !(cv = mq_views_add(&vs, args[9], 1, 1, "codes")))
        goto fail;
    if (count < 0 || it->len < count * ITEM_SIZE || n < 0 || mq_len(st) < n || mq_len(ks) < n + 1 ||
        mq_len(tv) < n || mq_len(cv) < count) {
        value_error("check_items: bad lengths");
        goto fail;
    }
    const int64_t *splits = ks->buf;
    int64_t nkeys = mq_len(kv);
    for (int64_t r = 0; r <= n; r++) { /* the key ranges must lie in keys, ascending */
        if (splits[r] < 0 || splits[r] > nkeys || (r && splits[r] < splits[r - 1])) {
            value_error("check_items: key_splits outside keys");
            goto fail;
        }
    }
    const uint8_t *items = it->buf;
    const int64_t *starts = st->buf, *sts = tv->buf;
    const int64_t *keys = kv->buf;
    uint8_t *codes = cv->buf;
    int64_t bad = 0;
    Py_BEGIN_ALLOW_THREADS
    int64_t cur = 0, prev_phy = INT64_MIN;
    for (int64_t k = 0; k < count; k++) {
        const uint8_t *p = items + k * ITEM_SIZE;
        int32_t h = mq_be32(p);
        int64_t phy = mq_be64(p + 4);
        int64_t diff = mq_be32(p + 12), link = mq_be32(p + 16), item = first_item + k;
        uint8_t c = 0;
        if (phy >= cl_min) {
            int64_t r = mq_locate(starts, n, phy, &cur, &prev_phy);
            if (r >= n || starts[r] != phy || splits[r + 1] == splits[r]) {
                c |= 1;
            } else {
                int hit = 0;
                for (int64_t q = splits[r]; q < splits[r + 1]; q++) hit |= (int32_t)(uint32_t)(uint64_t)keys[q] == h;
                if (!hit) c |= 2;
                else if (item >= 2 && diff != time_diff(sts[r], begin_ts)) c |= 4;
            }
        }
        if (link < 0 || link >= item) c |= 8;
        if (diff < 0) c |= 16;
        codes[k] = c;
        bad += c != 0;
    }
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    return PyLong_FromLongLong(bad);
fail:
    mq_views_release(&vs);
    return NULL;
}

/* ---------------------------------------------------------------- module */

#define FAST(name, doc) {#name, (PyCFunction)(void (*)(void))name, METH_FASTCALL, doc}

static PyMethodDef methods[] = {
    MQ_BIND_CHECKSUMS_METHOD,
    FAST(hash_spans, "hash_spans(buf, starts, lens, out): Java String.hashCode of each UTF-8 span"),
    FAST(index_hash_spans, "index_hash_spans(buf, ts, tl, ks, kl, out): IndexFile hash of topic#key per row"),
    FAST(prefix_hash_spans, "prefix_hash_spans(buf, starts, lens, prefix, out): IndexFile hash continued from prefix"),
    FAST(hash_joined, "hash_joined(kbuf, kstarts, prefix, out): IndexFile hash of \\0-joined keys"),
    FAST(bulk_put, "bulk_put(buf, slots, index_num, header, key_hash, phy, ts, start) -> keys put"),
    FAST(slots_of, "slots_of(key_hash, start, j0, j1, slots, out): hash slots of keys"),
    FAST(slot_phase, "slot_phase(buf, slots, ic0, sl, lo, hi, key_bounds, prev_out, marks) -> new slots"),
    FAST(item_phase, "item_phase(buf, slots, index_num, begin_ts, ic0, key_hash, phy, ts, start, j0, j1, sl, bounds, "
                     "prevs, cursors)"),
    FAST(index_keys, "index_keys(key_row, key_hash, sys_flag, offsets, store_ts, resume_offset, resume_skip, out_hash, "
                     "out_off, out_ts) -> keys selected"),
    FAST(locate, "locate(starts, n, offsets, out): lower bound of each offset in the ascending starts[:n]"),
    FAST(check_items, "check_items(items, count, begin_ts, cl_min, starts, n, key_splits, keys, store_ts, codes, "
                      "first_item) -> items with a code"),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nat_rmq_index",
                                    "RocketMQ key hashes and IndexFile bulk build (native)", -1, methods};

PyMODINIT_FUNC PyInit__nat_rmq_index(void)
{
    mq_init_checksums(NULL);
    return PyModule_Create(&module);
}
