/* mqstore.kernels._nat_rmq_verify: the ConsumeQueue checks of `mqstore rocketmq verify` in C (the
 * native twins of mqstore/kernels/rocketmq/verify_check.py; every call runs without the GIL).
 *
 * check_units checks a run of 20-byte ConsumeQueue units (big-endian commitLogOffset int64, size
 * int32, tagsCode int64) against the records of one CommitLog window (columns sorted by offset),
 * stopping at the first unit whose offset is `hi` or more; cut finds that first row of any
 * fixed-size big-endian table (the IndexFile items' phyOffset).
 */
#include "mq_common.h"

#define UNIT_SIZE 20
#define INT_MAX32 2147483647LL
#define MAX_ADDR (-2147483648LL - 1)

typedef struct {
    const uint8_t *units;
    int64_t count, hi, lo, cl_min, first_qoff;
    const int64_t *starts;
    int64_t n;
    const int32_t *sizes, *topic_id, *queue_id;
    const int64_t *queue_offset, *tags_code;
    int64_t tid, qid;
    const int64_t *m_off, *m_qoff;
    int64_t m;
    uint8_t *codes;
} UnitArgs;

static int64_t check_units_run(const UnitArgs *a)
{
    int64_t cur = 0, prev = INT64_MIN;
    for (int64_t j = 0; j < a->count; j++) {
        const uint8_t *u = a->units + j * UNIT_SIZE;
        int64_t off = mq_be64(u), size = mq_be32(u + 8), tags = mq_be64(u + 12);
        if (off >= a->hi) return j;
        uint8_t c = 0;
        if (!(off == 0 && size == INT_MAX32) && off >= a->cl_min) {
            if (off < a->lo) {
                c = 8;
            } else {
                int64_t r = mq_locate(a->starts, a->n, off, &cur, &prev);
                if (r >= a->n || a->starts[r] != off || a->sizes[r] != size) {
                    c = 1;
                } else if (tags <= MAX_ADDR) {
                    c = 2;
                } else {
                    int64_t qoff = a->first_qoff + j;
                    int same = a->topic_id[r] == a->tid && a->queue_id[r] == a->qid && a->queue_offset[r] == qoff;
                    if (a->m > 0) {
                        int64_t k = mq_lower_bound(a->m_off, 0, a->m, off);
                        if (k > a->m - 1) k = a->m - 1;
                        same |= a->m_off[k] == off && a->m_qoff[k] == qoff;
                    }
                    if (!(same && a->tags_code[r] == tags)) c = 4;
                }
            }
        }
        a->codes[j] = c;
    }
    return a->count;
}

/* check_units(units u8, count, hi, lo, cl_min, first_qoff, starts i64, n, sizes i32, topic_id i32, queue_id i32,
 *             queue_offset i64, tags_code i64, tid, qid, m_off i64, m_qoff i64, codes u8) -> units checked */
static PyObject *check_units(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 18, "check_units(units, count, hi, lo, cl_min, first_qoff, starts, n, sizes, topic_id, "
                               "queue_id, queue_offset, tags_code, tid, qid, m_off, m_qoff, codes)") < 0)
        return NULL;
    UnitArgs a;
    if (mq_get_i64(args[1], &a.count) < 0 || mq_get_i64(args[2], &a.hi) < 0 || mq_get_i64(args[3], &a.lo) < 0 ||
        mq_get_i64(args[4], &a.cl_min) < 0 || mq_get_i64(args[5], &a.first_qoff) < 0 || mq_get_i64(args[7], &a.n) < 0 ||
        mq_get_i64(args[13], &a.tid) < 0 || mq_get_i64(args[14], &a.qid) < 0)
        return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *u, *st, *sz, *ti, *qi, *qo, *tc, *mo, *mq, *co;
    if (!(u = mq_views_add(&vs, args[0], 0, 0, "units")) || !(st = mq_views_add(&vs, args[6], 8, 0, "starts")) ||
        !(sz = mq_views_add(&vs, args[8], 4, 0, "sizes")) || !(ti = mq_views_add(&vs, args[9], 4, 0, "topic_id")) ||
        !(qi = mq_views_add(&vs, args[10], 4, 0, "queue_id")) || !(qo = mq_views_add(&vs, args[11], 8, 0, "queue_offset")) ||
        !(tc = mq_views_add(&vs, args[12], 8, 0, "tags_code")) || !(mo = mq_views_add(&vs, args[15], 8, 0, "m_off")) ||
        !(mq = mq_views_add(&vs, args[16], 8, 0, "m_qoff")) || !(co = mq_views_add(&vs, args[17], 1, 1, "codes")))
        goto fail;
    if (a.count < 0 || a.count > u->len / UNIT_SIZE || a.count > co->len || a.n < 0 || a.n > mq_len(st) ||
        a.n > mq_len(sz) || a.n > mq_len(ti) || a.n > mq_len(qi) || a.n > mq_len(qo) || a.n > mq_len(tc) ||
        mq_len(mq) < mq_len(mo)) {
        PyErr_SetString(PyExc_ValueError, "check_units: arrays shorter than their counts");
        goto fail;
    }
    a.units = u->buf;
    a.starts = st->buf;
    a.sizes = sz->buf;
    a.topic_id = ti->buf;
    a.queue_id = qi->buf;
    a.queue_offset = qo->buf;
    a.tags_code = tc->buf;
    a.m_off = mo->buf;
    a.m_qoff = mq->buf;
    a.m = mq_len(mo);
    a.codes = co->buf;
    int64_t done;
    Py_BEGIN_ALLOW_THREADS
    done = check_units_run(&a);
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    return PyLong_FromLongLong(done);
fail:
    mq_views_release(&vs);
    return NULL;
}

/* cut(rows u8, count, stride, pos, hi) -> the first row whose big-endian int64 at byte pos is hi or more
 * (count when none) */
static PyObject *cut(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (mq_check_nargs(nargs, 5, "cut(rows, count, stride, pos, hi)") < 0) return NULL;
    int64_t count, stride, pos, hi;
    if (mq_get_i64(args[1], &count) < 0 || mq_get_i64(args[2], &stride) < 0 || mq_get_i64(args[3], &pos) < 0 ||
        mq_get_i64(args[4], &hi) < 0)
        return NULL;
    mq_views vs = {.n = 0};
    Py_buffer *r;
    if (!(r = mq_views_add(&vs, args[0], 0, 0, "rows"))) goto fail;
    if (count < 0 || stride < 8 || pos < 0 || pos > stride - 8 || (count > 0 && count > r->len / stride)) {
        PyErr_SetString(PyExc_ValueError, "cut: rows shorter than count x stride, or pos outside a row");
        goto fail;
    }
    const uint8_t *b = r->buf;
    int64_t k = count;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t j = 0; j < count; j++) {
        if (mq_be64(b + j * stride + pos) >= hi) {
            k = j;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    mq_views_release(&vs);
    return PyLong_FromLongLong(k);
fail:
    mq_views_release(&vs);
    return NULL;
}

#define FAST(name, doc) {#name, (PyCFunction)(void (*)(void))name, METH_FASTCALL, doc}

static PyMethodDef methods[] = {
    MQ_BIND_CHECKSUMS_METHOD,
    FAST(check_units, "check_units(units, count, hi, lo, cl_min, first_qoff, starts, n, sizes, topic_id, queue_id, "
                      "queue_offset, tags_code, tid, qid, m_off, m_qoff, codes) -> units checked"),
    FAST(cut, "cut(rows, count, stride, pos, hi) -> first row whose big-endian int64 at pos is >= hi"),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nat_rmq_verify",
                                    "RocketMQ verify: ConsumeQueue units against a CommitLog window (native)", -1,
                                    methods};

PyMODINIT_FUNC PyInit__nat_rmq_verify(void)
{
    mq_init_checksums(NULL);
    return PyModule_Create(&module);
}
