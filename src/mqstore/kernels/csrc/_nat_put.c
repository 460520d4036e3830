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
#include "structmember.h"
#include <time.h>

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

/* One record of the common shape written into the buffer `out` at `pos` (every argument checked
 * first; nothing is written on an error).  body, topic_field, host: bytes; keys, uniq, tags: ASCII
 * str; expect: the size the caller counted on (-1: any).  Returns the record size, or -1 with an
 * exception set. */
static int64_t one_v1_write(PyObject *out_obj, int64_t pos, PyObject *body_o, PyObject *tf_o, PyObject *keys_o,
                            PyObject *uniq_o, PyObject *tags_o, int64_t qid, int64_t flag, int64_t qo, int64_t phys,
                            int64_t born, int64_t now, PyObject *host_o, int64_t expect)
{
    if (!PyBytes_Check(body_o) || !PyBytes_Check(tf_o) || !PyBytes_Check(host_o)) {
        PyErr_SetString(PyExc_TypeError, "encode_one_v1: body, topic_field and host must be bytes");
        return -1;
    }
    Py_ssize_t kl, ul, tl;
    const char *keys = ascii_of(keys_o, &kl, "keys");
    if (!keys) return -1;
    const char *uniq = ascii_of(uniq_o, &ul, "uniq");
    if (!uniq) return -1;
    const char *tags = ascii_of(tags_o, &tl, "tags");
    if (!tags) return -1;
    const uint8_t *body = (const uint8_t *)PyBytes_AS_STRING(body_o);
    Py_ssize_t bl = PyBytes_GET_SIZE(body_o);
    const uint8_t *tf = (const uint8_t *)PyBytes_AS_STRING(tf_o);
    Py_ssize_t tfl = PyBytes_GET_SIZE(tf_o);
    const uint8_t *host = (const uint8_t *)PyBytes_AS_STRING(host_o);
    if (PyBytes_GET_SIZE(host_o) != 8 || tfl < 2 || tfl > 128 || tf[0] != tfl - 1) {
        PyErr_SetString(PyExc_ValueError, "encode_one_v1: bad topic field or host");
        return -1;
    }
    if (qid < INT32_MIN || qid > INT32_MAX || flag < INT32_MIN || flag > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "encode_one_v1: queue id or flag out of the int32 range");
        return -1;
    }
    int64_t pl = 5 + (int64_t)kl + 1 + 9 + (int64_t)ul + 1 + 5 + (int64_t)tl + 1;
    int64_t size = 88 + (int64_t)bl + (int64_t)tfl + 2 + pl;
    if (pl > 32767 || size > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "encode_one_v1: record too large");
        return -1;
    }
    if (expect >= 0 && size != expect) {
        PyErr_SetString(PyExc_ValueError, "append_common: size is not the record's size");
        return -1;
    }
    Py_buffer o;
    if (mq_view(out_obj, &o, 0, 1, "out") < 0) return -1;
    if (pos < 0 || pos > (int64_t)o.len - size) {
        PyBuffer_Release(&o);
        PyErr_SetString(PyExc_ValueError, "encode_one_v1: the record does not fit in the output buffer");
        return -1;
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
    return size;
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
    int64_t pos = mq_i64(args[1]);
    int64_t qid = mq_i64(args[7]);
    int64_t flag = mq_i64(args[8]);
    int64_t qo = mq_i64(args[9]);
    int64_t phys = mq_i64(args[10]);
    int64_t born = mq_i64(args[11]);
    int64_t now = mq_i64(args[12]);
    if (PyErr_Occurred()) return NULL;
    int64_t size = one_v1_write(args[0], pos, args[2], args[3], args[4], args[5], args[6], qid, flag, qo, phys, born,
                                now, args[13], -1);
    return size < 0 ? NULL : PyLong_FromLongLong(size);
}

/* ---------------------------------------------------------------- the single put's locked section */

/* The attribute names the locked section reads and writes (interned at module init). */
static PyObject *s_cl_queue, *s_files, *s_queue_offsets, *s_config, *s_clock, *s_store_host_b, *s_last_put_ts,
    *s_ts_runs, *s_wrote_position, *s_file_size, *s_file_from_offset, *s_mm_raw, *s_mm, *s_closed, *s_read_only,
    *s_background_error, *s_check_writable, *s_max_fast_size, *s_max_body, *s_put_lock, *s_acquire, *s_release,
    *s_roll_for, *s_reput_from_offset, *s_reput_wake_bytes, *s_wake, *s_is_set, *s_set, *s_head, *s_head_for, *s_count, *mask16;
static PyObject *s_fields[5]; /* topic, body, queue_id, keys, tags */

#define BLANK_RECORD_SIZE 8 /* formats/rocketmq/record.py: the end-of-segment filler the next record must leave room for */

/* an int attribute of o as int64 (-1 with an exception set when it is not one) */
static int get_i64_attr(PyObject *o, PyObject *name, int64_t *out)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    *out = mq_i64(v);
    Py_DECREF(v);
    return (*out == -1 && PyErr_Occurred()) ? -1 : 0;
}

static int set_i64_attr(PyObject *o, PyObject *name, int64_t v)
{
    PyObject *x = PyLong_FromLongLong(v);
    if (!x) return -1;
    int rc = PyObject_SetAttr(o, name, x);
    Py_DECREF(x);
    return rc;
}

/* The locked section (the caller holds the put lock): the record goes to the last segment at its
 * write position when it leaves BLANK_RECORD_SIZE bytes after it, else None (nothing written or
 * changed: the caller rolls the segment and calls again).  The store time is config.clock() or the
 * wall clock in ms; the queue offset is queue_offsets.get((topic, queue_id), 0), then advanced;
 * the segment's wrote_position moves past the record; a (offset, store time) run is appended to
 * _ts_runs when the store time changed.  args as append_common's. */
static PyObject *common_section(PyObject *const *args, int64_t qid, int64_t born, int64_t size)
{
    PyObject *store = args[0];
    PyObject *ret = NULL, *queue = NULL, *files = NULL, *mf = NULL, *table = NULL, *key = NULL, *mm = NULL;
    PyObject *host = NULL, *runs = NULL, *cfg = NULL, *clock = NULL;
    queue = PyObject_GetAttr(store, s_cl_queue);
    if (!queue) goto done;
    files = PyObject_GetAttr(queue, s_files);
    if (!files) goto done;
    if (!PyList_Check(files)) {
        PyErr_SetString(PyExc_TypeError, "append_common: the segment list is not a list");
        goto done;
    }
    if (PyList_GET_SIZE(files) == 0) {
        ret = Py_NewRef(Py_None);
        goto done;
    }
    mf = Py_NewRef(PyList_GET_ITEM(files, PyList_GET_SIZE(files) - 1));
    int64_t pos, fsize, from;
    if (get_i64_attr(mf, s_wrote_position, &pos) < 0 || get_i64_attr(mf, s_file_size, &fsize) < 0
        || get_i64_attr(mf, s_file_from_offset, &from) < 0)
        goto done;
    if (size <= 0 || pos < 0 || pos + size + BLANK_RECORD_SIZE > fsize) { /* the roll rule: the caller rolls */
        ret = Py_NewRef(Py_None);
        goto done;
    }
    cfg = PyObject_GetAttr(store, s_config);
    if (!cfg) goto done;
    clock = PyObject_GetAttr(cfg, s_clock);
    if (!clock) goto done;
    int64_t now;
    if (clock == Py_None) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts); /* time.time_ns() // 1_000_000 */
        now = ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec) / 1000000;
    } else {
        PyObject *t = PyObject_CallNoArgs(clock);
        if (!t) goto done;
        PyObject *ti = PyNumber_Long(t); /* int(clock()) */
        Py_DECREF(t);
        if (!ti) goto done;
        now = mq_i64(ti);
        Py_DECREF(ti);
        if (now == -1 && PyErr_Occurred()) goto done;
    }
    table = PyObject_GetAttr(store, s_queue_offsets);
    if (!table) goto done;
    if (!PyDict_Check(table)) {
        PyErr_SetString(PyExc_TypeError, "append_common: queue_offsets is not a dict");
        goto done;
    }
    key = PyTuple_Pack(2, args[1], args[7]);
    if (!key) goto done;
    int64_t qo = 0;
    PyObject *cur = PyDict_GetItemWithError(table, key); /* borrowed */
    if (cur) {
        qo = mq_i64(cur);
        if (qo == -1 && PyErr_Occurred()) goto done;
    } else if (PyErr_Occurred()) {
        goto done;
    }
    host = PyObject_GetAttr(store, s_store_host_b);
    if (!host) goto done;
    mm = PyObject_GetAttr(mf, s_mm_raw);
    if (mm == Py_None) { /* a closed segment: the property raises the store's error */
        Py_DECREF(mm);
        mm = PyObject_GetAttr(mf, s_mm);
    }
    if (!mm) goto done;
    int64_t phys = from + pos;
    if (one_v1_write(mm, pos, args[3], args[2], args[4], args[5], args[6], qid, 0, qo, phys, born, now, host, size) < 0)
        goto done;
    if (set_i64_attr(mf, s_wrote_position, pos + size) < 0) goto done;
    PyObject *nq = PyLong_FromLongLong(qo + 1);
    if (!nq) goto done;
    int rc = PyDict_SetItem(table, key, nq);
    Py_DECREF(nq);
    if (rc < 0) goto done;
    int64_t last;
    if (get_i64_attr(store, s_last_put_ts, &last) < 0) goto done;
    if (now != last) {
        runs = PyObject_GetAttr(store, s_ts_runs);
        if (!runs) goto done;
        PyObject *run = Py_BuildValue("(LL)", (long long)phys, (long long)now);
        if (!run) goto done;
        rc = PyList_Check(runs) ? PyList_Append(runs, run) : -1;
        Py_DECREF(run);
        if (rc < 0) {
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "append_common: _ts_runs is not a list");
            goto done;
        }
        if (set_i64_attr(store, s_last_put_ts, now) < 0) goto done;
    }
    ret = Py_BuildValue("(LLL)", (long long)phys, (long long)qo, (long long)now);
done:
    Py_XDECREF(queue);
    Py_XDECREF(files);
    Py_XDECREF(mf);
    Py_XDECREF(table);
    Py_XDECREF(key);
    Py_XDECREF(mm);
    Py_XDECREF(host);
    Py_XDECREF(runs);
    Py_XDECREF(cfg);
    Py_XDECREF(clock);
    return ret;
}

/* a true attribute (-1 with an exception set) */
static int attr_true(PyObject *o, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(o, name);
    if (!v) return -1;
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

static int call_method0(PyObject *o, PyObject *name)
{
    PyObject *r = PyObject_CallMethodNoArgs(o, name);
    if (!r) return -1;
    Py_DECREF(r);
    return 0;
}

/* append_common(store, topic, topic_field, body, keys, uniq, tags, queue_id, born_ts, size)
 *   -> (commit log offset, queue offset, store timestamp) | None
 * RocketMQStore.append_common of an async-flush store in one call: the native twin of
 * put_one.append_common_py.  A store that is closed, read-only or whose background service failed
 * (store._closed, read_only, background_error) gets store._check_writable() (which raises); a
 * record above store._max_fast_size or with a body above store._max_body or properties above
 * 32767 bytes gives None (nothing written: the caller takes the checked path, which reports it).
 * Under store._put_lock: the locked section (common_section), with store._roll_for(size) and a
 * second try when the record does not fit in the last segment.  Then the reput service is woken
 * (store._wake.set()) when store._reput_wake_bytes or more are written past
 * store.reput_from_offset and it is not set yet. */
static PyObject *append_common(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "append_common(store, topic, topic_field, body, keys, uniq, tags, queue_id, "
                                         "born_ts, size)");
        return NULL;
    }
    PyObject *store = args[0];
    int64_t qid = mq_i64(args[7]), born = mq_i64(args[8]), size = mq_i64(args[9]);
    if (PyErr_Occurred()) return NULL;
    if (!PyBytes_Check(args[2]) || !PyBytes_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "append_common: topic_field and body must be bytes");
        return NULL;
    }
    int closed = attr_true(store, s_closed);
    int ro = closed < 0 ? -1 : attr_true(store, s_read_only);
    if (ro < 0) return NULL;
    PyObject *err = PyObject_GetAttr(store, s_background_error);
    if (!err) return NULL;
    int failed = err != Py_None;
    Py_DECREF(err);
    if ((closed || ro || failed) && call_method0(store, s_check_writable) < 0) return NULL;
    int64_t max_fast, max_body;
    if (get_i64_attr(store, s_max_fast_size, &max_fast) < 0 || get_i64_attr(store, s_max_body, &max_body) < 0)
        return NULL;
    int64_t bl = PyBytes_GET_SIZE(args[3]), tfl = PyBytes_GET_SIZE(args[2]);
    if (size > max_fast || bl > max_body || size - bl - tfl > 90 + 32767) /* 90 bytes of head + the properties */
        Py_RETURN_NONE;
    PyObject *lock = PyObject_GetAttr(store, s_put_lock);
    if (!lock) return NULL;
    if (call_method0(lock, s_acquire) < 0) {
        Py_DECREF(lock);
        return NULL;
    }
    PyObject *got = common_section(args, qid, born, size);
    if (got == Py_None) { /* the end-of-segment rule: a blank filler and a new segment, then the record */
        Py_DECREF(got);
        PyObject *r = PyObject_CallMethodOneArg(store, s_roll_for, args[9]);
        if (r) {
            Py_DECREF(r);
            got = common_section(args, qid, born, size);
            if (got == Py_None) {
                Py_DECREF(got);
                got = NULL;
                PyErr_SetString(PyExc_RuntimeError, "append_common: the record does not fit in a new segment");
            }
        } else {
            got = NULL;
        }
    }
    PyObject *et, *ev, *tb;
    PyErr_Fetch(&et, &ev, &tb); /* the release runs with or without an error */
    int rel = call_method0(lock, s_release);
    Py_DECREF(lock);
    if (rel < 0) {
        Py_XDECREF(got);
        Py_XDECREF(et);
        Py_XDECREF(ev);
        Py_XDECREF(tb);
        return NULL;
    }
    PyErr_Restore(et, ev, tb);
    if (!got) return NULL;
    int64_t phys = mq_i64(PyTuple_GET_ITEM(got, 0)), from, wake_bytes;
    if (get_i64_attr(store, s_reput_from_offset, &from) < 0 || get_i64_attr(store, s_reput_wake_bytes, &wake_bytes) < 0) {
        Py_DECREF(got);
        return NULL;
    }
    if (phys + size - from >= wake_bytes) { /* once per dispatch round: Event.set takes a lock and notifies */
        PyObject *wake = PyObject_GetAttr(store, s_wake);
        PyObject *isset = wake ? PyObject_CallMethodNoArgs(wake, s_is_set) : NULL;
        int set = isset ? PyObject_IsTrue(isset) : -1;
        Py_XDECREF(isset);
        if (set == 0) set = call_method0(wake, s_set);
        Py_XDECREF(wake);
        if (set < 0) {
            Py_DECREF(got);
            return NULL;
        }
    }
    return got;
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

/* ---------------------------------------------------------------- batch columns: properties, queue ranks */

/* build_common_props(keys, keys_off, keys_len, tags, tags_off, tags_len, uniq_head, counter0, out, out_off)
 * -> None: the native twin of put_nb._build_props.  Message i's properties text
 * [KEYS\x01k\x02]UNIQ_KEY\x01<head><4 hex of (counter0 + i) & 0xFFFF>\x02[TAGS\x01t\x02] (KEYS/TAGS
 * absent when their length is < 0) is written at out[out_off[i]:]. keys/tags/out: uint8 buffers,
 * the offset and length columns: int64, uniq_head: 28 bytes.  ValueError "record column out of bounds" when a span
 * lies outside its buffer. */
static PyObject *build_common_props(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "build_common_props(keys, keys_off, keys_len, tags, tags_off, tags_len, "
                                         "uniq_head, counter0, out, out_off)");
        return NULL;
    }
    static const int idx[9] = {0, 1, 2, 3, 4, 5, 6, 8, 9};
    static const Py_ssize_t isz[9] = {1, 8, 8, 1, 8, 8, 1, 1, 8};
    static const char *what[9] = {"keys", "keys_off", "keys_len", "tags", "tags_off", "tags_len", "uniq_head", "out",
                                  "out_off"};
    Py_buffer v[9];
    int got = 0;
    PyObject *ret = NULL;
    for (; got < 9; got++)
        if (mq_view(args[idx[got]], &v[got], isz[got], idx[got] == 8, what[got]) < 0) goto done;
    int64_t c0 = mq_i64(args[7]);
    if (c0 == -1 && PyErr_Occurred()) goto done;
    int64_t n = v[2].len / 8;
    if (v[1].len / 8 != n || v[4].len / 8 != n || v[5].len / 8 != n || v[8].len / 8 != n || v[6].len != 28) {
        PyErr_SetString(PyExc_ValueError, "build_common_props: columns of different lengths or a bad unique-key head");
        goto done;
    }
    const uint8_t *keys = v[0].buf, *tags = v[3].buf, *head = v[6].buf;
    const int64_t *ko = v[1].buf, *kl = v[2].buf, *to = v[4].buf, *tl = v[5].buf, *oo = v[8].buf;
    uint8_t *out = v[7].buf;
    int64_t nk = v[0].len, nt = v[3].len, no = v[7].len;
    static const char hexd[] = "0123456789ABCDEF";
    int bad = 0;
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n; i++) {
        int64_t k = kl[i], t = tl[i], p = oo[i];
        int64_t len = (k >= 0 ? k + 6 : 0) + 9 + 28 + 5 + (t >= 0 ? t + 6 : 0);
        if (p < 0 || p + len > no || (k >= 0 && (ko[i] < 0 || ko[i] + k > nk)) || (t >= 0 && (to[i] < 0 || to[i] + t > nt))) {
            bad = 1;
            break;
        }
        uint8_t *q = out + p;
        if (k >= 0) {
            memcpy(q, "KEYS\x01", 5);
            memcpy(q + 5, keys + ko[i], (size_t)k);
            q += 5 + k;
            *q++ = 2;
        }
        memcpy(q, "UNIQ_KEY\x01", 9);
        memcpy(q + 9, head, 28);
        q += 37;
        int64_t c = (c0 + i) & 0xFFFF;
        for (int d = 0; d < 4; d++) q[d] = (uint8_t)hexd[(c >> (12 - 4 * d)) & 0xF];
        q[4] = 2;
        q += 5;
        if (t >= 0) {
            memcpy(q, "TAGS\x01", 5);
            memcpy(q + 5, tags + to[i], (size_t)t);
            q[5 + t] = 2;
        }
    }
    Py_END_ALLOW_THREADS
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "record column out of bounds");
        goto done;
    }
    ret = Py_NewRef(Py_None);
done:
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    return ret;
}

/* queue_ranks(codes, takes, rank, seen) -> None: the native twin of put_nb._queue_ranks.  For
 * codes (int64) in [0, len(seen)): rank[i] = the number of earlier records j with codes[j] ==
 * codes[i] and takes[j] (0 where not takes[i]); seen[c] += the number of records of code c that
 * take (seen given zeroed).  takes: one byte per record (bool); rank, seen: int64, writable.
 * ValueError "queue code out of range" for a code outside [0, len(seen)) (nothing written). */
static PyObject *queue_ranks(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "queue_ranks(codes, takes, rank, seen)");
        return NULL;
    }
    static const Py_ssize_t isz[4] = {8, 1, 8, 8};
    static const char *what[4] = {"codes", "takes", "rank", "seen"};
    Py_buffer v[4];
    int got = 0;
    PyObject *ret = NULL;
    for (; got < 4; got++)
        if (mq_view(args[got], &v[got], isz[got], got >= 2, what[got]) < 0) goto done;
    int64_t n = v[0].len / 8, nslots = v[3].len / 8;
    if (v[1].len != n || v[2].len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "queue_ranks: columns of different lengths");
        goto done;
    }
    const int64_t *codes = v[0].buf;
    const uint8_t *takes = v[1].buf;
    int64_t *rank = v[2].buf, *seen = v[3].buf;
    for (int64_t i = 0; i < n; i++)
        if (codes[i] < 0 || codes[i] >= nslots) {
            PyErr_SetString(PyExc_ValueError, "queue code out of range");
            goto done;
        }
    Py_BEGIN_ALLOW_THREADS
    for (int64_t i = 0; i < n; i++) {
        if (takes[i]) {
            int64_t c = codes[i];
            rank[i] = seen[c];
            seen[c]++;
        } else {
            rank[i] = 0;
        }
    }
    Py_END_ALLOW_THREADS
    ret = Py_NewRef(Py_None);
done:
    for (int k = 0; k < got; k++) PyBuffer_Release(&v[k]);
    return ret;
}

/* ---------------------------------------------------------------- the put's result */

/* bind_put_result(cls, slots): the result class of a single put and the member descriptors of its
 * 6 fields (commit_log_offset, queue_offset, store_timestamp, size, msg_id, uniq_key: writable
 * object slots of cls, a slots dataclass). */
#define N_RESULT_FIELDS 6
static PyTypeObject *result_type = NULL;
static Py_ssize_t result_off[N_RESULT_FIELDS];

static PyObject *bind_put_result(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2 || !PyType_Check(args[0]) || !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) != N_RESULT_FIELDS) {
        PyErr_SetString(PyExc_TypeError, "bind_put_result(cls, 6 member descriptors)");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)args[0];
    Py_ssize_t off[N_RESULT_FIELDS];
    for (int i = 0; i < N_RESULT_FIELDS; i++) {
        PyObject *d = PyTuple_GET_ITEM(args[1], i);
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyDescrObject *)d)->d_type != t ||
            ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX ||
            (((PyMemberDescrObject *)d)->d_member->flags & READONLY)) {
            PyErr_Format(PyExc_TypeError, "bind_put_result: field %d is not a writable object slot of the class", i);
            return NULL;
        }
        off[i] = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    Py_INCREF(t);
    Py_XSETREF(result_type, t);
    memcpy(result_off, off, sizeof off);
    Py_RETURN_NONE;
}

/* put_result(offset, queue_offset, store_timestamp, size, msgid_prefix: str, uniq_key) -> the
 * bound class's object, msg_id = msgid_prefix + the offset as 16 upper-case hex digits (the
 * offset message id: f"{prefix}{offset:016X}" for 0 <= offset < 2**64) */
static PyObject *put_result(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6 || !PyUnicode_Check(args[4])) {
        PyErr_SetString(PyExc_TypeError, "put_result(offset, queue_offset, store_timestamp, size, prefix: str, uniq_key)");
        return NULL;
    }
    if (!result_type) {
        PyErr_SetString(PyExc_RuntimeError, "put_result: bind_put_result was not called");
        return NULL;
    }
    int64_t off = mq_i64(args[0]);
    if (off == -1 && PyErr_Occurred()) return NULL;
    if (off < 0) {
        PyErr_SetString(PyExc_ValueError, "put_result: negative offset");
        return NULL;
    }
    char hex[16];
    static const char digits[] = "0123456789ABCDEF";
    for (int i = 15; i >= 0; i--) {
        hex[i] = digits[off & 15];
        off >>= 4;
    }
    PyObject *tail = PyUnicode_FromStringAndSize(hex, 16);
    if (!tail) return NULL;
    PyObject *id = PyUnicode_Concat(args[4], tail);
    Py_DECREF(tail);
    if (!id) return NULL;
    PyObject *r = result_type->tp_alloc(result_type, 0);
    if (!r) {
        Py_DECREF(id);
        return NULL;
    }
    PyObject *v[N_RESULT_FIELDS] = {Py_NewRef(args[0]), Py_NewRef(args[1]), Py_NewRef(args[2]), Py_NewRef(args[3]), id,
                                   Py_NewRef(args[5])};
    for (int i = 0; i < N_RESULT_FIELDS; i++) *(PyObject **)((char *)r + result_off[i]) = v[i];
    return r;
}

/* ---------------------------------------------------------------- the whole common-shape put */

static int has_sep(PyObject *ascii)
{
    const char *p = (const char *)PyUnicode_DATA(ascii);
    Py_ssize_t n = PyUnicode_GET_LENGTH(ascii);
    return memchr(p, 1, (size_t)n) != NULL || memchr(p, 2, (size_t)n) != NULL;
}

/* put_plain(store, uniq_gen, msgid_prefix, topic, topic_field, body, keys, tags, queue_id)
 *   -> result | str | None
 * MessageStore.put of the common shape after its argument checks (the native twin of
 * put_one.put_plain_py): None when keys or tags are not ASCII (nothing done: the caller takes its
 * other path); otherwise the born time (store.config.clock() or the wall clock, ms), the unique
 * key (uniq_gen.head's prefix for that ms, or uniq_gen.head_for(ms)'s, and the 4 upper-case hex
 * digits of next(uniq_gen.count) & 0xFFFF), and append_common with the record's size.  Returns the
 * put_result of the record, or the unique key (a str) when append_common gave None (a record too
 * large for the path: the caller writes it by its checked path with that key).  A sync-flush
 * store's caller does not use it. */
static PyObject *put_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 9 || !PyUnicode_Check(args[2]) || !PyUnicode_Check(args[6]) || !PyUnicode_Check(args[7])
        || !PyBytes_Check(args[4]) || !PyBytes_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError, "put_plain(store, uniq_gen, msgid_prefix: str, topic, topic_field: bytes, "
                                         "body: bytes, keys: str, tags: str, queue_id)");
        return NULL;
    }
    if (!result_type) {
        PyErr_SetString(PyExc_RuntimeError, "put_plain: bind_put_result was not called");
        return NULL;
    }
    PyObject *keys = args[6], *tags = args[7], *gen = args[1];
    if (!PyUnicode_IS_ASCII(keys) || !PyUnicode_IS_ASCII(tags) || has_sep(keys) || has_sep(tags)) Py_RETURN_NONE;
    PyObject *cfg = PyObject_GetAttr(args[0], s_config);
    if (!cfg) return NULL;
    PyObject *clock = PyObject_GetAttr(cfg, s_clock);
    Py_DECREF(cfg);
    if (!clock) return NULL;
    int64_t now;
    if (clock == Py_None) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        now = ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec) / 1000000;
        Py_DECREF(clock);
    } else {
        PyObject *t = PyObject_CallNoArgs(clock);
        Py_DECREF(clock);
        PyObject *ti = t ? PyNumber_Long(t) : NULL;
        Py_XDECREF(t);
        if (!ti) return NULL;
        now = mq_i64(ti);
        Py_DECREF(ti);
        if (now == -1 && PyErr_Occurred()) return NULL;
    }
    /* the unique key: the prefix of this ms, then the counter */
    PyObject *head = PyObject_GetAttr(gen, s_head), *prefix = NULL;
    if (!head) return NULL;
    if (PyTuple_Check(head) && PyTuple_GET_SIZE(head) == 2 && PyLong_Check(PyTuple_GET_ITEM(head, 0))
        && PyLong_AsLongLong(PyTuple_GET_ITEM(head, 0)) == now && PyUnicode_Check(PyTuple_GET_ITEM(head, 1))) {
        prefix = Py_NewRef(PyTuple_GET_ITEM(head, 1));
    } else {
        PyErr_Clear();
        PyObject *ms = PyLong_FromLongLong(now);
        PyObject *h = ms ? PyObject_CallMethodOneArg(gen, s_head_for, ms) : NULL;
        Py_XDECREF(ms);
        if (h && PyTuple_Check(h) && PyTuple_GET_SIZE(h) == 2 && PyUnicode_Check(PyTuple_GET_ITEM(h, 1)))
            prefix = Py_NewRef(PyTuple_GET_ITEM(h, 1));
        else if (h)
            PyErr_SetString(PyExc_TypeError, "put_plain: head_for() did not give (ms, str)");
        Py_XDECREF(h);
    }
    Py_DECREF(head);
    if (!prefix) return NULL;
    PyObject *count = PyObject_GetAttr(gen, s_count);
    PyObject *c = count ? PyIter_Next(count) : NULL;
    Py_XDECREF(count);
    if (!c) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "put_plain: the counter ended");
        Py_DECREF(prefix);
        return NULL;
    }
    PyObject *low = PyNumber_And(c, mask16);
    Py_DECREF(c);
    int64_t cv = low ? mq_i64(low) : -1;
    Py_XDECREF(low);
    if (cv < 0) {
        Py_DECREF(prefix);
        return NULL;
    }
    static const char hexd[] = "0123456789ABCDEF";
    char hx[4];
    for (int d = 0; d < 4; d++) hx[d] = hexd[(cv >> (12 - 4 * d)) & 0xF];
    PyObject *tail = PyUnicode_FromStringAndSize(hx, 4);
    PyObject *uniq = tail ? PyUnicode_Concat(prefix, tail) : NULL;
    Py_XDECREF(tail);
    Py_DECREF(prefix);
    if (!uniq) return NULL;
    if (!PyUnicode_IS_ASCII(uniq)) {
        Py_DECREF(uniq);
        PyErr_SetString(PyExc_ValueError, "put_plain: the unique key is not ASCII");
        return NULL;
    }
    int64_t size = 88 + 2 + 5 + 1 + 9 + 1 + 5 + 1 + PyBytes_GET_SIZE(args[5]) + PyBytes_GET_SIZE(args[4])
                   + PyUnicode_GET_LENGTH(keys) + PyUnicode_GET_LENGTH(uniq) + PyUnicode_GET_LENGTH(tags);
    PyObject *born = PyLong_FromLongLong(now), *sz = PyLong_FromLongLong(size);
    PyObject *got = NULL;
    if (born && sz) {
        PyObject *a[10] = {args[0], args[3], args[4], args[5], keys, uniq, tags, args[8], born, sz};
        got = append_common(self, a, 10);
    }
    Py_XDECREF(born);
    if (!got) {
        Py_XDECREF(sz);
        Py_DECREF(uniq);
        return NULL;
    }
    if (got == Py_None) { /* too large for this path: the caller's checked path, with this key */
        Py_DECREF(got);
        Py_DECREF(sz);
        return uniq;
    }
    PyObject *ra[6] = {PyTuple_GET_ITEM(got, 0), PyTuple_GET_ITEM(got, 1), PyTuple_GET_ITEM(got, 2), sz, args[2], uniq};
    PyObject *r = put_result(self, ra, 6);
    Py_DECREF(got);
    Py_DECREF(sz);
    Py_DECREF(uniq);
    return r;
}

/* ---------------------------------------------------------------- put_batch: the fields of plain dicts */

/* gather_plain(msgs, queue_ids, body_len) -> (topics, bodies, keys, tags) | None
 * The native twin of put_one.gather_plain_py: one pass over a list of dicts of the plain batch
 * shape, each an exact dict whose only keys are among topic (str), body (bytes), queue_id (int in
 * [0, 2**31), default 0), keys and tags (str or None, default None), with topic and body present.
 * Fills queue_ids and body_len (int64, writable, one per message) and returns the four columns as
 * lists; None (the outputs partly filled) when a message has another shape (the caller then takes
 * its general passes). */
static PyObject *gather_plain(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "gather_plain(msgs: list, queue_ids, body_len)");
        return NULL;
    }
    PyObject *msgs = args[0];
    Py_ssize_t n = PyList_GET_SIZE(msgs);
    Py_buffer qv, lv;
    if (mq_view(args[1], &qv, 8, 1, "queue_ids") < 0) return NULL;
    if (mq_view(args[2], &lv, 8, 1, "body_len") < 0) {
        PyBuffer_Release(&qv);
        return NULL;
    }
    PyObject *ret = NULL, *cols[4] = {NULL, NULL, NULL, NULL};
    if (qv.len / 8 != n || lv.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "gather_plain: queue_ids and body_len need one slot per message");
        goto done;
    }
    for (int k = 0; k < 4; k++)
        if (!(cols[k] = PyList_New(n))) goto done;
    int64_t *qo = qv.buf, *bl = lv.buf;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = PyList_GET_ITEM(msgs, i);
        if (!PyDict_CheckExact(m)) goto other;
        PyObject *v[5];
        Py_ssize_t found = 0;
        for (int k = 0; k < 5; k++) {
            v[k] = PyDict_GetItemWithError(m, s_fields[k]); /* borrowed */
            if (v[k]) found++;
            else if (PyErr_Occurred()) goto done;
        }
        if (found != PyDict_GET_SIZE(m) || !v[0] || !v[1] || !PyUnicode_CheckExact(v[0]) || !PyBytes_CheckExact(v[1]))
            goto other;
        int64_t q = 0;
        if (v[2]) {
            if (!PyLong_CheckExact(v[2])) goto other;
            int ovf;
            long long x = PyLong_AsLongLongAndOverflow(v[2], &ovf);
            if (ovf || x < 0 || x > INT32_MAX) goto other;
            q = x;
        }
        for (int k = 3; k < 5; k++) {
            if (!v[k]) v[k] = Py_None;
            else if (v[k] != Py_None && !PyUnicode_CheckExact(v[k])) goto other;
        }
        qo[i] = q;
        bl[i] = PyBytes_GET_SIZE(v[1]);
        PyList_SET_ITEM(cols[0], i, Py_NewRef(v[0]));
        PyList_SET_ITEM(cols[1], i, Py_NewRef(v[1]));
        PyList_SET_ITEM(cols[2], i, Py_NewRef(v[3]));
        PyList_SET_ITEM(cols[3], i, Py_NewRef(v[4]));
    }
    ret = PyTuple_Pack(4, cols[0], cols[1], cols[2], cols[3]);
    goto done;
other:
    ret = Py_NewRef(Py_None);
done:
    for (int k = 0; k < 4; k++) Py_XDECREF(cols[k]); /* unset items of a partly filled list are NULL: fine */
    PyBuffer_Release(&qv);
    PyBuffer_Release(&lv);
    return ret;
}

/* gather_columns(bodies, queue_ids, flags, qids, flg, body_len) -> bool
 * The native twin of put_one.gather_columns_py: the column checks of a columnar put in one pass
 * over three lists of n values: every body an exact bytes, every queue id an exact int in
 * [0, 2**31), every flag an exact int in [-2**31, 2**31).  Fills qids, flg and body_len (int64,
 * writable, n each) and returns True; False (the outputs partly filled) when a value is not so. */
static int exact_int_in(PyObject *o, long long lo, long long hi, int64_t *out)
{
    if (!PyLong_CheckExact(o)) return 0;
    int ovf;
    long long x = PyLong_AsLongLongAndOverflow(o, &ovf);
    if (ovf || x < lo || x >= hi) return 0;
    *out = x;
    return 1;
}

static PyObject *gather_columns(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6 || !PyList_Check(args[0]) || !PyList_Check(args[1]) || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "gather_columns(bodies: list, queue_ids: list, flags: list, qids, flg, body_len)");
        return NULL;
    }
    Py_ssize_t n = PyList_GET_SIZE(args[0]);
    Py_buffer qv, fv, lv;
    if (mq_view(args[3], &qv, 8, 1, "qids") < 0) return NULL;
    if (mq_view(args[4], &fv, 8, 1, "flg") < 0) {
        PyBuffer_Release(&qv);
        return NULL;
    }
    if (mq_view(args[5], &lv, 8, 1, "body_len") < 0) {
        PyBuffer_Release(&qv);
        PyBuffer_Release(&fv);
        return NULL;
    }
    PyObject *ret = NULL;
    if (PyList_GET_SIZE(args[1]) != n || PyList_GET_SIZE(args[2]) != n || qv.len / 8 != n || fv.len / 8 != n ||
        lv.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "gather_columns: every column and output needs one slot per message");
        goto done;
    }
    int64_t *qo = qv.buf, *fo = fv.buf, *bl = lv.buf;
    ret = Py_NewRef(Py_True);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *b = PyList_GET_ITEM(args[0], i);
        if (!PyBytes_CheckExact(b) || !exact_int_in(PyList_GET_ITEM(args[1], i), 0, (long long)INT32_MAX + 1, &qo[i]) ||
            !exact_int_in(PyList_GET_ITEM(args[2], i), (long long)INT32_MIN, (long long)INT32_MAX + 1, &fo[i])) {
            Py_SETREF(ret, Py_NewRef(Py_False));
            break;
        }
        bl[i] = PyBytes_GET_SIZE(b);
    }
done:
    PyBuffer_Release(&qv);
    PyBuffer_Release(&fv);
    PyBuffer_Release(&lv);
    return ret;
}

/* text_column(values, off, lens) -> bytes | None
 * The native twin of put_one.text_column_py: a list of str-or-None property values as one UTF-8
 * buffer (returned), the offset of each value in it (off) and its byte length (lens, -1 for None;
 * int64, writable, one per value).  None (the outputs partly filled) when a value is neither str
 * nor None, contains a \x01 or \x02 separator, or cannot be encoded (a lone surrogate). */
static PyObject *text_column(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 3 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "text_column(values: list, off, lens)");
        return NULL;
    }
    PyObject *vals = args[0];
    Py_ssize_t n = PyList_GET_SIZE(vals);
    Py_buffer ov, lv;
    if (mq_view(args[1], &ov, 8, 1, "off") < 0) return NULL;
    if (mq_view(args[2], &lv, 8, 1, "lens") < 0) {
        PyBuffer_Release(&ov);
        return NULL;
    }
    PyObject *ret = NULL;
    if (ov.len / 8 != n || lv.len / 8 != n) {
        PyErr_SetString(PyExc_ValueError, "text_column: off and lens need one slot per value");
        goto done;
    }
    int64_t *off = ov.buf, *ln = lv.buf, total = 0;
    for (Py_ssize_t i = 0; i < n; i++) { /* pass 1: check, byte lengths */
        PyObject *v = PyList_GET_ITEM(vals, i);
        if (v == Py_None) {
            off[i] = total;
            ln[i] = -1;
            continue;
        }
        if (!PyUnicode_CheckExact(v)) goto other;
        Py_ssize_t len;
        const char *u = PyUnicode_AsUTF8AndSize(v, &len);
        if (!u) {
            if (!PyErr_ExceptionMatches(PyExc_UnicodeEncodeError)) goto done;
            PyErr_Clear();
            goto other;
        }
        if (memchr(u, 1, (size_t)len) || memchr(u, 2, (size_t)len)) goto other;
        off[i] = total;
        ln[i] = len;
        total += len;
    }
    PyObject *buf = PyBytes_FromStringAndSize(NULL, total ? total : 1);
    if (!buf) goto done;
    char *o = PyBytes_AS_STRING(buf);
    o[0] = 0;
    for (Py_ssize_t i = 0; i < n; i++) { /* pass 2: copy (the UTF-8 of every str is cached by pass 1) */
        if (ln[i] <= 0) continue;
        Py_ssize_t len;
        const char *u = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(vals, i), &len);
        if (!u || len != ln[i] || off[i] + len > total) { /* cannot happen: the list is not ours, check anyway */
            Py_DECREF(buf);
            if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "text_column: values changed during the call");
            goto done;
        }
        memcpy(o + off[i], u, (size_t)len);
    }
    ret = buf;
    goto done;
other:
    ret = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&ov);
    PyBuffer_Release(&lv);
    return ret;
}

static PyMethodDef methods[] = {
    MQ_BIND_CHECKSUMS_METHOD,
    {"bind_put_result", (PyCFunction)(void (*)(void))bind_put_result, METH_FASTCALL,
     "bind_put_result(cls, member descriptors): the class put_result() builds"},
    {"build_common_props", (PyCFunction)(void (*)(void))build_common_props, METH_FASTCALL,
     "build_common_props(keys, keys_off, keys_len, tags, tags_off, tags_len, uniq_head, counter0, out, out_off): "
     "the properties texts of a batch of the common shape"},
    {"queue_ranks", (PyCFunction)(void (*)(void))queue_ranks, METH_FASTCALL,
     "queue_ranks(codes, takes, rank, seen): the rank of each record in its queue and the count per queue"},
    {"put_result", (PyCFunction)(void (*)(void))put_result, METH_FASTCALL,
     "put_result(offset, queue_offset, store_timestamp, size, msgid_prefix, uniq_key) -> the result of a put"},
    {"encode_one_v1", (PyCFunction)(void (*)(void))encode_one_v1, METH_FASTCALL,
     "encode_one_v1(out, pos, body, topic_field, keys, uniq, tags, queue_id, flag, queue_offset, phys, born_ts, "
     "store_ts, host) -> size: one record of the common shape, TOTALSIZE written last"},
    {"append_common", (PyCFunction)(void (*)(void))append_common, METH_FASTCALL,
     "append_common(store, topic, topic_field, body, keys, uniq, tags, queue_id, born_ts, size) -> (offset, "
     "queue offset, store time) or None: a single put of the common shape into an async-flush store"},
    {"put_plain", (PyCFunction)(void (*)(void))put_plain, METH_FASTCALL,
     "put_plain(store, uniq_gen, msgid_prefix, topic, topic_field, body, keys, tags, queue_id) -> result, the "
     "unique key (not written: too large) or None (not ASCII): MessageStore.put of the common shape"},
    {"gather_plain", (PyCFunction)(void (*)(void))gather_plain, METH_FASTCALL,
     "gather_plain(msgs, queue_ids, body_len) -> (topics, bodies, keys, tags) or None: the fields of a batch of "
     "plain dicts in one pass"},
    {"gather_columns", (PyCFunction)(void (*)(void))gather_columns, METH_FASTCALL,
     "gather_columns(bodies, queue_ids, flags, qids, flg, body_len): the column checks of a columnar put in one pass"},
    {"text_column", (PyCFunction)(void (*)(void))text_column, METH_FASTCALL,
     "text_column(values, off, lens) -> UTF-8 buffer or None: a column of str-or-None property values"},
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
    struct { PyObject **slot; const char *name; } names[] = {
        {&s_cl_queue, "_cl_queue"}, {&s_files, "files"}, {&s_queue_offsets, "queue_offsets"}, {&s_config, "config"},
        {&s_clock, "clock"}, {&s_store_host_b, "_store_host_b"}, {&s_last_put_ts, "_last_put_ts"},
        {&s_ts_runs, "_ts_runs"}, {&s_wrote_position, "wrote_position"}, {&s_file_size, "file_size"},
        {&s_file_from_offset, "file_from_offset"}, {&s_mm_raw, "_mm"}, {&s_mm, "mm"}, {&s_closed, "_closed"},
        {&s_read_only, "read_only"}, {&s_background_error, "background_error"}, {&s_check_writable, "_check_writable"},
        {&s_max_fast_size, "_max_fast_size"}, {&s_max_body, "_max_body"}, {&s_put_lock, "_put_lock"},
        {&s_acquire, "acquire"}, {&s_release, "release"}, {&s_roll_for, "_roll_for"},
        {&s_reput_from_offset, "reput_from_offset"}, {&s_reput_wake_bytes, "_reput_wake_bytes"}, {&s_wake, "_wake"},
        {&s_is_set, "is_set"}, {&s_set, "set"}, {&s_head, "head"}, {&s_head_for, "head_for"}, {&s_count, "count"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!*names[i].slot && !(*names[i].slot = PyUnicode_InternFromString(names[i].name))) return NULL;
    if (!mask16 && !(mask16 = PyLong_FromLong(0xFFFF))) return NULL;
    static const char *fields[5] = {"topic", "body", "queue_id", "keys", "tags"};
    for (int i = 0; i < 5; i++)
        if (!s_fields[i] && !(s_fields[i] = PyUnicode_InternFromString(fields[i]))) return NULL;
    return PyModule_Create(&module);
}
