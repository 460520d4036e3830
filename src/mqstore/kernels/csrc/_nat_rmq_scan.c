/* mqstore.kernels._nat_rmq_scan: the CommitLog dispatch scan and record framing in C (the native
 * twins of mqstore/kernels/rocketmq/scan_nb.py and framing_nb.py).
 *
 * scan() is one pass over the records of a byte range of a segment: the dispatch columns, topic
 * ids (first appearance), the IndexFile hashes of topic#UNIQ_KEY and topic#KEYS pieces, tags codes
 * (delay-topic deliver times included), multi-dispatch spans and, when asked, the body CRC of every
 * record checked inline (the numba pass collects the spans and checks them afterwards; the first
 * mismatch cuts both at the same record). */
#include "mq_rmq.h"

#define NVIEWS 21

/* How far ahead of the record being scanned the data is prefetched.  The scan reads each
 * record's header and then its tail (topic, properties) past the body: two cache misses per record
 * that the hardware prefetcher does not hide (it stops at page boundaries and the jumps are
 * irregular); streaming the lines ahead of the scan turns them into hits (measured: the load of
 * the topic length was 38% of the kernel's time without it). */
#define MQ_PREFETCH_AHEAD 4096

/* slots of the scan's cache of recent topics (2^bits) */
#define TOPIC_CACHE_BITS 6

/* scan(buf, base, start, end, check_crc, skip_mismatch, max_records, delay_ms, max_level, delay_ok,
 *      sched, off, size, qid, qoff, sysf, ts, tags, topic_id, rep_s, rep_l, table, key_row,
 *      key_hash, fallback, multi, mspan, skip_pos, skip_total, skip_computed[, with_keys[, with_columns]])
 * -> (n, pos, state, topics, skips, keys, fallbacks, 0, multis)
 * with_keys (default true) false: no index keys are hashed or written (a reader that does not use
 * them, the dump); everything else is the same.  with_columns (default true) false: only off and
 * size are written for a record (no properties, topic, tags or keys: the other outputs are left
 * as they are and the counts of topics, keys, fallbacks and multis are 0): the framing, CRC and
 * length checks, stops and skips are the same. */
static PyObject *scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs < 30 || nargs > 32) {
        PyErr_SetString(PyExc_TypeError, "scan: expected 30 to 32 arguments");
        return NULL;
    }
    int64_t base = mq_i64(args[1]), start = mq_i64(args[2]), end = mq_i64(args[3]);
    int with_keys = nargs >= 31 ? PyObject_IsTrue(args[30]) : 1;
    int with_columns = nargs >= 32 ? PyObject_IsTrue(args[31]) : 1;
    int check_crc = PyObject_IsTrue(args[4]), skip_mismatch = PyObject_IsTrue(args[5]);
    int64_t max_records = mq_i64(args[6]);
    int64_t max_level = mq_i64(args[8]);
    int delay_ok = PyObject_IsTrue(args[9]);
    if (PyErr_Occurred()) return NULL;

    /* views: 0 buf, 1 delay_ms, 2 sched, 3.. the outputs */
    static const int arg_of[NVIEWS] = {0, 7, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28};
    static const int size_of[NVIEWS] = {0, 8, 0, 8, 4, 4, 8, 4, 8, 8, 4, 8, 8, 8, 8, 4, 8, 8, 8, 8, 8};
    static const char *name_of[NVIEWS] = {"buf", "delay_ms", "sched", "off", "size", "qid", "qoff", "sysf", "ts",
                                          "tags", "topic_id", "rep_s", "rep_l", "table", "key_row", "key_hash",
                                          "fallback", "multi", "mspan", "skip_pos", "skip_total"};
    Py_buffer v[NVIEWS + 1];
    int got = 0;
    for (; got < NVIEWS; got++)
        if (mq_view(args[arg_of[got]], &v[got], size_of[got], got >= 3, name_of[got]) < 0) goto fail;
    if (mq_view(args[29], &v[NVIEWS], 8, 1, "skip_computed") < 0) goto fail;
    got++;

    const uint8_t *buf = (const uint8_t *)v[0].buf;
    const int64_t *delay_ms = (const int64_t *)v[1].buf;
    Py_ssize_t ndelay = mq_len(&v[1]);
    const uint8_t *sched = (const uint8_t *)v[2].buf;
    int64_t sched_len = (int64_t)v[2].len;
    int64_t *off = v[3].buf, *qoff = v[6].buf, *ts = v[8].buf, *tags = v[9].buf;
    int32_t *size = v[4].buf, *qid = v[5].buf, *sysf = v[7].buf, *topic_id = v[10].buf;
    int64_t *rep_s = v[11].buf, *rep_l = v[12].buf, *table = v[13].buf, *key_row = v[14].buf;
    int32_t *key_hash = v[15].buf;
    int64_t *fallback = v[16].buf, *multi = v[17].buf, *mspan = v[18].buf;
    int64_t *skip_pos = v[19].buf, *skip_total = v[20].buf, *skip_computed = v[NVIEWS].buf;
    Py_ssize_t cap = mq_len(&v[3]);
    Py_ssize_t kcap = mq_len(&v[14]);
    Py_ssize_t tcap = mq_len(&v[11]);
    Py_ssize_t tsize = mq_len(&v[13]);
    int bad_shape = start < 0 || end > (int64_t)v[0].len || start > end || tsize < 1 || (tsize & (tsize - 1)) ||
                    mq_len(&v[12]) < tcap || mq_len(&v[15]) < kcap || mq_len(&v[16]) < cap || mq_len(&v[17]) < cap ||
                    mq_len(&v[18]) < 4 * cap || mq_len(&v[19]) < cap || mq_len(&v[20]) < cap ||
                    mq_len(&v[NVIEWS]) < cap;
    for (int k = 4; k <= 10; k++) bad_shape |= mq_len(&v[k]) < cap;
    if (bad_shape) {
        PyErr_SetString(PyExc_ValueError, "scan: range outside the buffer or output arrays of mismatched sizes");
        goto fail;
    }

    int64_t n = 0, nt = 0, ns = 0, nk = 0, nf = 0, nm = 0;
    int64_t pos = start;
    int state = MQ_ST_RANGE;
    uint64_t mask = (uint64_t)tsize - 1;
    int64_t tc_tid[1 << TOPIC_CACHE_BITS]; /* the topic cache: id (-1: none) and hash state */
    uint32_t tc_st[1 << TOPIC_CACHE_BITS];
    for (int i = 0; i < (1 << TOPIC_CACHE_BITS); i++) tc_tid[i] = -1;
    int64_t props[MQ_PROP_SPANS];
    int64_t pf = start;  /* the next byte to prefetch */

    Py_BEGIN_ALLOW_THREADS
    while (pos < end) {
        if (max_records >= 0 && n >= max_records) { state = MQ_ST_LIMIT; break; }
        if (n >= cap || ns >= cap || nt >= tcap) { state = MQ_ST_FULL; break; }
        int64_t want = end - pos > MQ_PREFETCH_AHEAD ? pos + MQ_PREFETCH_AHEAD : end;
        if (pf < pos) pf = pos;
        for (; pf < want; pf += 64) __builtin_prefetch(buf + pf, 0, 0);
        int64_t total;
        int hs = mq_rmq_head(buf, pos, end, MQ_FIXED_MIN, &total);
        if (hs != MQ_ST_OK) { state = hs; break; }
        int64_t rend = pos + total;
        int32_t magic = mq_be32(buf + pos + 4);
        int64_t f[MQ_N_FIELDS];
        int64_t computed = mq_record_spans(buf, pos, rend, magic, f);
        if (computed < 0) { state = MQ_ST_BAD; break; }
        int64_t bs = f[MQ_F_BODY_START], body_len = f[MQ_F_BODY_LEN], tps = f[MQ_F_TOPIC_START], tl = f[MQ_F_TOPIC_LEN];
        int64_t pps = f[MQ_F_PROPS_START], pl = f[MQ_F_PROPS_LEN], bw = f[MQ_F_BORN_HOST_WIDTH];
        int32_t sys = mq_be32(buf + pos + 36);
        if (computed != total && !skip_mismatch) { state = MQ_ST_BAD; break; }
        if (check_crc) {
            uint32_t crc = mq_crc32(0, buf + bs, (size_t)body_len);
            if ((int64_t)(crc & 0x7FFFFFFFu) != (int64_t)mq_be32(buf + pos + 8)) { state = MQ_ST_BAD; break; }
        }
        if (computed != total) {
            skip_pos[ns] = base + pos;
            skip_total[ns] = total;
            skip_computed[ns] = computed;
            ns++;
            pos += total;
            continue;
        }
        if (!with_columns) {  /* where the records are, nothing more */
            off[n] = base + pos;
            size[n] = (int32_t)total;
            n++;
            pos += total;
            continue;
        }
        /* a valid record: its properties first (the key count decides whether it fits) */
        mq_prop_spans(buf, pps, pps + pl, props);
        int64_t k = 0;
        if (with_keys) {
            int64_t u = props[MQ_P_UNIQ] >= 0 ? 1 : 0;
            k = u;
            if (props[MQ_P_KEYS] >= 0) {
                /* the KEYS value of kl bytes holds at most (kl + 1) / 2 non-empty pieces: the pieces
                 * are counted (a pass over the value) only when that bound does not fit */
                k += (props[MQ_P_KEYS + 1] - props[MQ_P_KEYS] + 1) / 2;
                if (nk + k > kcap) k = u + mq_count_pieces(buf, props[MQ_P_KEYS], props[MQ_P_KEYS + 1]);
            }
        }
        if (nk + k > kcap) { state = MQ_ST_FULL; break; }
        int64_t store_ts = mq_be64(buf + pos + 48 + bw);
        off[n] = base + pos;
        size[n] = (int32_t)total;
        qid[n] = mq_be32(buf + pos + 12);
        qoff[n] = mq_be64(buf + pos + 20);
        sysf[n] = sys;
        ts[n] = store_ts;
        /* topic: Java hash state (continued by the index keys) and its id; a topic seen lately is
         * found in the small cache by its length and first/last 8 bytes (then compared whole), its
         * state with it: no hash over its bytes and no table probe */
        uint64_t w = 0, w2 = 0;
        memcpy(&w, buf + tps, (size_t)(tl < 8 ? tl : 8));
        if (tl > 8) memcpy(&w2, buf + tps + tl - 8, 8);
        uint64_t ck = ((w ^ (w2 * 0xC2B2AE3D27D4EB4Full) ^ ((uint64_t)tl * 0x9E3779B97F4A7C15ull)) *
                       0xFF51AFD7ED558CCDull) >> (64 - TOPIC_CACHE_BITS);
        int64_t tid = tc_tid[ck];
        uint32_t st;
        if (tid >= 0 && rep_l[tid] == tl && memcmp(buf + rep_s[tid], buf + tps, (size_t)tl) == 0) {
            st = tc_st[ck];
        } else {
            st = mq_hash_continue(buf, tps, tps + tl, 0);
            uint64_t slot = (((uint64_t)st * 0x9E3779B97F4A7C15ull) >> 33) & mask;
            for (;;) {
                int64_t t = table[slot];
                if (t < 0) {
                    tid = nt;
                    rep_s[nt] = tps;
                    rep_l[nt] = tl;
                    table[slot] = nt;
                    nt++;
                    break;
                }
                if (rep_l[t] == tl && memcmp(buf + rep_s[t], buf + tps, (size_t)tl) == 0) {
                    tid = t;
                    break;
                }
                slot = (slot + 1) & mask;
            }
            tc_tid[ck] = tid;
            tc_st[ck] = st;
        }
        topic_id[n] = (int32_t)tid;
        /* index keys: topic#uniq first, then every non-empty KEYS piece */
        uint32_t h0 = st * 31u + 35u;  /* the state of "topic#" */
        if (with_keys && props[MQ_P_UNIQ] >= 0) {
            key_row[nk] = n;
            key_hash[nk] = (int32_t)mq_index_hash_of_state(mq_hash_continue(buf, props[MQ_P_UNIQ], props[MQ_P_UNIQ + 1], h0));
            nk++;
        }
        if (with_keys && props[MQ_P_KEYS] >= 0) {
            int64_t i = props[MQ_P_KEYS], e = props[MQ_P_KEYS + 1];
            while (i < e) {
                const uint8_t *sp = memchr(buf + i, ' ', (size_t)(e - i));
                int64_t j = sp ? (int64_t)(sp - buf) : e;
                if (j > i) {
                    key_row[nk] = n;
                    key_hash[nk] = (int32_t)mq_index_hash_of_state(mq_hash_continue(buf, i, j, h0));
                    nk++;
                }
                i = j + 1;
            }
        }
        /* tagsCode (the delay topic: the deliver time) */
        int64_t code = 0;
        int done = 0;
        if (props[MQ_P_DELAY] >= 0 && tl == sched_len && memcmp(buf + tps, sched, (size_t)tl) == 0) {
            int64_t ds = props[MQ_P_DELAY], dl = props[MQ_P_DELAY + 1] - ds;
            int digits = delay_ok && dl >= 1 && dl <= 18;
            int64_t level = 0;
            if (digits) {
                for (int64_t q = ds; q < ds + dl; q++) {
                    int64_t d = (int64_t)buf[q] - 48;
                    if (d < 0 || d > 9) { digits = 0; break; }
                    level = level * 10 + d;
                }
            }
            if (!digits) {
                fallback[nf++] = n;
                done = 1;
            } else {
                if (level > max_level) level = max_level;
                if (level > 0) {
                    int64_t dm = 1000;
                    if (level < ndelay && delay_ms[level] >= 0) dm = delay_ms[level];
                    code = store_ts + dm;
                    done = 1;
                }
            }
        }
        if (!done && props[MQ_P_TAGS] >= 0)
            code = mq_state_to_int32(mq_hash_continue(buf, props[MQ_P_TAGS], props[MQ_P_TAGS + 1], 0));
        tags[n] = code;
        if (props[MQ_P_MULTI] >= 0) {
            multi[nm] = n;
            mspan[4 * nm] = props[MQ_P_MULTI];
            mspan[4 * nm + 1] = props[MQ_P_MULTI + 1];
            mspan[4 * nm + 2] = props[MQ_P_MQOFF];
            mspan[4 * nm + 3] = props[MQ_P_MQOFF + 1];
            nm++;
        }
        n++;
        pos += total;
    }
    Py_END_ALLOW_THREADS

    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    return Py_BuildValue("(LLiLLLLiL)", (long long)n, (long long)pos, state, (long long)nt, (long long)ns,
                         (long long)nk, (long long)nf, 0, (long long)nm);
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    return NULL;
}

/* valid_end(buf, start, end, check_crc) -> (stop position, state): scan() without outputs and
 * without skipping length mismatches (recovery's walk: where the valid records end).  The same
 * checks in the same order as scan() with skip_mismatch false: framing, field lengths, TOTALSIZE
 * against the fields, body CRC. */
static PyObject *valid_end(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "valid_end(buf, start, end, check_crc)");
        return NULL;
    }
    int64_t start = mq_i64(args[1]), end = mq_i64(args[2]);
    int check_crc = PyObject_IsTrue(args[3]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer b;
    if (mq_view(args[0], &b, 0, 0, "buf") < 0) return NULL;
    if (start < 0 || end > (int64_t)b.len || start > end) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "valid_end: range outside the buffer");
        return NULL;
    }
    const uint8_t *buf = b.buf;
    int64_t pos = start, pf = start;
    int state = MQ_ST_RANGE;
    Py_BEGIN_ALLOW_THREADS
    while (pos < end) {
        int64_t want = end - pos > MQ_PREFETCH_AHEAD ? pos + MQ_PREFETCH_AHEAD : end;
        if (pf < pos) pf = pos;
        for (; pf < want; pf += 64) __builtin_prefetch(buf + pf, 0, 0);
        int64_t total;
        int hs = mq_rmq_head(buf, pos, end, MQ_FIXED_MIN, &total);
        if (hs != MQ_ST_OK) { state = hs; break; }
        int64_t rend = pos + total;
        int64_t f[MQ_N_FIELDS];
        if (mq_record_spans(buf, pos, rend, mq_be32(buf + pos + 4), f) != total) { state = MQ_ST_BAD; break; }
        int64_t bs = f[MQ_F_BODY_START], body_len = f[MQ_F_BODY_LEN];
        if (check_crc) {
            uint32_t crc = mq_crc32(0, buf + bs, (size_t)body_len);
            if ((int64_t)(crc & 0x7FFFFFFFu) != (int64_t)mq_be32(buf + pos + 8)) { state = MQ_ST_BAD; break; }
        }
        pos += total;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return Py_BuildValue("(Li)", (long long)pos, state);
}

/* walk(buf, start, end, limit, pos_out int64, size_out int32, fill) -> (count, stop position, state):
 * the cheap boundary walk (TOTALSIZE and magic only) */
static PyObject *walk(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "walk(buf, start, end, limit, pos_out, size_out, fill)");
        return NULL;
    }
    int64_t start = mq_i64(args[1]), end = mq_i64(args[2]), limit = mq_i64(args[3]);
    int fill = PyObject_IsTrue(args[6]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer b, po, so;
    if (mq_view(args[0], &b, 0, 0, "buf") < 0) return NULL;
    if (mq_view(args[4], &po, 8, 1, "pos_out") < 0) goto e0;
    if (mq_view(args[5], &so, 4, 1, "size_out") < 0) goto e1;
    if (start < 0 || end > (int64_t)b.len || start > end) {
        PyErr_SetString(PyExc_ValueError, "walk: range outside the buffer");
        goto e2;
    }
    const uint8_t *buf = b.buf;
    int64_t *pos_out = po.buf;
    int32_t *size_out = so.buf;
    Py_ssize_t pcap = mq_len(&po) < mq_len(&so) ? mq_len(&po) : mq_len(&so);
    int64_t pos = start, n = 0;
    int state = MQ_ST_RANGE;
    Py_BEGIN_ALLOW_THREADS
    while (pos < end) {
        if (limit >= 0 && n >= limit) { state = MQ_ST_LIMIT; break; }
        int64_t total;
        int hs = mq_rmq_head(buf, pos, end, MQ_MIN_RECORD_SIZE, &total);
        if (hs != MQ_ST_OK) { state = hs; break; }
        if (fill) {
            if (n >= pcap) { state = MQ_ST_FULL; break; }
            pos_out[n] = pos;
            size_out[n] = (int32_t)total;
        }
        n++;
        pos += total;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&so);
    PyBuffer_Release(&po);
    PyBuffer_Release(&b);
    return Py_BuildValue("(LLi)", (long long)n, (long long)pos, state);
e2:
    PyBuffer_Release(&so);
e1:
    PyBuffer_Release(&po);
e0:
    PyBuffer_Release(&b);
    return NULL;
}

/* find_boundary(buf, base, p, end, limit) -> the first q >= p that looks like a message record
 * (v1/v2 magic, a TOTALSIZE that fits, PHYSICALOFFSET == base + q), or -1 within limit bytes */
static PyObject *find_boundary(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "find_boundary(buf, base, p, end, limit)");
        return NULL;
    }
    int64_t base = mq_i64(args[1]), p = mq_i64(args[2]), end = mq_i64(args[3]), limit = mq_i64(args[4]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer b;
    if (mq_view(args[0], &b, 0, 0, "buf") < 0) return NULL;
    if (end > (int64_t)b.len || p < 0) {
        PyBuffer_Release(&b);
        PyErr_SetString(PyExc_ValueError, "find_boundary: range outside the buffer");
        return NULL;
    }
    const uint8_t *buf = b.buf;
    int64_t stop = end - MQ_FIXED_MIN < p + limit ? end - MQ_FIXED_MIN : p + limit;
    int64_t found = -1;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t q = p; q <= stop; q++) {
        int32_t magic = mq_be32(buf + q + 4);
        if (magic == MQ_MAGIC_V1 || magic == MQ_MAGIC_V2) {
            int64_t total = mq_be32(buf + q);
            if (total >= MQ_FIXED_MIN && total <= end - q && mq_be64(buf + q + 28) == base + q) {
                found = q;
                break;
            }
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromLongLong((long long)found);
}

/* ---------------------------------------------------------------- ConsumeQueue units by queue */

static int cmp_group_key(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static inline uint64_t group_key(int32_t tid, int32_t qid) { return ((uint64_t)(uint32_t)tid << 32) | (uint32_t)qid; }

/* group_units(tid, qid, off, size, tags, rows, units, g_tid, g_qid, g_start, grp) -> groups
 *
 * The ConsumeQueue units of n rows grouped by queue (topic id, queue id), the groups in key order
 * (topic id, then queue id as unsigned 32 bits), the rows of a group in their order: rows[] the
 * rows so grouped, units[] their 20-byte units (big-endian CommitLog offset, size, tags code) in
 * the same order, group g being rows/units [g_start[g], g_start[g + 1]) of queue (g_tid[g],
 * g_qid[g]).  grp[] is scratch (n int32).  One pass to find the groups (the last group first, then
 * a hash table), one to place the rows. */
static PyObject *group_units(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 11, "group_units(tid, qid, off, size, tags, rows, units, g_tid, g_qid, g_start, grp)") < 0)
        return NULL;
    static const int size_of[11] = {4, 4, 8, 4, 8, 8, 0, 4, 4, 8, 4};
    static const char *name_of[11] = {"tid", "qid", "off", "size", "tags", "rows", "units", "g_tid", "g_qid",
                                      "g_start", "grp"};
    mq_views vs = {.n = 0};
    Py_buffer *v[11];
    for (int k = 0; k < 11; k++)
        if ((v[k] = mq_views_add(&vs, args[k], size_of[k], k >= 5, name_of[k])) == NULL) goto fail;
    Py_ssize_t n = mq_len(v[0]);
    int bad = mq_len(v[1]) != n || mq_len(v[2]) != n || mq_len(v[3]) != n || mq_len(v[4]) != n ||
              mq_len(v[5]) < n || v[6]->len < 20 * n || mq_len(v[7]) < n || mq_len(v[8]) < n ||
              mq_len(v[9]) < n + 1 || mq_len(v[10]) < n;
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "group_units: input columns of mismatched lengths or outputs too short");
        goto fail;
    }
    const int32_t *tid = v[0]->buf, *qid = v[1]->buf, *size = v[3]->buf;
    const int64_t *off = v[2]->buf, *tags = v[4]->buf;
    int64_t *rows = v[5]->buf, *g_start = v[9]->buf;
    uint8_t *units = v[6]->buf;
    int32_t *g_tid = v[7]->buf, *g_qid = v[8]->buf, *grp = v[10]->buf;

    int64_t tsize = 16;
    while (tsize < 2 * (int64_t)n) tsize <<= 1;
    int32_t *table = malloc((size_t)tsize * sizeof(int32_t));   /* group of a hash slot, -1: free */
    uint64_t *keys = malloc(((size_t)n + 1) * sizeof(uint64_t)); /* the key of each group */
    int64_t *where = malloc(((size_t)n + 1) * sizeof(int64_t));  /* a group's next row position */
    if (!table || !keys || !where) {
        free(table); free(keys); free(where);
        PyErr_NoMemory();
        goto fail;
    }
    int64_t ng = 0;
    Py_BEGIN_ALLOW_THREADS
    memset(table, 0xff, (size_t)tsize * sizeof(int32_t));
    uint64_t mask = (uint64_t)tsize - 1, last_key = 0;
    int32_t last_g = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        uint64_t key = group_key(tid[i], qid[i]);
        if (last_g < 0 || key != last_key) {
            uint64_t slot = ((key * 0x9E3779B97F4A7C15ull) >> 29) & mask;
            for (;;) {
                int32_t g = table[slot];
                if (g < 0) {
                    g = (int32_t)ng++;
                    table[slot] = g;
                    keys[g] = key;
                    where[g] = 0;
                    last_g = g;
                    break;
                }
                if (keys[g] == key) { last_g = g; break; }
                slot = (slot + 1) & mask;
            }
            last_key = key;
        }
        grp[i] = last_g;
        where[last_g]++;
    }
    /* key order: sort (key, group) pairs packed as the keys themselves, then map */
    uint64_t *sorted = (uint64_t *)rows; /* rows[] is free until the second pass: ng <= n */
    for (int64_t g = 0; g < ng; g++) sorted[g] = keys[g];
    qsort(sorted, (size_t)ng, sizeof(uint64_t), cmp_group_key);
    int64_t at = 0;
    for (int64_t r = 0; r < ng; r++) {
        uint64_t key = sorted[r];
        uint64_t slot = ((key * 0x9E3779B97F4A7C15ull) >> 29) & mask;
        while (keys[table[slot]] != key) slot = (slot + 1) & mask;
        int32_t g = table[slot];
        g_tid[r] = (int32_t)(key >> 32);
        g_qid[r] = (int32_t)(uint32_t)key;
        g_start[r] = at;
        int64_t c = where[g];
        where[g] = at;
        at += c;
    }
    g_start[ng] = at;
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t p = where[grp[i]]++;
        rows[p] = i;
        uint8_t *u = units + 20 * p;
        mq_put_be64(u, off[i]);
        mq_put_be32(u + 8, size[i]);
        mq_put_be64(u + 12, tags[i]);
    }
    Py_END_ALLOW_THREADS
    free(table); free(keys); free(where);
    mq_views_release(&vs);
    return PyLong_FromLongLong((long long)ng);
fail:
    mq_views_release(&vs);
    return NULL;
}

static PyMethodDef methods[] = {
    MQ_BIND_CHECKSUMS_METHOD,
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL, "the CommitLog dispatch scan of one range (see scan_nb)"},
    {"valid_end", (PyCFunction)(void (*)(void))valid_end, METH_FASTCALL,
     "where the valid records of a range end (recovery's walk, see scan.valid_end)"},
    {"walk", (PyCFunction)(void (*)(void))walk, METH_FASTCALL, "the cheap TOTALSIZE walk (see framing_nb.walk)"},
    {"find_boundary", (PyCFunction)(void (*)(void))find_boundary, METH_FASTCALL,
     "the first record start at or after p found by its signature (see framing_nb.find_boundary)"},
    {"group_units", (PyCFunction)(void (*)(void))group_units, METH_FASTCALL,
     "the ConsumeQueue units of a batch grouped by queue (see kernels.rocketmq.cq_group)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nat_rmq_scan", "mqstore's native CommitLog scan", -1,
                                    methods};

PyMODINIT_FUNC PyInit__nat_rmq_scan(void)
{
    mq_init_checksums(NULL);
    return PyModule_Create(&module);
}
