/* mqstore.kernels._nat_put: one CommitLog record of the common shape written in one call (the
 * native twin of mqstore/kernels/rocketmq/put.py's encode_one_v1).
 *
 * The common shape is what MessageStore.put writes for string keys and tags with a generated
 * unique key: magic v1 (topic field = length byte + topic), IPv4 born and store hosts (8 bytes
 * each), SYSFLAG 0, RECONSUMETIMES 0, PREPAREDTRANSACTIONOFFSET 0, and the properties
 * KEYS\x01k\x02UNIQ_KEY\x01u\x02TAGS\x01t\x02 (the Java HashMap order of the three names).
 * TOTALSIZE is stored last, after a compiler barrier: a process killed in the middle of the call
 * leaves 0 there, which recovery never takes for a record. */
#include "mq_common.h"

#define MAGIC_V1 ((int32_t)0xDAA320A7)

/* the UTF-8 bytes of an ASCII str (NULL with a ValueError otherwise: the caller checks ASCII) */
static const char *ascii_of(PyObject *o, Py_ssize_t *n, const char *what)
{
    if (!PyUnicode_Check(o) || !PyUnicode_IS_ASCII(o)) {
        PyErr_Format(PyExc_ValueError, "encode_one_v1: %s must be an ASCII str", what);
        return NULL;
    }
    *n = PyUnicode_GET_LENGTH(o);
    return (const char *)PyUnicode_DATA(o);
}

static inline uint8_t *put_text(uint8_t *p, const char *name, size_t nl, const char *v, Py_ssize_t vl)
{
    memcpy(p, name, nl);
    p += nl;
    memcpy(p, v, (size_t)vl);
    p += vl;
    *p++ = 2;
    return p;
}

/* encode_one_v1(out, pos, body, topic_field, keys, uniq, tags, queue_id, flag, queue_offset,
 *               phys, born_ts, store_ts, host) -> record size
 * out: writable buffer (the mapped segment); topic_field: length byte + topic (bytes); keys,
 * uniq, tags: ASCII str; host: the 8 bytes of the born and store host. */
static PyObject *encode_one_v1(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 14) {
        PyErr_SetString(PyExc_TypeError, "encode_one_v1(out, pos, body, topic_field, keys, uniq, tags, queue_id, flag, "
                                         "queue_offset, phys, born_ts, store_ts, host)");
        return NULL;
    }
    if (!PyBytes_Check(args[2]) || !PyBytes_Check(args[3]) || !PyBytes_Check(args[13])) {
        PyErr_SetString(PyExc_TypeError, "encode_one_v1: body, topic_field and host must be bytes");
        return NULL;
    }
    Py_ssize_t kl, ul, tl;
    const char *keys = ascii_of(args[4], &kl, "keys");
    if (!keys) return NULL;
    const char *uniq = ascii_of(args[5], &ul, "uniq");
    if (!uniq) return NULL;
    const char *tags = ascii_of(args[6], &tl, "tags");
    if (!tags) return NULL;
    int64_t pos = mq_i64(args[1]);
    int64_t qid = mq_i64(args[7]);
    int64_t flag = mq_i64(args[8]);
    int64_t qo = mq_i64(args[9]);
    int64_t phys = mq_i64(args[10]);
    int64_t born = mq_i64(args[11]);
    int64_t now = mq_i64(args[12]);
    if (PyErr_Occurred()) return NULL;
    const uint8_t *body = (const uint8_t *)PyBytes_AS_STRING(args[2]);
    Py_ssize_t bl = PyBytes_GET_SIZE(args[2]);
    const uint8_t *tf = (const uint8_t *)PyBytes_AS_STRING(args[3]);
    Py_ssize_t tfl = PyBytes_GET_SIZE(args[3]);
    const uint8_t *host = (const uint8_t *)PyBytes_AS_STRING(args[13]);
    if (PyBytes_GET_SIZE(args[13]) != 8 || tfl < 2 || tfl > 128 || tf[0] != tfl - 1) {
        PyErr_SetString(PyExc_ValueError, "encode_one_v1: bad topic field or host");
        return NULL;
    }
    if (qid < INT32_MIN || qid > INT32_MAX || flag < INT32_MIN || flag > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "encode_one_v1: queue id or flag out of the int32 range");
        return NULL;
    }
    int64_t pl = 5 + (int64_t)kl + 1 + 9 + (int64_t)ul + 1 + 5 + (int64_t)tl + 1;
    int64_t size = 88 + (int64_t)bl + (int64_t)tfl + 2 + pl;
    if (pl > 32767 || size > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "encode_one_v1: record too large");
        return NULL;
    }
    Py_buffer o;
    if (mq_view(args[0], &o, 0, 1, "out") < 0) return NULL;
    if (pos < 0 || pos > (int64_t)o.len - size) {
        PyBuffer_Release(&o);
        PyErr_SetString(PyExc_ValueError, "encode_one_v1: the record does not fit in the output buffer");
        return NULL;
    }
    uint8_t *r = (uint8_t *)o.buf + pos;
    uint32_t crc = mq_crc32(0, body, (size_t)bl) & 0x7FFFFFFFu;
    mq_put_be32(r + 4, MAGIC_V1);
    mq_put_be32(r + 8, (int32_t)crc);
    mq_put_be32(r + 12, (int32_t)qid);
    mq_put_be32(r + 16, (int32_t)flag);
    mq_put_be64(r + 20, qo);
    mq_put_be64(r + 28, phys);
    mq_put_be32(r + 36, 0);
    mq_put_be64(r + 40, born);
    memcpy(r + 48, host, 8);
    mq_put_be64(r + 56, now);
    memcpy(r + 64, host, 8);
    mq_put_be32(r + 72, 0);
    mq_put_be64(r + 76, 0);
    mq_put_be32(r + 84, (int32_t)bl);
    uint8_t *p = r + 88;
    memcpy(p, body, (size_t)bl);
    p += bl;
    memcpy(p, tf, (size_t)tfl);
    p += tfl;
    *p++ = (uint8_t)(pl >> 8);
    *p++ = (uint8_t)pl;
    p = put_text(p, "KEYS\x01", 5, keys, kl);
    p = put_text(p, "UNIQ_KEY\x01", 9, uniq, ul);
    p = put_text(p, "TAGS\x01", 5, tags, tl);
    __atomic_signal_fence(__ATOMIC_SEQ_CST); /* every byte above is stored before TOTALSIZE */
    mq_put_be32(r, (int32_t)size);
    PyBuffer_Release(&o);
    return PyLong_FromLongLong(size);
}

/* encode_common_into(out, pos, lo, hi, sizes, phys, store_ts, bodies, topics, topic_off, topic_len,
 *                    props, props_off, props_len, queue_id, flag, queue_offset, born_ts, host) -> end
 * Records lo:hi of a batch of the common shape (magic v1, IPv4 born = store host, SYSFLAG 0,
 * RECONSUMETIMES 0, PREPAREDTRANSACTIONOFFSET 0) written back to back into out from pos: bodies is
 * the list of body bytes objects (no join: the CRC is computed while the body is copied),
 * topics/props are uint8 buffers addressed by int64 offset/length columns, sizes/phys/queue_id/
 * flag/queue_offset/born_ts are int64 columns.  The bytes equal those of put.py's
 * encode_records_into on the same records; each record's TOTALSIZE is stored after its content. */
typedef struct {
    Py_buffer v;
    int held;
} nat_buf;

static int get_i64_col(PyObject *o, nat_buf *b, Py_ssize_t need, const char *what)
{
    if (mq_view(o, &b->v, 8, 0, what) < 0) return -1;
    b->held = 1;
    if (mq_len(&b->v) < need) {
        PyErr_Format(PyExc_ValueError, "encode_common_into: %s is shorter than the batch", what);
        return -1;
    }
    return 0;
}

static PyObject *encode_common_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    enum { N_BUFS = 12 };
    if (nargs != 19) {
        PyErr_SetString(PyExc_TypeError, "encode_common_into(out, pos, lo, hi, sizes, phys, store_ts, bodies, topics, "
                                         "topic_off, topic_len, props, props_off, props_len, queue_id, flag, "
                                         "queue_offset, born_ts, host)");
        return NULL;
    }
    int64_t pos = mq_i64(args[1]), lo = mq_i64(args[2]), hi = mq_i64(args[3]), now = mq_i64(args[6]);
    if (PyErr_Occurred()) return NULL;
    PyObject *bodies = args[7];
    if (!PyList_Check(bodies) || !PyBytes_Check(args[18]) || PyBytes_GET_SIZE(args[18]) != 8) {
        PyErr_SetString(PyExc_TypeError, "encode_common_into: bodies must be a list and host 8 bytes");
        return NULL;
    }
    if (lo < 0 || hi < lo || hi > PyList_GET_SIZE(bodies)) {
        PyErr_SetString(PyExc_ValueError, "encode_common_into: bad record range");
        return NULL;
    }
    nat_buf b[N_BUFS];
    memset(b, 0, sizeof b);
    PyObject *ret = NULL;
    const uint8_t **src = NULL;
    /* 0 out, 1 sizes, 2 phys, 3 topics, 4 topic_off, 5 topic_len, 6 props, 7 props_off, 8 props_len,
     * 9 queue_id, 10 flag, 11 queue_offset; born_ts separately below */
    nat_buf born;
    memset(&born, 0, sizeof born);
    if (mq_view(args[0], &b[0].v, 0, 1, "out") < 0) goto done;
    b[0].held = 1;
    if (get_i64_col(args[4], &b[1], hi, "sizes") < 0 || get_i64_col(args[5], &b[2], hi, "phys") < 0) goto done;
    if (mq_view(args[8], &b[3].v, 0, 0, "topics") < 0) goto done;
    b[3].held = 1;
    if (get_i64_col(args[9], &b[4], hi, "topic_off") < 0 || get_i64_col(args[10], &b[5], hi, "topic_len") < 0) goto done;
    if (mq_view(args[11], &b[6].v, 0, 0, "props") < 0) goto done;
    b[6].held = 1;
    if (get_i64_col(args[12], &b[7], hi, "props_off") < 0 || get_i64_col(args[13], &b[8], hi, "props_len") < 0
        || get_i64_col(args[14], &b[9], hi, "queue_id") < 0 || get_i64_col(args[15], &b[10], hi, "flag") < 0
        || get_i64_col(args[16], &b[11], hi, "queue_offset") < 0 || get_i64_col(args[17], &born, hi, "born_ts") < 0)
        goto done;
    const int64_t *sizes = b[1].v.buf, *phys = b[2].v.buf, *toff = b[4].v.buf, *tlen = b[5].v.buf;
    const int64_t *poff = b[7].v.buf, *plen = b[8].v.buf, *qid = b[9].v.buf, *flag = b[10].v.buf;
    const int64_t *qo = b[11].v.buf, *bts = born.v.buf;
    const uint8_t *topics = b[3].v.buf, *props = b[6].v.buf;
    const uint8_t *host = (const uint8_t *)PyBytes_AS_STRING(args[18]);
    int64_t ntop = b[3].v.len, nprops = b[6].v.len;
    src = PyMem_Malloc(sizeof(*src) * (size_t)(hi - lo + 1));
    if (!src) {
        PyErr_NoMemory();
        goto done;
    }
    int64_t end = pos;
    for (int64_t i = lo; i < hi; i++) { /* every check before the first byte is written */
        PyObject *bo = PyList_GET_ITEM(bodies, i);
        if (!PyBytes_Check(bo)) {
            PyErr_SetString(PyExc_TypeError, "encode_common_into: every body must be bytes");
            goto done;
        }
        int64_t bl = PyBytes_GET_SIZE(bo), tl = tlen[i], pl = plen[i];
        if (tl < 1 || tl > 127 || toff[i] < 0 || toff[i] > ntop - tl || pl < 0 || pl > 32767 || poff[i] < 0
            || poff[i] > nprops - pl || qid[i] < INT32_MIN || qid[i] > INT32_MAX || flag[i] < INT32_MIN
            || flag[i] > INT32_MAX || sizes[i] != 91 + bl + tl + pl) {
            PyErr_SetString(PyExc_ValueError, "encode_common_into: record column out of bounds");
            goto done;
        }
        src[i - lo] = (const uint8_t *)PyBytes_AS_STRING(bo);
        end += sizes[i];
    }
    if (pos < 0 || end > (int64_t)b[0].v.len) {
        PyErr_SetString(PyExc_ValueError, "encode_common_into: records do not fit in the output buffer");
        goto done;
    }
    uint8_t *out = b[0].v.buf;
    Py_BEGIN_ALLOW_THREADS
    int64_t p = pos;
    for (int64_t i = lo; i < hi; i++) {
        uint8_t *r = out + p;
        int64_t total = sizes[i], tl = tlen[i], pl = plen[i];
        int64_t bl = total - 91 - tl - pl;
        const uint8_t *body = src[i - lo];
        mq_put_be32(r + 4, MAGIC_V1);
        mq_put_be32(r + 12, (int32_t)qid[i]);
        mq_put_be32(r + 16, (int32_t)flag[i]);
        mq_put_be64(r + 20, qo[i]);
        mq_put_be64(r + 28, phys[i]);
        mq_put_be32(r + 36, 0);
        mq_put_be64(r + 40, bts[i]);
        memcpy(r + 48, host, 8);
        mq_put_be64(r + 56, now);
        memcpy(r + 64, host, 8);
        mq_put_be32(r + 72, 0);
        mq_put_be64(r + 76, 0);
        mq_put_be32(r + 84, (int32_t)bl);
        uint8_t *q = r + 88;
        memcpy(q, body, (size_t)bl);
        mq_put_be32(r + 8, (int32_t)(mq_crc32(0, q, (size_t)bl) & 0x7FFFFFFFu)); /* the copy is in cache */
        q += bl;
        *q++ = (uint8_t)tl;
        memcpy(q, topics + toff[i], (size_t)tl);
        q += tl;
        *q++ = (uint8_t)(pl >> 8);
        *q++ = (uint8_t)pl;
        memcpy(q, props + poff[i], (size_t)pl);
        __atomic_signal_fence(__ATOMIC_SEQ_CST); /* the record's bytes are stored before its TOTALSIZE */
        mq_put_be32(r, (int32_t)total);
        p += total;
    }
    Py_END_ALLOW_THREADS
    ret = PyLong_FromLongLong(end);
done:
    PyMem_Free(src);
    for (int k = 0; k < N_BUFS; k++)
        if (b[k].held) PyBuffer_Release(&b[k].v);
    if (born.held) PyBuffer_Release(&born.v);
    return ret;
}

static PyMethodDef methods[] = {
    MQ_BIND_CHECKSUMS_METHOD,
    {"encode_one_v1", (PyCFunction)(void (*)(void))encode_one_v1, METH_FASTCALL,
     "encode_one_v1(out, pos, body, topic_field, keys, uniq, tags, queue_id, flag, queue_offset, phys, born_ts, "
     "store_ts, host) -> size: one record of the common shape, TOTALSIZE written last"},
    {"encode_common_into", (PyCFunction)(void (*)(void))encode_common_into, METH_FASTCALL,
     "encode_common_into(out, pos, lo, hi, sizes, phys, store_ts, bodies, topics, topic_off, topic_len, props, "
     "props_off, props_len, queue_id, flag, queue_offset, born_ts, host) -> end: records lo:hi of the common "
     "shape from a list of bodies, each TOTALSIZE written last"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nat_put", "mqstore's native put kernels", -1, methods};

PyMODINIT_FUNC PyInit__nat_put(void)
{
    mq_init_checksums(NULL);
    return PyModule_Create(&module);
}
