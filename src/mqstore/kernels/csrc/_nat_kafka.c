/* mqstore.kernels._nat_kafka: the Kafka kernels the one-shot operator commands run (verify,
 * rebuild-index, dump), ahead-of-time compiled: the native twins of the numba kernels in
 * mqstore/kernels/kafka/{batches_nb,file_scan_nb,index_build_nb,records_nb}.py.
 *
 *   scan_count / scan_fill   batch-header walk of a buffer into columns (scan_batches)
 *   file_scan                the same walk over a file with pread into a reused buffer, each
 *                            batch checksummed (CRC-32C / CRC-32) while it is in the cache
 *   find_batch_start         a guessed v2 batch start in a byte range of a file (part splits)
 *   build_index              the index entries of LogSegment.recover (build_index_entries)
 *   parse_bodies             the records of many v2 batch bodies as positions (parse_bodies)
 *
 * Every length read from the data is checked against the buffer/file before it is used.  The
 * loops run without the GIL. */
#include "mq_common.h"
#include "mq_kafka.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* stop reasons (kernels/kafka/batches.py, kernels/kafka/file_scan.py) */
#define STOP_END 0
#define STOP_TORN 1
#define STOP_BAD_SIZE 2
#define STOP_LIMIT 3
#define STOP_FULL 4
#define STOP_READ_ERROR (-1)

/* ------------------------------------------------------------------ argument helpers */

#define NCOLS 11
static const Py_ssize_t COL_ITEMSIZE[NCOLS] = {8, 4, 8, 8, 8, 8, 4, 1, 4, 4, 4};

typedef struct {
    Py_buffer v[NCOLS];
    int n;
} mk_cols_view;

static void mk_cols_release(mk_cols_view *c)
{
    for (int i = 0; i < c->n; i++) PyBuffer_Release(&c->v[i]);
    c->n = 0;
}

/* views of the 11 scan columns (BatchColumns order), each with at least `need` items */
static int mk_cols_get(PyObject *const *objs, mk_cols_view *c, Py_ssize_t need)
{
    c->n = 0;
    for (int i = 0; i < NCOLS; i++) {
        if (mq_view(objs[i], &c->v[i], COL_ITEMSIZE[i], 1, "column") < 0) {
            mk_cols_release(c);
            return -1;
        }
        c->n++;
        if (mq_len(&c->v[i]) < need) {
            PyErr_SetString(PyExc_ValueError, "a scan column is too short");
            mk_cols_release(c);
            return -1;
        }
    }
    return 0;
}

static void mk_cols_ptrs(mk_cols_view *c, mk_cols *out)
{
    out->position = (int64_t *)c->v[0].buf;
    out->size = (int32_t *)c->v[1].buf;
    out->base_offset = (int64_t *)c->v[2].buf;
    out->last_offset = (int64_t *)c->v[3].buf;
    out->max_ts = (int64_t *)c->v[4].buf;
    out->base_ts = (int64_t *)c->v[5].buf;
    out->epoch = (int32_t *)c->v[6].buf;
    out->magic = (int8_t *)c->v[7].buf;
    out->attrs = (int32_t *)c->v[8].buf;
    out->count = (int32_t *)c->v[9].buf;
    out->crc = (uint32_t *)c->v[10].buf;
}

/* ------------------------------------------------------------------ scan of a buffer */

/* scan_count(buf, start) -> (n, stop, reason) */
static PyObject *scan_count(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 2, "scan_count(buf, start)") < 0) return NULL;
    int64_t start = mq_i64(args[1]);
    if (start == -1 && PyErr_Occurred()) return NULL;
    Py_buffer b;
    if (mq_view(args[0], &b, 0, 0, "buf") < 0) return NULL;
    int64_t n, p;
    int reason;
    Py_BEGIN_ALLOW_THREADS
    reason = mk_scan_count((const uint8_t *)b.buf, (int64_t)b.len, start, &n, &p);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return Py_BuildValue("(LLi)", (long long)n, (long long)p, reason);
}

/* scan_fill(buf, start, n, *11 columns): the columns of the n batches scan_count walked */
static PyObject *scan_fill(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 3 + NCOLS, "scan_fill(buf, start, n, *columns)") < 0) return NULL;
    int64_t start = mq_i64(args[1]), n = mq_i64(args[2]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer b;
    if (mq_view(args[0], &b, 0, 0, "buf") < 0) return NULL;
    mk_cols_view cv;
    if (mk_cols_get(args + 3, &cv, (Py_ssize_t)n) < 0) {
        PyBuffer_Release(&b);
        return NULL;
    }
    /* the walk must reach n batches inside the buffer (the caller counted them first) */
    int64_t cnt, stop;
    int ok;
    mk_cols cols;
    mk_cols_ptrs(&cv, &cols);
    Py_BEGIN_ALLOW_THREADS
    mk_scan_count((const uint8_t *)b.buf, (int64_t)b.len, start, &cnt, &stop);
    ok = cnt >= n;
    if (ok) mk_scan_fill((const uint8_t *)b.buf, (int64_t)b.len, start, n, &cols);
    Py_END_ALLOW_THREADS
    mk_cols_release(&cv);
    PyBuffer_Release(&b);
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, "scan_fill: the buffer holds fewer batches than asked");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ------------------------------------------------------------------ scan of a file */

/* file[off : off + min(cap, file_end - off)] into buf: bytes read, or -1 on an error */
static int64_t fill(int fd, uint8_t *buf, int64_t cap, int64_t off, int64_t file_end)
{
    int64_t want = file_end - off < cap ? file_end - off : cap;
    int64_t got = 0;
    while (got < want) {
        ssize_t r = pread(fd, buf + got, (size_t)(want - got), (off_t)(off + got));
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (r == 0) return got;
        got += r;
    }
    return got;
}

/* the walk of kernels/kafka/file_scan_nb.py:_file_scan; returns the reason, n and p through pointers */
static int file_scan_run(int fd, int64_t file_end, int64_t start, int64_t stop_at, uint8_t *buf, int64_t bsz,
                         mk_cols *c, uint8_t *ok, int64_t **prod, int64_t cap, int64_t *n_out, int64_t *p_out)
{
    int64_t ws = 0, we = 0, p = start, n = 0;
    for (;;) {
        *n_out = n;
        *p_out = p;
        if (p >= stop_at) return STOP_LIMIT;
        if (p >= file_end - 17) return STOP_END;
        if (n >= cap) return STOP_FULL;
        int64_t need = p + 61 < file_end ? p + 61 : file_end;
        if (p < ws || need > we) {
            int64_t got = fill(fd, buf, bsz, p, file_end);
            if (got < need - p) return STOP_READ_ERROR;
            ws = p;
            we = p + got;
        }
        const uint8_t *h = buf + (p - ws);
        int32_t s = mq_be32(h + 8);
        if (s < 14) return STOP_BAD_SIZE;
        if (p > file_end - 12 - s) return STOP_TORN;
        int kind = mk_header(h, p, file_end, n, c); /* 0: no checksum, 1: CRC-32C, 2: CRC-32 */
        if (kind == 1) { /* producer id, epoch and base sequence of a whole v2 header */
            prod[0][n] = mq_be64(h + 43);
            prod[1][n] = mq_be16(h + 51);
            prod[2][n] = mq_be32(h + 53);
        } else {
            prod[0][n] = prod[1][n] = prod[2][n] = -1;
        }
        int64_t total = (int64_t)s + 12;
        int good = 0;
        if (kind != 0) {
            int64_t cs = p + (kind == 1 ? 21 : 16), ce = p + total;
            uint32_t x = 0;
            while (cs < ce) {
                if (cs >= we) { /* the batch goes on past the buffer: read its next part */
                    int64_t got = fill(fd, buf, bsz, cs, file_end);
                    if (got <= 0) return STOP_READ_ERROR;
                    ws = cs;
                    we = cs + got;
                }
                int64_t e = ce < we ? ce : we;
                x = kind == 1 ? mq_crc32c(x, buf + (cs - ws), (size_t)(e - cs)) : mq_crc32(x, buf + (cs - ws), (size_t)(e - cs));
                cs = e;
            }
            good = x == c->crc[n];
        }
        ok[n] = (uint8_t)good;
        n++;
        p += total;
    }
}

/* file_scan(fd, file_end, start, stop_at, buf, *11 columns, ok, producer_id, producer_epoch,
 *           base_sequence) -> (n, p, reason) */
static PyObject *file_scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 9 + NCOLS, "file_scan(fd, file_end, start, stop_at, buf, *columns, ok, *producer)") < 0)
        return NULL;
    long fd = PyLong_AsLong(args[0]);
    int64_t file_end = mq_i64(args[1]), start = mq_i64(args[2]), stop_at = mq_i64(args[3]);
    if (PyErr_Occurred()) return NULL;
    if (start < 0 || file_end < 0) {
        PyErr_SetString(PyExc_ValueError, "file_scan: negative position");
        return NULL;
    }
    Py_buffer b, okv;
    if (mq_view(args[4], &b, 0, 1, "buf") < 0) return NULL;
    if (b.len < 64) {
        PyErr_SetString(PyExc_ValueError, "file_scan: the buffer must hold at least 64 bytes");
        PyBuffer_Release(&b);
        return NULL;
    }
    mk_cols_view cv;
    if (mk_cols_get(args + 5, &cv, 0) < 0) {
        PyBuffer_Release(&b);
        return NULL;
    }
    if (mq_view(args[5 + NCOLS], &okv, 1, 1, "ok") < 0) {
        mk_cols_release(&cv);
        PyBuffer_Release(&b);
        return NULL;
    }
    Py_buffer pv[3];
    int gp = 0;
    for (; gp < 3; gp++)
        if (mq_view(args[6 + NCOLS + gp], &pv[gp], 8, 1, "producer column") < 0) break;
    if (gp < 3) {
        for (int i = 0; i < gp; i++) PyBuffer_Release(&pv[i]);
        PyBuffer_Release(&okv);
        mk_cols_release(&cv);
        PyBuffer_Release(&b);
        return NULL;
    }
    int64_t cap = mq_len(&okv);
    for (int i = 0; i < NCOLS; i++)
        if (mq_len(&cv.v[i]) < cap) cap = mq_len(&cv.v[i]);
    int64_t *prod[3];
    for (int i = 0; i < 3; i++) {
        if (mq_len(&pv[i]) < cap) cap = mq_len(&pv[i]);
        prod[i] = (int64_t *)pv[i].buf;
    }
    mk_cols cols;
    mk_cols_ptrs(&cv, &cols);
    int64_t n, p;
    int reason;
    Py_BEGIN_ALLOW_THREADS
    reason = file_scan_run((int)fd, file_end, start, stop_at, (uint8_t *)b.buf, (int64_t)b.len, &cols,
                           (uint8_t *)okv.buf, prod, cap, &n, &p);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < 3; i++) PyBuffer_Release(&pv[i]);
    PyBuffer_Release(&okv);
    mk_cols_release(&cv);
    PyBuffer_Release(&b);
    return Py_BuildValue("(LLi)", (long long)n, (long long)p, reason);
}

/* The first position in [lo, hi) of a file that looks like the start of a v2 batch whose CRC-32C
 * verifies (kernels/kafka/file_scan_nb.py:find_batch_start), or -1; buf and buf2 are scratch. */
static int64_t mk_find_start(int fd, int64_t file_end, int64_t lo, int64_t hi, uint8_t *buf, int64_t bsz,
                             uint8_t *buf2, int64_t b2sz, int64_t budget)
{
    int64_t found = -1;
    int64_t q = lo < 0 ? 0 : lo;
    while (q < hi) {
        int64_t got = fill(fd, buf, bsz, q, file_end);
        if (got < 61) break;
        int64_t last = hi < q + got - 60 ? hi : q + got - 60;
        int stop = 0;
        for (int64_t c = q; c < last && !stop; c++) {
            const uint8_t *h = buf + (c - q);
            if (h[16] != 2) continue;
            int32_t s = mq_be32(h + 8);
            if (s < 49 || c > file_end - 12 - s || mq_be32(h + 23) < 0 || mq_be32(h + 57) < 0) continue;
            int64_t nxt = c + 12 + s;
            if (nxt <= file_end - 17) {
                if (fill(fd, buf2, 17, nxt, file_end) != 17 || buf2[16] != 2 || mq_be32(buf2 + 8) < 14) continue;
            }
            if (s > budget) {
                stop = 1;
                break;
            }
            budget -= s;
            int64_t cs = c + 21;
            uint32_t x = 0;
            while (cs < nxt) {
                int64_t g = fill(fd, buf2, b2sz, cs, nxt);
                if (g <= 0) {
                    stop = 1;
                    break;
                }
                x = mq_crc32c(x, buf2, (size_t)g);
                cs += g;
            }
            if (stop) break;
            if (x == mq_beu32(h + 17)) {
                found = c;
                stop = 1;
            }
        }
        if (stop || last <= q) break;
        q = last;
    }
    return found;
}

/* find_batch_start(fd, file_end, lo, hi, buf, buf2, verify_budget) -> position or -1
 * (kernels/kafka/file_scan_nb.py:find_batch_start) */
static PyObject *find_batch_start(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 7, "find_batch_start(fd, file_end, lo, hi, buf, buf2, verify_budget)") < 0) return NULL;
    long fd = PyLong_AsLong(args[0]);
    int64_t file_end = mq_i64(args[1]), lo = mq_i64(args[2]), hi = mq_i64(args[3]), budget = mq_i64(args[6]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer b1, b2;
    if (mq_view(args[4], &b1, 0, 1, "buf") < 0) return NULL;
    if (mq_view(args[5], &b2, 0, 1, "buf2") < 0) {
        PyBuffer_Release(&b1);
        return NULL;
    }
    if (b1.len < 64 || b2.len < 17) {
        PyErr_SetString(PyExc_ValueError, "find_batch_start: buffers too small");
        PyBuffer_Release(&b2);
        PyBuffer_Release(&b1);
        return NULL;
    }
    int64_t found;
    Py_BEGIN_ALLOW_THREADS
    found = mk_find_start((int)fd, file_end, lo, hi, (uint8_t *)b1.buf, (int64_t)b1.len, (uint8_t *)b2.buf,
                          (int64_t)b2.len, budget);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b2);
    PyBuffer_Release(&b1);
    return PyLong_FromLongLong((long long)found);
}

/* pread_spans(fd, starts int64[n], length, out uint8[n * length]) -> the number of spans read
 * whole (stops at the first short read or error) */
static PyObject *pread_spans(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 4, "pread_spans(fd, starts, length, out)") < 0) return NULL;
    long fd = PyLong_AsLong(args[0]);
    int64_t length = mq_i64(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (length < 0) {
        PyErr_SetString(PyExc_ValueError, "pread_spans: negative length");
        return NULL;
    }
    Py_buffer s, o;
    if (mq_view(args[1], &s, 8, 0, "starts") < 0) return NULL;
    if (mq_view(args[3], &o, 0, 1, "out") < 0) {
        PyBuffer_Release(&s);
        return NULL;
    }
    int64_t n = mq_len(&s);
    if (length && o.len / length < n) {
        PyErr_SetString(PyExc_ValueError, "pread_spans: out is too short");
        PyBuffer_Release(&o);
        PyBuffer_Release(&s);
        return NULL;
    }
    const int64_t *st = (const int64_t *)s.buf;
    uint8_t *out = (uint8_t *)o.buf;
    int64_t k = 0;
    Py_BEGIN_ALLOW_THREADS
    for (; k < n; k++) {
        if (st[k] < 0 || fill((int)fd, out + k * length, length, st[k], st[k] + length) != length) break;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o);
    PyBuffer_Release(&s);
    return PyLong_FromLongLong((long long)k);
}

/* ------------------------------------------------------------------ index entries */

/* build_index(positions, sizes, last_offsets, max_ts, n, base, interval, max_off, max_time,
 *             oi_off, oi_pos, ti_ts, ti_off) -> (no, nt, err, at)
 * (kernels/kafka/index_build.py:_build_py: Kafka's LogSegment.recover) */
static PyObject *build_index(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 13, "build_index(...)") < 0) return NULL;
    int64_t n = mq_i64(args[4]), base = mq_i64(args[5]), interval = mq_i64(args[6]);
    int64_t max_off = mq_i64(args[7]), max_time = mq_i64(args[8]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer v[8];
    static const Py_ssize_t isz[8] = {8, 4, 8, 8, 8, 8, 8, 8};
    int got = 0;
    for (int i = 0; i < 8; i++) {
        PyObject *o = args[i < 4 ? i : i + 5];
        if (mq_view(o, &v[i], isz[i], i >= 4, "array") < 0) goto fail;
        got++;
    }
    for (int i = 0; i < 4; i++)
        if (mq_len(&v[i]) < n) {
            PyErr_SetString(PyExc_ValueError, "build_index: an input column is shorter than n");
            goto fail;
        }
    const int64_t *pos = v[0].buf, *last = v[2].buf, *mts = v[3].buf;
    const int32_t *sizes = v[1].buf;
    int64_t *oi_off = v[4].buf, *oi_pos = v[5].buf, *ti_ts = v[6].buf, *ti_off = v[7].buf;
    int64_t cap_o = mq_len(&v[4]) < mq_len(&v[5]) ? mq_len(&v[4]) : mq_len(&v[5]);
    int64_t cap_t = mq_len(&v[6]) < mq_len(&v[7]) ? mq_len(&v[6]) : mq_len(&v[7]);
    (void)pos;
    int64_t no = 0, nt = 0, at = n;
    int err = 0;
    Py_BEGIN_ALLOW_THREADS
    err = mk_build_index(sizes, last, mts, n, base, interval, max_off, max_time, oi_off, oi_pos, cap_o, ti_ts,
                         ti_off, cap_t, &no, &nt, &at);
    Py_END_ALLOW_THREADS
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    if (err < 0) {
        PyErr_SetString(PyExc_ValueError, "build_index: the output arrays are too short");
        return NULL;
    }
    return Py_BuildValue("(LLiL)", (long long)no, (long long)nt, err, (long long)at);
fail:
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    return NULL;
}

/* ------------------------------------------------------------------ one-shot recovery of a file */

/* One part of a file walked by one thread into columns it grows itself (malloc). */
typedef struct {
    int fd;
    int64_t file_end, start, stop_at, bsz;
    mk_cols c;
    uint8_t *ok;
    int64_t *prod[3];
    int64_t cap, n, p;
    int reason, oom;
} mk_part;

static void mk_part_free(mk_part *t)
{
    free(t->c.position); free(t->c.size); free(t->c.base_offset); free(t->c.last_offset); free(t->c.max_ts);
    free(t->c.base_ts); free(t->c.epoch); free(t->c.magic); free(t->c.attrs); free(t->c.count); free(t->c.crc);
    free(t->ok); free(t->prod[0]); free(t->prod[1]); free(t->prod[2]);
    memset(&t->c, 0, sizeof t->c);
    t->ok = NULL;
    t->prod[0] = t->prod[1] = t->prod[2] = NULL;
}

#define MK_GROW(ptr, n) do { void *q_ = realloc((ptr), (size_t)(n) * sizeof *(ptr)); if (!q_) return -1; (ptr) = q_; } while (0)

static int mk_part_grow(mk_part *t, int64_t cap)
{
    MK_GROW(t->c.position, cap); MK_GROW(t->c.size, cap); MK_GROW(t->c.base_offset, cap);
    MK_GROW(t->c.last_offset, cap); MK_GROW(t->c.max_ts, cap); MK_GROW(t->c.base_ts, cap);
    MK_GROW(t->c.epoch, cap); MK_GROW(t->c.magic, cap); MK_GROW(t->c.attrs, cap); MK_GROW(t->c.count, cap);
    MK_GROW(t->c.crc, cap); MK_GROW(t->ok, cap);
    MK_GROW(t->prod[0], cap); MK_GROW(t->prod[1], cap); MK_GROW(t->prod[2], cap);
    t->cap = cap;
    return 0;
}

/* walk the part from t->p up to t->stop_at (the columns grow as needed): t->reason, t->p, t->n */
static void mk_part_walk(mk_part *t)
{
    uint8_t *buf = malloc((size_t)t->bsz);
    if (!buf) {
        t->oom = 1;
        return;
    }
    for (;;) {
        if (t->n >= t->cap) {
            int64_t room = (t->file_end - t->p) / 26 + 1, want = t->cap ? t->cap * 2 : 4096;
            if (want > t->n + room) want = t->n + room;
            if (want <= t->n) want = t->n + 1;
            if (mk_part_grow(t, want) < 0) {
                t->oom = 1;
                break;
            }
        }
        int64_t n = t->n;
        mk_cols c = {t->c.position + n, t->c.size + n, t->c.base_offset + n, t->c.last_offset + n, t->c.max_ts + n,
                     t->c.base_ts + n, t->c.epoch + n, t->c.magic + n, t->c.attrs + n, t->c.count + n, t->c.crc + n};
        int64_t *prod[3] = {t->prod[0] + n, t->prod[1] + n, t->prod[2] + n};
        int64_t got, p;
        int r = file_scan_run(t->fd, t->file_end, t->p, t->stop_at, buf, t->bsz, &c, t->ok + n, prod, t->cap - n,
                              &got, &p);
        t->n += got;
        t->p = p;
        if (r == STOP_FULL) continue;
        t->reason = r;
        break;
    }
    free(buf);
}

static void *mk_part_thread(void *arg)
{
    mk_part_walk((mk_part *)arg);
    return NULL;
}

#define MK_MAX_PARTS 64
#define MK_NO_LIMIT ((int64_t)1 << 62)

/* recover(fd, file_end, parts, search_bytes, verify_bytes, buffer_size, base, interval, max_off, max_time)
 *   -> (reason, valid_end, count, n_valid, bad, next_position, last_offset, build_err, build_position,
 *       offset_index, time_index, txn_batches)
 *
 * What LogSegment.recover learns from a .log and writes, in one call: the batch walk with every
 * checksum (file_scan) over `parts` parts of the file walked by as many threads (each part after
 * the first starting at a guessed batch start, find_batch_start, that the part before must reach;
 * else the walk goes on sequentially from where the chain leads, as
 * storage/kafka/file_scan.py:_scan_check_file), the valid prefix (up to the first batch whose
 * checksum fails: `bad` = (position, size, magic, stored crc) of it, or None), the index entries
 * of that prefix (build_index) serialised as on disk, and the number of magic-2 batches of the
 * prefix with the transactional or control bit.  next_position: position of the batch after the
 * prefix (-1: none); last_offset: of the last valid batch (None: no valid batch); build_position:
 * the position the build error concerns (-1: none).  Only the small results cross into Python. */
static PyObject *recover(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 10, "recover(fd, file_end, parts, search_bytes, verify_bytes, buffer_size, base, "
                                  "interval, max_off, max_time)") < 0)
        return NULL;
    long fd = PyLong_AsLong(args[0]);
    int64_t file_end = mq_i64(args[1]), nparts = mq_i64(args[2]), search = mq_i64(args[3]), verify = mq_i64(args[4]);
    int64_t bsz = mq_i64(args[5]), base = mq_i64(args[6]), interval = mq_i64(args[7]), max_off = mq_i64(args[8]);
    int64_t max_time = mq_i64(args[9]);
    if (PyErr_Occurred()) return NULL;
    if (file_end < 0 || bsz < 64 || nparts < 1 || nparts > MK_MAX_PARTS) {
        PyErr_SetString(PyExc_ValueError, "recover: bad arguments");
        return NULL;
    }
    mk_part parts[MK_MAX_PARTS];
    memset(parts, 0, sizeof parts);
    int64_t cuts[MK_MAX_PARTS];
    int k_used = 1, failed = 0, oom = 0;
    int64_t count = 0, n_valid = 0, txn = 0, no = 0, nt = 0, at = 0, bad_k = -1, bad_i = 0, reason = STOP_END;
    int64_t valid_end = 0, next_pos = -1, build_pos = -1, last_off = 0;
    int err = 0, have_last = 0;
    int32_t *sizes = NULL;
    int64_t *last = NULL, *mts = NULL, *oo = NULL, *op = NULL, *tt = NULL, *to = NULL;
    int64_t cap_o = 0, cap_t = 0;
    pthread_t tids[MK_MAX_PARTS];
    int started[MK_MAX_PARTS];
    memset(started, 0, sizeof started);
    Py_BEGIN_ALLOW_THREADS
    /* the cuts: a guessed batch start near each k/parts of the file */
    cuts[0] = 0;
    if (nparts > 1) {
        uint8_t *s1 = malloc((size_t)bsz), *s2 = malloc((size_t)bsz);
        if (s1 && s2) {
            for (int64_t k = 1; k < nparts; k++) {
                int64_t lo = file_end * k / nparts;
                if (lo < cuts[k_used - 1] + 1) lo = cuts[k_used - 1] + 1;
                int64_t hi = lo + search < file_end ? lo + search : file_end;
                int64_t s = mk_find_start((int)fd, file_end, lo, hi, s1, bsz, s2, bsz, verify);
                if (s > cuts[k_used - 1]) cuts[k_used++] = s;
            }
        }
        free(s1);
        free(s2);
    }
    for (int k = 0; k < k_used; k++) {
        parts[k].fd = (int)fd;
        parts[k].file_end = file_end;
        parts[k].start = parts[k].p = cuts[k];
        parts[k].stop_at = k + 1 < k_used ? cuts[k + 1] : MK_NO_LIMIT;
        parts[k].bsz = bsz;
    }
    for (int k = 1; k < k_used; k++)
        started[k] = pthread_create(&tids[k], NULL, mk_part_thread, &parts[k]) == 0;
    mk_part_walk(&parts[0]);
    for (int k = 1; k < k_used; k++) {
        if (started[k]) pthread_join(tids[k], NULL);
        else mk_part_walk(&parts[k]);
    }
    /* the chain: part k must end exactly at cut k + 1, else it goes on from where it stopped */
    int kk = 0;
    for (; kk < k_used; kk++) {
        mk_part *t = &parts[kk];
        if (t->oom) { oom = 1; break; }
        reason = t->reason;
        valid_end = t->p;
        if (reason != STOP_LIMIT) break;
        if (t->p != t->stop_at) {
            t->stop_at = MK_NO_LIMIT;
            mk_part_walk(t);
            if (t->oom) { oom = 1; break; }
            reason = t->reason;
            valid_end = t->p;
            break;
        }
    }
    if (kk == k_used) kk = k_used - 1;
    int k_last = kk; /* parts 0..k_last hold the batches, in order */
    if (!oom && reason != STOP_READ_ERROR) {
        for (int k = 0; k <= k_last; k++) count += parts[k].n;
        /* the valid prefix: up to the first batch whose checksum fails */
        for (int k = 0; k <= k_last && bad_k < 0; k++)
            for (int64_t i = 0; i < parts[k].n; i++)
                if (!parts[k].ok[i]) {
                    bad_k = k;
                    bad_i = i;
                    break;
                }
        n_valid = 0;
        for (int k = 0; k <= k_last; k++) {
            if (k == bad_k) { n_valid += bad_i; break; }
            n_valid += parts[k].n;
        }
        sizes = malloc((size_t)(n_valid + 1) * sizeof *sizes);
        last = malloc((size_t)(n_valid + 1) * sizeof *last);
        mts = malloc((size_t)(n_valid + 1) * sizeof *mts);
        cap_o = (max_off < n_valid ? max_off : n_valid) + 1;
        cap_t = (max_time < n_valid + 1 ? max_time : n_valid + 1) + 1;
        oo = malloc((size_t)cap_o * 8); op = malloc((size_t)cap_o * 8);
        tt = malloc((size_t)cap_t * 8); to = malloc((size_t)cap_t * 8);
        if (!sizes || !last || !mts || !oo || !op || !tt || !to) {
            oom = 1;
        } else {
            int64_t j = 0;
            for (int k = 0; k <= k_last && j < n_valid; k++)
                for (int64_t i = 0; i < parts[k].n && j < n_valid; i++, j++) {
                    sizes[j] = parts[k].c.size[i];
                    last[j] = parts[k].c.last_offset[i];
                    mts[j] = parts[k].c.max_ts[i];
                    if (parts[k].c.magic[i] >= 2 && (parts[k].c.attrs[i] & 0x30)) txn++;
                }
            /* the position of batch i of the walk (i < count) */
#define MK_POS_OF(idx, out) do { int64_t r_ = (idx); for (int k_ = 0; k_ <= k_last; k_++) { \
        if (r_ < parts[k_].n) { (out) = parts[k_].c.position[r_]; break; } r_ -= parts[k_].n; } } while (0)
            if (n_valid < count) MK_POS_OF(n_valid, next_pos);
            if (n_valid) {
                have_last = 1;
                last_off = last[n_valid - 1];
            }
            err = mk_build_index(sizes, last, mts, n_valid, base, interval, max_off, max_time, oo, op, cap_o, tt, to,
                                 cap_t, &no, &nt, &at);
            if (err < 0) failed = 1;
            else if (err != MK_BUILD_OK && at < count) MK_POS_OF(at, build_pos);
#undef MK_POS_OF
        }
    }
    Py_END_ALLOW_THREADS
    PyObject *res = NULL, *oi = NULL, *ti = NULL, *bad = NULL;
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    if (failed) {
        PyErr_SetString(PyExc_ValueError, "recover: the index entries overflow their arrays");
        goto done;
    }
    if (reason == STOP_READ_ERROR) {
        res = Py_BuildValue("(iLLLOLOiLOOL)", (int)reason, (long long)valid_end, 0LL, 0LL, Py_None, -1LL, Py_None, 0,
                            -1LL, Py_None, Py_None, 0LL);
        goto done;
    }
    if (err == MK_BUILD_OK) {
        oi = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(no * 8));
        ti = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(nt * 12));
        if (!oi || !ti) goto done;
        uint8_t *w = (uint8_t *)PyBytes_AS_STRING(oi);
        for (int64_t i = 0; i < no; i++, w += 8) {
            mq_put_be32(w, (int32_t)(oo[i] - base));
            mq_put_be32(w + 4, (int32_t)op[i]);
        }
        w = (uint8_t *)PyBytes_AS_STRING(ti);
        for (int64_t i = 0; i < nt; i++, w += 12) {
            mq_put_be64(w, tt[i]);
            mq_put_be32(w + 8, (int32_t)(to[i] - base));
        }
    } else {
        oi = Py_NewRef(Py_None);
        ti = Py_NewRef(Py_None);
    }
    if (bad_k >= 0) {
        mk_part *t = &parts[bad_k];
        bad = Py_BuildValue("(LiiK)", (long long)t->c.position[bad_i], (int)t->c.size[bad_i], (int)t->c.magic[bad_i],
                            (unsigned long long)t->c.crc[bad_i]);
        if (!bad) goto done;
    } else {
        bad = Py_NewRef(Py_None);
    }
    PyObject *lo = have_last ? PyLong_FromLongLong((long long)last_off) : Py_NewRef(Py_None);
    if (!lo) goto done;
    res = Py_BuildValue("(iLLLOLNiLOOL)", (int)reason, (long long)valid_end, (long long)count, (long long)n_valid, bad,
                        (long long)next_pos, lo, err, (long long)build_pos, oi, ti, (long long)txn);
done:
    Py_XDECREF(oi);
    Py_XDECREF(ti);
    Py_XDECREF(bad);
    free(sizes); free(last); free(mts); free(oo); free(op); free(tt); free(to);
    for (int k = 0; k < MK_MAX_PARTS; k++) mk_part_free(&parts[k]);
    return res;
}

/* ------------------------------------------------------------------ record bodies */

/* parse_bodies(a, bstart, bend, bcount, bbase, bts, bmax, blogappend, lo, hi, fill,
 *              r_off, r_ts, r_batch, r_ks, r_kl, r_vs, r_vl, r_hf, h_ks, h_kl, h_vs, h_vl)
 *   -> (n, nh, err, error_batch)   (kernels/kafka/records.py:_parse_bodies) */
static PyObject *parse_bodies(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 23, "parse_bodies(...)") < 0) return NULL;
    int64_t lo = mq_i64(args[8]), hi = mq_i64(args[9]);
    if (PyErr_Occurred()) return NULL;
    int fillit = PyObject_IsTrue(args[10]);
    if (fillit < 0) return NULL;
    Py_buffer a, in[7], out[12];
    int gin = 0, gout = 0;
    PyObject *res = NULL;
    if (mq_view(args[0], &a, 0, 0, "a") < 0) return NULL;
    for (int i = 0; i < 7; i++) {
        if (mq_view(args[1 + i], &in[i], i == 6 ? 1 : 8, 0, "batch column") < 0) goto done;
        gin++;
    }
    int64_t nb = mq_len(&in[0]);
    for (int i = 1; i < 7; i++)
        if (mq_len(&in[i]) < nb) {
            PyErr_SetString(PyExc_ValueError, "parse_bodies: batch columns differ in length");
            goto done;
        }
    for (int i = 0; i < 12; i++) {
        if (mq_view(args[11 + i], &out[i], 8, 1, "record column") < 0) goto done;
        gout++;
    }
    mk_rec_out ro;
    ro.cap_r = INT64_MAX;
    ro.cap_h = INT64_MAX;
    if (fillit) {
        for (int i = 0; i < 8; i++)
            if (mq_len(&out[i]) < ro.cap_r) ro.cap_r = mq_len(&out[i]);
        for (int i = 8; i < 12; i++)
            if (mq_len(&out[i]) < ro.cap_h) ro.cap_h = mq_len(&out[i]);
    }
    int64_t *o[12];
    for (int i = 0; i < 12; i++) o[i] = (int64_t *)out[i].buf;
    ro.off = o[0]; ro.ts = o[1]; ro.batch = o[2]; ro.ks = o[3]; ro.kl = o[4]; ro.vs = o[5]; ro.vl = o[6];
    ro.hf = o[7]; ro.hks = o[8]; ro.hkl = o[9]; ro.hvs = o[10]; ro.hvl = o[11];
    mk_bodies bd = {(const uint8_t *)a.buf, (int64_t)a.len, nb, (const int64_t *)in[0].buf, (const int64_t *)in[1].buf,
                    (const int64_t *)in[2].buf, (const int64_t *)in[3].buf, (const int64_t *)in[4].buf,
                    (const int64_t *)in[5].buf, (const uint8_t *)in[6].buf};
    int64_t n = 0, nh = 0, eb = -1;
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = mk_parse_bodies(&bd, lo, hi, fillit, &ro, &n, &nh, &eb);
    Py_END_ALLOW_THREADS
    if (err == MK_ERR_CAPACITY) {
        PyErr_SetString(PyExc_ValueError, "parse_bodies: the output columns are too short");
        goto done;
    }
    res = Py_BuildValue("(LLiL)", (long long)n, (long long)nh, err, (long long)eb);
done:
    for (int i = 0; i < gout; i++) PyBuffer_Release(&out[i]);
    for (int i = 0; i < gin; i++) PyBuffer_Release(&in[i]);
    PyBuffer_Release(&a);
    return res;
}

static PyMethodDef methods[] = {
    MQ_BIND_CHECKSUMS_METHOD,
    {"scan_count", (PyCFunction)(void (*)(void))scan_count, METH_FASTCALL, "scan_count(buf, start) -> (n, stop, reason)"},
    {"scan_fill", (PyCFunction)(void (*)(void))scan_fill, METH_FASTCALL, "scan_fill(buf, start, n, *columns)"},
    {"file_scan", (PyCFunction)(void (*)(void))file_scan, METH_FASTCALL,
     "file_scan(fd, file_end, start, stop_at, buf, *columns, ok, producer_id, producer_epoch, base_sequence) "
     "-> (n, p, reason)"},
    {"find_batch_start", (PyCFunction)(void (*)(void))find_batch_start, METH_FASTCALL,
     "find_batch_start(fd, file_end, lo, hi, buf, buf2, verify_budget) -> position or -1"},
    {"pread_spans", (PyCFunction)(void (*)(void))pread_spans, METH_FASTCALL,
     "pread_spans(fd, starts, length, out) -> spans read whole"},
    {"build_index", (PyCFunction)(void (*)(void))build_index, METH_FASTCALL,
     "build_index(positions, sizes, last_offsets, max_ts, n, base, interval, max_off, max_time, "
     "oi_off, oi_pos, ti_ts, ti_off) -> (no, nt, err, at)"},
    {"recover", (PyCFunction)(void (*)(void))recover, METH_FASTCALL,
     "recover(fd, file_end, parts, search_bytes, verify_bytes, buffer_size, base, interval, max_off, max_time) -> "
     "(reason, valid_end, count, n_valid, bad, next_position, last_offset, build_err, build_position, offset_index, "
     "time_index, txn_batches)"},
    {"parse_bodies", (PyCFunction)(void (*)(void))parse_bodies, METH_FASTCALL,
     "parse_bodies(a, bstart, bend, bcount, bbase, bts, bmax, blogappend, lo, hi, fill, *12 outputs) -> (n, nh, err, batch)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nat_kafka", "mqstore's native Kafka kernels", -1, methods};

PyMODINIT_FUNC PyInit__nat_kafka(void)
{
    mq_init_checksums(NULL);
    return PyModule_Create(&module);
}
