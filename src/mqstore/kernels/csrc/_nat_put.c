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

static PyMethodDef methods[] = {
    MQ_BIND_CHECKSUMS_METHOD,
    {"encode_one_v1", (PyCFunction)(void (*)(void))encode_one_v1, METH_FASTCALL,
     "encode_one_v1(out, pos, body, topic_field, keys, uniq, tags, queue_id, flag, queue_offset, phys, born_ts, "
     "store_ts, host) -> size: one record of the common shape, TOTALSIZE written last"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nat_put", "mqstore's native put kernels", -1, methods};

PyMODINIT_FUNC PyInit__nat_put(void)
{
    mq_init_checksums(NULL);
    return PyModule_Create(&module);
}
