/* mqstore.kernels._nat_crc: checksums of many spans of one buffer (the native twin of
 * mqstore/kernels/crc.py's compiled kernels). */
#include "mq_common.h"

/* spans(buf, starts int64[n], lens int64[n], out int64[n], kind): kind 0 = CRC-32, 1 = CRC-32C */
static PyObject *spans(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "spans(buf, starts, lens, out, kind)");
        return NULL;
    }
    long kind = PyLong_AsLong(args[4]);
    if (kind == -1 && PyErr_Occurred()) return NULL;
    Py_buffer b, s, l, o;
    if (mq_view(args[0], &b, 0, 0, "buf") < 0) return NULL;
    if (mq_view(args[1], &s, 8, 0, "starts") < 0) goto e0;
    if (mq_view(args[2], &l, 8, 0, "lens") < 0) goto e1;
    if (mq_view(args[3], &o, 8, 1, "out") < 0) goto e2;
    Py_ssize_t n = mq_len(&s);
    if (mq_len(&l) != n || mq_len(&o) < n) {
        PyErr_SetString(PyExc_ValueError, "spans: starts, lens and out differ in length");
        goto e3;
    }
    const uint8_t *base = (const uint8_t *)b.buf;
    const int64_t *st = (const int64_t *)s.buf, *ln = (const int64_t *)l.buf;
    int64_t *out = (int64_t *)o.buf;
    int64_t size = (int64_t)b.len;
    for (Py_ssize_t k = 0; k < n; k++) {
        if (st[k] < 0 || ln[k] < 0 || st[k] > size - ln[k]) {
            PyErr_Format(PyExc_ValueError, "spans: span %zd lies outside the buffer of %lld bytes", k, (long long)size);
            goto e3;
        }
    }
    Py_BEGIN_ALLOW_THREADS
    if (kind == 1)
        for (Py_ssize_t k = 0; k < n; k++) out[k] = (int64_t)mq_crc32c(0, base + st[k], (size_t)ln[k]);
    else
        for (Py_ssize_t k = 0; k < n; k++) out[k] = (int64_t)mq_crc32(0, base + st[k], (size_t)ln[k]);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&o);
    PyBuffer_Release(&l);
    PyBuffer_Release(&s);
    PyBuffer_Release(&b);
    Py_RETURN_NONE;
e3:
    PyBuffer_Release(&o);
e2:
    PyBuffer_Release(&l);
e1:
    PyBuffer_Release(&s);
e0:
    PyBuffer_Release(&b);
    return NULL;
}

/* one(buf, crc, kind) -> int: the checksum of the whole buffer, continuing from crc */
static PyObject *one(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "one(buf, crc, kind)");
        return NULL;
    }
    unsigned long crc = PyLong_AsUnsignedLongMask(args[1]);
    long kind = PyLong_AsLong(args[2]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer b;
    if (mq_view(args[0], &b, 0, 0, "buf") < 0) return NULL;
    uint32_t r;
    Py_BEGIN_ALLOW_THREADS
    r = kind == 1 ? mq_crc32c((uint32_t)crc, b.buf, (size_t)b.len) : mq_crc32((uint32_t)crc, b.buf, (size_t)b.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    return PyLong_FromUnsignedLong(r);
}

static PyMethodDef methods[] = {
    MQ_BIND_CHECKSUMS_METHOD,
    {"spans", (PyCFunction)(void (*)(void))spans, METH_FASTCALL,
     "spans(buf, starts, lens, out, kind): CRC of each span into out (kind 0: CRC-32, 1: CRC-32C)"},
    {"one", (PyCFunction)(void (*)(void))one, METH_FASTCALL, "one(buf, crc, kind) -> the CRC of buf continuing from crc"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nat_crc", "mqstore's native checksum kernels", -1, methods};

PyMODINIT_FUNC PyInit__nat_crc(void)
{
    mq_init_checksums(NULL);
    return PyModule_Create(&module);
}
