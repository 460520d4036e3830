/* Shared helpers of mqstore's ahead-of-time compiled kernels (the _nat_*.c extension modules).
 *
 * Conventions of every native kernel:
 *   - arguments are Python buffers (bytes, mmap, memoryview, numpy arrays); output arrays are
 *     allocated by the Python wrapper and passed in writable, so no module needs numpy's C API;
 *   - every index read from the data is checked against the buffer before it is used: a corrupt
 *     length can only stop a kernel, never read outside its buffer;
 *   - long loops run without the GIL (the wrappers may call them from several threads);
 *   - checksums come from ISA-L (shipped inside the isal package) through symbols looked up once
 *     with dlsym in the library file the wrapper names (mq_bind_isal), with table-driven
 *     fallbacks here when that fails.
 */
#ifndef MQ_COMMON_H
#define MQ_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

/* ---------------------------------------------------------------- buffers */

/* A C-contiguous buffer view of obj whose items are `itemsize` bytes (0: any, counted in bytes).
 * Returns 0, or -1 with a Python exception set.  Release with PyBuffer_Release. */
static int mq_view(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, int writable, const char *what)
{
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, view, flags) < 0) {
        PyErr_Clear();
        if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0)) < 0) {
            PyErr_Format(PyExc_TypeError, "%s: expected a contiguous%s buffer", what, writable ? " writable" : "");
            return -1;
        }
    }
    if (itemsize && view->itemsize != itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of %zd bytes, got %zd", what, itemsize, view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* number of items of a view */
static inline Py_ssize_t mq_len(const Py_buffer *v) { return v->itemsize ? v->len / v->itemsize : v->len; }

/* ---------------------------------------------------------------- big-endian loads/stores */

static inline int32_t mq_be32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return (int32_t)__builtin_bswap32(v); }
static inline uint32_t mq_beu32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return __builtin_bswap32(v); }
static inline int64_t mq_be64(const uint8_t *p) { uint64_t v; memcpy(&v, p, 8); return (int64_t)__builtin_bswap64(v); }
static inline int16_t mq_be16(const uint8_t *p) { return (int16_t)(((uint16_t)p[0] << 8) | p[1]); }
static inline uint16_t mq_beu16(const uint8_t *p) { return (uint16_t)(((uint16_t)p[0] << 8) | p[1]); }
static inline void mq_put_be32(uint8_t *p, int32_t v) { uint32_t w = __builtin_bswap32((uint32_t)v); memcpy(p, &w, 4); }
static inline void mq_put_be64(uint8_t *p, int64_t v) { uint64_t w = __builtin_bswap64((uint64_t)v); memcpy(p, &w, 8); }

/* ---------------------------------------------------------------- checksums */

typedef uint32_t (*mq_isal_crc32c_fn)(const unsigned char *buf, int len, uint32_t init);      /* crc32_iscsi */
typedef uint32_t (*mq_isal_crc32_fn)(uint32_t init, const unsigned char *buf, uint64_t len);  /* crc32_gzip_refl */

static mq_isal_crc32c_fn mq_isal_crc32c = NULL;
static mq_isal_crc32_fn mq_isal_crc32 = NULL;
static uint32_t mq_tab32c[8][256];
static uint32_t mq_tab32[8][256];

static void mq_make_table(uint32_t t[8][256], uint32_t poly)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ poly : c >> 1;
        t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int s = 1; s < 8; s++) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
}

/* slice-by-8 over a reflected table; crc is the running (pre-inverted) register */
static uint32_t mq_crc_table_run(uint32_t t[8][256], uint32_t crc, const uint8_t *p, size_t n)
{
    while (n >= 8) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + 4, 4);
        lo ^= crc;
        crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
              t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) crc = t[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

/* CRC-32C (Castagnoli, Kafka's batch checksum), continuing from `crc` (0 for a fresh one) */
static uint32_t mq_crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
    if (mq_isal_crc32c) {
        uint32_t c = ~crc;
        while (n > 0) {
            int step = n > (1u << 30) ? (1 << 30) : (int)n;
            c = mq_isal_crc32c(p, step, c);
            p += step;
            n -= (size_t)step;
        }
        return ~c;
    }
    return ~mq_crc_table_run(mq_tab32c, ~crc, p, n);
}

/* zlib's CRC-32 (RocketMQ's body checksum), continuing from `crc` (0 for a fresh one) */
static uint32_t mq_crc32(uint32_t crc, const uint8_t *p, size_t n)
{
    if (mq_isal_crc32) return mq_isal_crc32(crc, p, (uint64_t)n);
    return ~mq_crc_table_run(mq_tab32, ~crc, p, n);
}

/* Fills the tables and, when `path` names a library with ISA-L's symbols, binds them.
 * Returns a bit set: 1 = crc32c bound, 2 = crc32 bound. */
static int mq_init_checksums(const char *path)
{
    mq_make_table(mq_tab32c, 0x82F63B78u);
    mq_make_table(mq_tab32, 0xEDB88320u);
    mq_isal_crc32c = NULL;
    mq_isal_crc32 = NULL;
    if (path && *path) {
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (h) {
            mq_isal_crc32c = (mq_isal_crc32c_fn)dlsym(h, "crc32_iscsi");
            mq_isal_crc32 = (mq_isal_crc32_fn)dlsym(h, "crc32_gzip_refl");
        }
    }
    return (mq_isal_crc32c ? 1 : 0) | (mq_isal_crc32 ? 2 : 0);
}

/* The module function every native module exports as `bind_checksums(path_or_None) -> int`. */
static PyObject *mq_py_bind_checksums(PyObject *self, PyObject *arg)
{
    (void)self;
    if (arg == Py_None) return PyLong_FromLong(mq_init_checksums(NULL));
    PyObject *b = PyUnicode_EncodeFSDefault(arg);
    if (!b) return NULL;
    int r = mq_init_checksums(PyBytes_AS_STRING(b));
    Py_DECREF(b);
    return PyLong_FromLong(r);
}

#define MQ_BIND_CHECKSUMS_METHOD \
    {"bind_checksums", (PyCFunction)mq_py_bind_checksums, METH_O, \
     "bind_checksums(path) -> bits: use ISA-L's CRC functions from the library at path (1: CRC-32C, 2: CRC-32)"}

/* An int64 argument from a Python int (-1 with an exception set on error: test PyErr_Occurred). */
static inline int64_t mq_i64(PyObject *o) { return (int64_t)PyLong_AsLongLong(o); }

/* ---------------------------------------------------------------- argument helpers */

/* The buffer views one call holds, released together (mq_views_release) on every exit path. */
#define MQ_MAX_VIEWS 24
typedef struct {
    Py_buffer v[MQ_MAX_VIEWS];
    int n;
} mq_views;

static inline void mq_views_release(mq_views *vs)
{
    for (int i = 0; i < vs->n; i++) PyBuffer_Release(&vs->v[i]);
    vs->n = 0;
}

/* view of obj (items of itemsize bytes, 0: bytes) kept in vs; NULL with an exception set on error */
static inline Py_buffer *mq_views_add(mq_views *vs, PyObject *obj, Py_ssize_t itemsize, int writable, const char *what)
{
    if (vs->n >= MQ_MAX_VIEWS) {
        PyErr_SetString(PyExc_SystemError, "mq_views: too many buffers in one call");
        return NULL;
    }
    if (mq_view(obj, &vs->v[vs->n], itemsize, writable, what) < 0) return NULL;
    return &vs->v[vs->n++];
}

static inline int mq_check_nargs(Py_ssize_t nargs, Py_ssize_t want, const char *sig)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s: expected %zd arguments, got %zd", sig, want, nargs);
        return -1;
    }
    return 0;
}

static inline int mq_get_i64(PyObject *o, int64_t *out)
{
    *out = mq_i64(o);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

/* ---------------------------------------------------------------- sorted search */

/* lower bound of x in the ascending a[lo:hi] */
static inline int64_t mq_lower_bound(const int64_t *a, int64_t lo, int64_t hi, int64_t x)
{
    while (lo < hi) {
        int64_t mid = lo + ((hi - lo) >> 1);
        if (a[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Where v lies in the ascending a[0:n]: lower bound (numpy's searchsorted, side left), galloping
 * from the previous answer *cur when the values ascend (the usual case: O(n + m) for m values),
 * else a binary search below it.  Start with *cur = 0, *prev = INT64_MIN. */
static inline int64_t mq_locate(const int64_t *a, int64_t n, int64_t v, int64_t *cur, int64_t *prev)
{
    int64_t c = *cur;
    if (v >= *prev) {
        int64_t step = 1, lo = c, hi = c;
        while (hi < n && a[hi] < v) {
            lo = hi + 1;
            hi += step;
            step <<= 1;
        }
        if (hi > n) hi = n;
        c = mq_lower_bound(a, lo, hi, v);
    } else {
        c = mq_lower_bound(a, 0, c, v);
    }
    *prev = v;
    *cur = c;
    return c;
}

#endif
