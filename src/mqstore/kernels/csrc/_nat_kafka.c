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

/* The walk of a whole file in `nparts` parts over as many threads (the one walk of recover and
 * walk_columns): each part after the first starts at a guessed batch start near its cut
 * (find_batch_start) that the part before must reach, else the walk goes on sequentially from where
 * the chain leads (storage/kafka/file_scan.py:_scan_check_file).  Parts 0..*k_last_out hold the
 * batches in order; returns 1 when out of memory.  Called without the GIL. */
static int mk_walk_file(int64_t fd, int64_t file_end, int64_t nparts, int64_t search, int64_t verify, int64_t bsz,
                        mk_part *parts, int *k_last_out, int64_t *reason_out, int64_t *valid_end_out)
{
    int64_t cuts[MK_MAX_PARTS];
    int k_used = 1, oom = 0;
    int64_t reason = STOP_END, valid_end = 0;
    pthread_t tids[MK_MAX_PARTS];
    int started[MK_MAX_PARTS];
    memset(started, 0, sizeof started);
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
    *k_last_out = k_last;
    *reason_out = reason;
    *valid_end_out = valid_end;
    return oom;
}

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
    int failed = 0, oom = 0;
    int64_t count = 0, n_valid = 0, txn = 0, no = 0, nt = 0, at = 0, bad_k = -1, bad_i = 0, reason = STOP_END;
    int64_t valid_end = 0, next_pos = -1, build_pos = -1, last_off = 0;
    int err = 0, have_last = 0;
    int32_t *sizes = NULL;
    int64_t *last = NULL, *mts = NULL, *oo = NULL, *op = NULL, *tt = NULL, *to = NULL;
    int64_t cap_o = 0, cap_t = 0;
    Py_BEGIN_ALLOW_THREADS
    int k_last = 0;
    oom = mk_walk_file(fd, file_end, nparts, search, verify, bsz, parts, &k_last, &reason, &valid_end);
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


/* ------------------------------------------------------------------ verify: columns and index checks */

/* walk_columns(fd, file_end, parts, search_bytes, verify_bytes, buffer_size)
 *   -> (reason, valid_end, count, n_valid, txn_batches, columns)
 * The walk of recover (mk_walk_file: the same parts, threads and chain) with its columns handed
 * back: `columns` is a tuple of bytes, the 11 scan columns (BatchColumns order: int64 position,
 * int32 size, int64 base_offset, last_offset, max_timestamp, base_timestamp, int32 epoch, int8
 * magic, int32 attributes, record_count, uint32 crc), then uint8 ok and the int64 producer id,
 * epoch and base sequence: what storage/kafka/file_scan.py:scan_check_file returns, without numpy;
 * n_valid and txn_batches as recover counts them (the valid prefix, its transactional/control batches). */
static PyObject *walk_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 6, "walk_columns(fd, file_end, parts, search_bytes, verify_bytes, buffer_size)") < 0)
        return NULL;
    long fd = PyLong_AsLong(args[0]);
    int64_t file_end = mq_i64(args[1]), nparts = mq_i64(args[2]), search = mq_i64(args[3]), verify = mq_i64(args[4]);
    int64_t bsz = mq_i64(args[5]);
    if (PyErr_Occurred()) return NULL;
    if (file_end < 0 || bsz < 64 || nparts < 1 || nparts > MK_MAX_PARTS) {
        PyErr_SetString(PyExc_ValueError, "walk_columns: bad arguments");
        return NULL;
    }
    mk_part parts[MK_MAX_PARTS];
    memset(parts, 0, sizeof parts);
    int k_last = 0, oom;
    int64_t reason = STOP_END, valid_end = 0, count = 0;
    Py_BEGIN_ALLOW_THREADS
    oom = mk_walk_file(fd, file_end, nparts, search, verify, bsz, parts, &k_last, &reason, &valid_end);
    Py_END_ALLOW_THREADS
    PyObject *res = NULL, *cols = NULL;
    if (oom) {
        PyErr_NoMemory();
        goto done;
    }
    if (reason != STOP_READ_ERROR)
        for (int k = 0; k <= k_last; k++) count += parts[k].n;
    static const Py_ssize_t isz[15] = {8, 4, 8, 8, 8, 8, 4, 1, 4, 4, 4, 1, 8, 8, 8};
    cols = PyTuple_New(15);
    if (!cols) goto done;
    for (int c = 0; c < 15; c++) {
        PyObject *b = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(count * isz[c]));
        if (!b) goto done;
        PyTuple_SET_ITEM(cols, c, b);
        char *w = PyBytes_AS_STRING(b);
        for (int k = 0; k <= k_last && count; k++) {
            mk_part *t = &parts[k];
            const void *src = c == 0 ? (const void *)t->c.position : c == 1 ? (const void *)t->c.size
                : c == 2 ? (const void *)t->c.base_offset : c == 3 ? (const void *)t->c.last_offset
                : c == 4 ? (const void *)t->c.max_ts : c == 5 ? (const void *)t->c.base_ts
                : c == 6 ? (const void *)t->c.epoch : c == 7 ? (const void *)t->c.magic
                : c == 8 ? (const void *)t->c.attrs : c == 9 ? (const void *)t->c.count
                : c == 10 ? (const void *)t->c.crc : c == 11 ? (const void *)t->ok : (const void *)t->prod[c - 12];
            size_t nb = (size_t)(t->n * isz[c]);
            if (nb) memcpy(w, src, nb);
            w += nb;
        }
    }
    int64_t n_valid = 0, txn = 0, bad = 0;
    for (int k = 0; k <= k_last && count && !bad; k++) {
        mk_part *t = &parts[k];
        for (int64_t i = 0; i < t->n; i++) {
            if (!t->ok[i]) {
                bad = 1;
                break;
            }
            n_valid++;
            if (t->c.magic[i] >= 2 && (t->c.attrs[i] & 0x30)) txn++;
        }
    }
    res = Py_BuildValue("(LLLLLO)", (long long)reason, (long long)valid_end, (long long)count, (long long)n_valid,
                        (long long)txn, cols);
done:
    Py_XDECREF(cols);
    for (int k = 0; k < MK_MAX_PARTS; k++) mk_part_free(&parts[k]);
    return res;
}

/* index_columns(raw, entry_size, base) -> (keys, values, padding_start)
 * The entries of an index file's bytes (every whole slot) as two int64 columns (bytes), offsets
 * made absolute: .index (entry_size 8) keys = offsets, values = positions; .timeindex (12) keys =
 * timestamps, values = offsets.  padding_start: the first slot > 0 whose relative offset is 0
 * (DumpLogSegments' rule), else the number of slots. */
static PyObject *index_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 3, "index_columns(raw, entry_size, base)") < 0) return NULL;
    int64_t esz = mq_i64(args[1]), base = mq_i64(args[2]);
    if (PyErr_Occurred()) return NULL;
    if (esz != 8 && esz != 12) {
        PyErr_SetString(PyExc_ValueError, "index_columns: entry_size must be 8 or 12");
        return NULL;
    }
    Py_buffer b;
    if (mq_view(args[0], &b, 0, 0, "raw") < 0) return NULL;
    int64_t n = (int64_t)b.len / esz, pad = n;
    PyObject *kb = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    PyObject *vb = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    if (!kb || !vb) {
        Py_XDECREF(kb);
        Py_XDECREF(vb);
        PyBuffer_Release(&b);
        return NULL;
    }
    int64_t *k = (int64_t *)PyBytes_AS_STRING(kb), *v = (int64_t *)PyBytes_AS_STRING(vb);
    const uint8_t *a = (const uint8_t *)b.buf;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n; i++) {
        const uint8_t *e = a + i * esz;
        int32_t rel;
        if (esz == 8) {
            rel = mq_be32(e);
            k[i] = base + rel;
            v[i] = mq_be32(e + 4);
        } else {
            rel = mq_be32(e + 8);
            k[i] = mq_be64(e);
            v[i] = base + rel;
        }
        if (rel == 0 && i > 0 && pad == n) pad = i;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return Py_BuildValue("(NNL)", kb, vb, (long long)pad);
}

/* order_events(magic, base_offset, last_offset, base, limit) -> (first_below, [i, ...])
 * The offset-order check of verify: whether the first batch (v2) starts below the segment's base
 * offset, and the first `limit` batches i + 1 whose first offset (the last offset of a legacy
 * message) is not above the last offset of batch i. */
static PyObject *order_events(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 5, "order_events(magic, base_offset, last_offset, base, limit)") < 0) return NULL;
    int64_t base = mq_i64(args[3]), limit = mq_i64(args[4]);
    if (PyErr_Occurred()) return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *mg = mq_views_add(&vs, args[0], 1, 0, "magic");
    Py_buffer *bo = mg ? mq_views_add(&vs, args[1], 8, 0, "base_offset") : NULL;
    Py_buffer *lo = bo ? mq_views_add(&vs, args[2], 8, 0, "last_offset") : NULL;
    if (!lo) {
        mq_views_release(&vs);
        return NULL;
    }
    int64_t n = mq_len(mg);
    if (mq_len(bo) < n || mq_len(lo) < n) {
        mq_views_release(&vs);
        PyErr_SetString(PyExc_ValueError, "order_events: columns differ in length");
        return NULL;
    }
    const int8_t *m = (const int8_t *)mg->buf;
    const int64_t *b = (const int64_t *)bo->buf, *l = (const int64_t *)lo->buf;
    int below = n > 0 && m[0] >= 2 && b[0] < base;
    PyObject *out = PyList_New(0);
    for (int64_t i = 0; out && i + 1 < n && PyList_GET_SIZE(out) < limit; i++) {
        int64_t first = m[i + 1] < 2 ? l[i + 1] : b[i + 1];
        if (first <= l[i]) {
            PyObject *x = PyLong_FromLongLong((long long)i);
            if (!x || PyList_Append(out, x) < 0) Py_CLEAR(out);
            Py_XDECREF(x);
        }
    }
    mq_views_release(&vs);
    if (!out) return NULL;
    return Py_BuildValue("(ON)", below ? Py_True : Py_False, out);
}

/* The searches below use mq_lower_bound (mq_common.h): the plain binary search, which gives
 * numpy's searchsorted answer for one key on an unsorted column too. */

/* batch number of a batch start position (positions strictly increase), or -1 */
static inline int64_t mk_batch_at(const int64_t *pos, int64_t n, int64_t p)
{
    int64_t i = mq_lower_bound(pos, 0, n, p);
    return i < n && pos[i] == p ? i : -1;
}

/* Kafka's largest-lower-bound slot search of spec 3.7 (kernels/kafka/index_search.py:index_search_py) */
static int64_t mk_index_search(const int64_t *col, int64_t n, int64_t target, int64_t warm)
{
    if (n == 0) return -1;
    int64_t first_hot = n - 1 - warm > 0 ? n - 1 - warm : 0, lo, hi;
    if (col[first_hot] < target) {
        lo = first_hot;
        hi = n - 1;
    } else {
        if (col[0] > target) return -1;
        lo = 0;
        hi = first_hot;
    }
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) >> 1, v = col[mid];
        if (v > target) hi = mid - 1;
        else if (v < target) lo = mid;
        else return mid;
    }
    return lo;
}

/* events codes of the offset-index check (kernels/kafka/index_check.py) */
#define MK_OI_NOT_AFTER 1
#define MK_OI_NOT_BATCH_START 2
#define MK_OI_MULTI_BATCH 3
#define MK_OI_MISMATCH 4

/* offset_index_events(positions, last_offsets, keys, values) -> [(slot, code, log_offset), ...]
 * (kernels/kafka/index_check.py:offset_index_events_py) */
static PyObject *offset_index_events(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 4, "offset_index_events(positions, last_offsets, keys, values)") < 0) return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *pv = mq_views_add(&vs, args[0], 8, 0, "positions");
    Py_buffer *lv = pv ? mq_views_add(&vs, args[1], 8, 0, "last_offsets") : NULL;
    Py_buffer *kv = lv ? mq_views_add(&vs, args[2], 8, 0, "keys") : NULL;
    Py_buffer *vv = kv ? mq_views_add(&vs, args[3], 8, 0, "values") : NULL;
    if (!vv) {
        mq_views_release(&vs);
        return NULL;
    }
    int64_t n = mq_len(pv), m = mq_len(kv);
    if (mq_len(lv) != n || mq_len(vv) != m) {
        mq_views_release(&vs);
        PyErr_SetString(PyExc_ValueError, "offset_index_events: columns differ in length");
        return NULL;
    }
    const int64_t *pos = (const int64_t *)pv->buf, *last = (const int64_t *)lv->buf;
    const int64_t *keys = (const int64_t *)kv->buf, *vals = (const int64_t *)vv->buf;
    int64_t *ev = malloc((size_t)(m + 1) * 3 * sizeof *ev), ne = 0;
    if (!ev) {
        mq_views_release(&vs);
        return PyErr_NoMemory();
    }
    Py_BEGIN_ALLOW_THREADS
    for (int64_t s = 0; s < m; s++) {
        int64_t o = keys[s], p = vals[s], code = 0, val = 0;
        if (s && (o <= keys[s - 1] || p < vals[s - 1])) {
            code = MK_OI_NOT_AFTER;
        } else {
            int64_t idx = mk_batch_at(pos, n, p);
            if (idx < 0) {
                code = MK_OI_NOT_BATCH_START;
            } else if (last[idx] != o) {
                int64_t k = mq_lower_bound(last, idx, n, o);
                val = last[idx];
                code = k < n && last[k] == o && (k == idx || last[idx] < o) ? MK_OI_MULTI_BATCH : MK_OI_MISMATCH;
            }
        }
        if (code) {
            ev[3 * ne] = s;
            ev[3 * ne + 1] = code;
            ev[3 * ne + 2] = val;
            ne++;
        }
    }
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    PyObject *out = PyList_New(ne);
    for (int64_t i = 0; out && i < ne; i++) {
        PyObject *t = Py_BuildValue("(LLL)", (long long)ev[3 * i], (long long)ev[3 * i + 1], (long long)ev[3 * i + 2]);
        if (!t) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, t);
    }
    free(ev);
    return out;
}

/* event codes of the time-index check (kernels/kafka/index_check.py) */
#define MK_TI_ORDER_ONLY 0
#define MK_TI_NOT_FOUND 1
#define MK_TI_OTHER_OFFSET 2
#define MK_TI_TS_MISMATCH 3
#define MK_TI_DECODE 4

/* The largest record timestamp of the v2 batch at pos (total bytes size) read into *buf (grown as
 * needed; -1 for a batch without records): 0 and *ts, or 1 when this loop does not decode it
 * (legacy, compressed, cut, or records the body walk of parse_bodies rejects: the caller decodes it
 * with the record codec), or -1 (out of memory). */
static int mk_batch_max_ts(int fd, int64_t file_end, int64_t pos, int64_t size, int8_t magic, int32_t attrs,
                           int32_t count, int64_t base_ts, int64_t max_ts, uint8_t **buf, int64_t *bcap, int64_t *ts)
{
    if (magic < 2 || (attrs & 7) != 0 || size < 61 || count < 0 || pos < 0 || pos + size > file_end) return 1;
    if (size > *bcap) {
        uint8_t *q = realloc(*buf, (size_t)size);
        if (!q) return -1;
        *buf = q;
        *bcap = size;
    }
    const uint8_t *a = *buf;
    if (fill(fd, *buf, size, pos, pos + size) != size) return 1;
    int64_t bstart = 61, bend = size, bcount = count, bbase = 0, nr = 0, nh = 0, eb = -1;
    uint8_t la = (attrs & 8) != 0;
    mk_bodies bd = {a, size, 1, &bstart, &bend, &bcount, &bbase, &base_ts, &max_ts, &la};
    mk_rec_out ro;
    memset(&ro, 0, sizeof ro);
    if (mk_parse_bodies(&bd, INT64_MIN, INT64_MAX, 0, &ro, &nr, &nh, &eb) != MK_OK) return 1;
    /* the walk accepted every record: their timestamps (length, attributes, timestamp delta) */
    int64_t best = -1, p = 61, nx;
    for (int64_t r = 0; r < count; r++) {
        int64_t length = mk_varint(a, p, size, 5, &nx);
        int64_t rec_end = nx + length;
        int64_t tsd = mk_varint(a, nx + 1, rec_end, 10, &nx);
        int64_t t = la ? max_ts : mk_wrap_add(base_ts, tsd);
        if (t > best) best = t;
        p = rec_end;
    }
    *ts = best;
    return 0;
}

/* time_index_events(fd, file_end, positions, sizes, last_offsets, ok, magic, attributes, record_count,
 *                   base_timestamp, max_timestamp, timestamps, offsets, oi_keys, oi_values, warm)
 *   -> [(slot, code, batch, log_value, out_of_order), ...]
 * (kernels/kafka/index_check.py:time_index_events_py) */
static PyObject *time_index_events(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 16, "time_index_events(fd, file_end, positions, sizes, last_offsets, ok, magic, "
                                  "attributes, record_count, base_timestamp, max_timestamp, timestamps, offsets, "
                                  "oi_keys, oi_values, warm)") < 0)
        return NULL;
    long fd = PyLong_AsLong(args[0]);
    int64_t file_end = mq_i64(args[1]), warm = mq_i64(args[15]);
    if (PyErr_Occurred()) return NULL;
    static const Py_ssize_t isz[13] = {8, 4, 8, 1, 1, 4, 4, 8, 8, 8, 8, 8, 8};
    static const char *names[13] = {"positions", "sizes", "last_offsets", "ok", "magic", "attributes",
                                    "record_count", "base_timestamp", "max_timestamp", "timestamps", "offsets",
                                    "oi_keys", "oi_values"};
    mq_views vs = {.n = 0};
    Py_buffer *v[13];
    for (int i = 0; i < 13; i++) {
        v[i] = mq_views_add(&vs, args[2 + i], isz[i], 0, names[i]);
        if (!v[i]) {
            mq_views_release(&vs);
            return NULL;
        }
    }
    int64_t n = mq_len(v[0]), m = mq_len(v[9]), no = mq_len(v[11]);
    int bad = mq_len(v[10]) != m || mq_len(v[12]) != no;
    for (int i = 1; i < 9; i++) bad |= mq_len(v[i]) != n;
    if (bad) {
        mq_views_release(&vs);
        PyErr_SetString(PyExc_ValueError, "time_index_events: columns differ in length");
        return NULL;
    }
    const int64_t *pos = v[0]->buf, *last = v[2]->buf, *bts = v[7]->buf, *bmax = v[8]->buf;
    const int32_t *size = v[1]->buf, *attrs = v[5]->buf, *cnt = v[6]->buf;
    const uint8_t *ok = v[3]->buf;
    const int8_t *magic = v[4]->buf;
    const int64_t *ts = v[9]->buf, *off = v[10]->buf, *ok_keys = v[11]->buf, *ok_vals = v[12]->buf;
    int64_t *ev = malloc((size_t)(m + 1) * 5 * sizeof *ev), ne = 0;
    if (!ev) {
        mq_views_release(&vs);
        return PyErr_NoMemory();
    }
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    int keys_inc = 1;
    for (int64_t i = 1; i < no && keys_inc; i++) keys_inc = ok_keys[i] > ok_keys[i - 1];
    uint8_t *buf = NULL;
    int64_t bcap = 0, cached_k = -1, cached_ts = 0;
    int cached_st = 1;
    for (int64_t s = 0; s < m; s++) {
        int64_t t = ts[s], o = off[s], k = 0;
        if (n) {
            int64_t slot = keys_inc ? mq_lower_bound(ok_keys, 0, no, o + (o < INT64_MAX)) - 1
                                    : mk_index_search(ok_keys, no, o, warm);
            if (keys_inc && o == INT64_MAX) slot = no - 1;
            int64_t start = slot >= 0 ? ok_vals[slot] : 0;
            int64_t idx = mk_batch_at(pos, n, start);
            if (idx < 0) idx = 0;
            k = mq_lower_bound(last, idx, n, o);
        }
        int64_t code = MK_TI_ORDER_ONLY, log_value = 0;
        if (k >= n || !ok[k]) {
            code = MK_TI_NOT_FOUND;
            log_value = -1;
        } else if (last[k] != o) {
            code = MK_TI_OTHER_OFFSET;
            log_value = last[k];
        } else {
            if (k != cached_k) {
                cached_st = mk_batch_max_ts((int)fd, file_end, pos[k], size[k], magic[k], attrs[k], cnt[k], bts[k],
                                            bmax[k], &buf, &bcap, &cached_ts);
                if (cached_st < 0) {
                    oom = 1;
                    break;
                }
                cached_k = k;
            }
            if (cached_st) code = MK_TI_DECODE;
            else if (cached_ts != t) {
                code = MK_TI_TS_MISMATCH;
                log_value = cached_ts;
            }
        }
        int ooo = s > 0 && ts[s - 1] >= t;
        if (code != MK_TI_ORDER_ONLY || ooo) {
            int64_t *e = ev + 5 * ne++;
            e[0] = s;
            e[1] = code;
            e[2] = k;
            e[3] = log_value;
            e[4] = ooo;
        }
    }
    free(buf);
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    if (oom) {
        free(ev);
        return PyErr_NoMemory();
    }
    PyObject *out = PyList_New(ne);
    for (int64_t i = 0; out && i < ne; i++) {
        int64_t *e = ev + 5 * i;
        PyObject *x = Py_BuildValue("(LLLLO)", (long long)e[0], (long long)e[1], (long long)e[2], (long long)e[3],
                                    e[4] ? Py_True : Py_False);
        if (!x) Py_CLEAR(out);
        else PyList_SET_ITEM(out, i, x);
    }
    free(ev);
    return out;
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
    {"walk_columns", (PyCFunction)(void (*)(void))walk_columns, METH_FASTCALL,
     "walk_columns(fd, file_end, parts, search_bytes, verify_bytes, buffer_size) -> (reason, valid_end, count, n_valid, "
     "txn_batches, columns)"},
    {"index_columns", (PyCFunction)(void (*)(void))index_columns, METH_FASTCALL,
     "index_columns(raw, entry_size, base) -> (keys, values, padding_start)"},
    {"order_events", (PyCFunction)(void (*)(void))order_events, METH_FASTCALL,
     "order_events(magic, base_offset, last_offset, base, limit) -> (first_below, [i, ...])"},
    {"offset_index_events", (PyCFunction)(void (*)(void))offset_index_events, METH_FASTCALL,
     "offset_index_events(positions, last_offsets, keys, values) -> [(slot, code, log_offset), ...]"},
    {"time_index_events", (PyCFunction)(void (*)(void))time_index_events, METH_FASTCALL,
     "time_index_events(fd, file_end, positions, sizes, last_offsets, ok, magic, attributes, record_count, "
     "base_timestamp, max_timestamp, timestamps, offsets, oi_keys, oi_values, warm) -> [(slot, code, batch, value, "
     "out_of_order), ...]"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nat_kafka", "mqstore's native Kafka kernels", -1, methods};

PyMODINIT_FUNC PyInit__nat_kafka(void)
{
    mq_init_checksums(NULL);
    return PyModule_Create(&module);
}
