/* mqstore.kernels._nat_kafka_json: the JSON lines of `mqstore kafka dump --json [--print-data]` for
 * uncompressed v2 batches whose checksum verified (the native twin of
 * mqstore/kernels/kafka/json_lines.py).
 *
 * Per batch: the batch line (every header field), then with print_data one line per record,
 * decoded with the reader's checks of formats.kafka.batch.iter_records (varint limits, lengths
 * inside the record and the batch, a non-negative header count, UTF-8 header keys, nothing left
 * over); any record those checks reject makes the call decline the batch, so that the caller's
 * per-record path raises the reader's typed error.  Each line starts with the caller's prefix
 * ({"file":"...",) and is byte for byte what json.dumps(ensure_ascii=False, separators=(",", ":"))
 * gives for the dict of storage.kafka.tools.dump_log (bytes as base64).
 */
#include "mq_json.h"

/* a zig-zag varint of at most max_bytes bytes at *p (< end), masked to `bits`; 0 on error */
static int varint(const uint8_t **p, const uint8_t *end, int max_bytes, int bits, int64_t *out)
{
    uint64_t u = 0;
    const uint8_t *q = *p;
    for (int i = 0; i < max_bytes; i++) {
        if (q + i >= end) return 0;
        uint8_t b = q[i];
        u |= (uint64_t)(b & 0x7F) << (7 * i);
        if (!(b & 0x80)) {
            if (bits < 64) u &= (1ull << bits) - 1;
            int64_t v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            if (bits == 32) v = (int32_t)v;
            *out = v;
            *p = q + i + 1;
            return 1;
        }
    }
    return 0;
}

/* a varint length and that many bytes (length < 0: null) inside [*p, end); 0 on error */
static int bytes_field(const uint8_t **p, const uint8_t *end, const uint8_t **s, int64_t *n)
{
    if (!varint(p, end, 5, 32, n)) return 0;
    if (*n < 0) { *s = NULL; return 1; }
    if (*n > end - *p) return 0;
    *s = *p;
    *p += *n;
    return 1;
}

static uint8_t *put_bytes_or_null(uint8_t *o, const uint8_t *s, int64_t n)
{
    if (!s) return PUT_LIT(o, "null");
    *o++ = '"';
    o = put_b64(o, s, n);
    *o++ = '"';
    return o;
}

static uint8_t *put_bool(uint8_t *o, int v) { return v ? PUT_LIT(o, "true") : PUT_LIT(o, "false"); }

/* an upper bound of the bytes of one batch's lines (a header key byte takes up to 6 bytes, twice; an
 * empty header of 2 bytes 27) */
static inline int64_t batch_bound(int64_t size, int64_t count, int64_t prefix, int print_data)
{
    return prefix + 700 + (print_data ? count * (prefix + 400) + 16 * size : 0);
}

/* lines(buf, positions int64[n], prefix bytes, print_data, out uint8[cap]) -> (status, value):
 * (0, bytes written) | (1, first batch whose records the reader rejects) | (2, capacity needed).
 * The batches must be v2, uncompressed, not control, checksummed good and inside buf (the caller
 * selects them from its scan). */
static PyObject *lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "lines(buf, positions, prefix, print_data, out)");
        return NULL;
    }
    int print_data = PyObject_IsTrue(args[3]);
    if (print_data < 0) return NULL;
    Py_buffer b, ps, pf, ob;
    if (mq_view(args[0], &b, 0, 0, "buf") < 0) return NULL;
    if (mq_view(args[1], &ps, 8, 0, "positions") < 0) { PyBuffer_Release(&b); return NULL; }
    if (mq_view(args[2], &pf, 0, 0, "prefix") < 0) { PyBuffer_Release(&ps); PyBuffer_Release(&b); return NULL; }
    if (mq_view(args[4], &ob, 1, 1, "out") < 0) {
        PyBuffer_Release(&pf); PyBuffer_Release(&ps); PyBuffer_Release(&b);
        return NULL;
    }
    const uint8_t *buf = b.buf, *prefix = pf.buf;
    const int64_t nbuf = (int64_t)b.len, plen = (int64_t)pf.len;
    const int64_t *pos = ps.buf;
    const Py_ssize_t n = mq_len(&ps);
    uint8_t *out = ob.buf, *o = out, *end = out + ob.len;
    int status = 0;
    int64_t value = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t p = pos[i];
        if (p < 0 || p > nbuf - 61) { status = 1; value = i; break; }
        const uint8_t *h = buf + p;
        int64_t base_offset = mq_be64(h), size = 12 + (int64_t)mq_be32(h + 8);
        int64_t count = mq_be32(h + 57);
        if (size < 61 || size > nbuf - p || count < 0 || (print_data && count > size)) { status = 1; value = i; break; }
        if (batch_bound(size, count, plen, print_data) > end - o) {
            int64_t need = (o - out) + batch_bound(size, count, plen, print_data);
            for (Py_ssize_t q = i + 1; q < n; q++) {
                int64_t pq = pos[q];
                if (pq < 0 || pq > nbuf - 61) continue;
                int64_t sq = 12 + (int64_t)mq_be32(buf + pq + 8), cq = mq_be32(buf + pq + 57);
                need += batch_bound(sq < 0 ? 0 : sq, cq < 0 ? 0 : cq, plen, print_data);
            }
            status = 2;
            value = need;
            break;
        }
        int64_t leader_epoch = mq_be32(h + 12), magic = (int8_t)h[16];
        uint32_t crc = mq_beu32(h + 17);
        int64_t attrs = mq_be16(h + 21), last_delta = mq_be32(h + 23);
        int64_t base_ts = mq_be64(h + 27), max_ts = mq_be64(h + 35), producer_id = mq_be64(h + 43);
        int64_t producer_epoch = mq_be16(h + 51), base_seq = mq_be32(h + 53);
        int log_append = (attrs & 0x08) != 0;
        int64_t last_seq = -1;
        if (base_seq != -1) {
            last_seq = base_seq + last_delta;
            if (last_seq > 0x7FFFFFFF) last_seq -= 0x80000000LL;
        }
        const char *ts_type = log_append ? "LogAppendTime" : "CreateTime";
        size_t ts_len = log_append ? 13 : 10;
        uint8_t *line_start = o;
        memcpy(o, prefix, (size_t)plen); o += plen;
        o = PUT_LIT(o, "\"type\":\"batch\",\"baseOffset\":"); o = put_int(o, base_offset);
        o = PUT_LIT(o, ",\"lastOffset\":"); o = put_int(o, base_offset + last_delta);
        o = PUT_LIT(o, ",\"count\":"); o = put_int(o, count);
        o = PUT_LIT(o, ",\"baseSequence\":"); o = put_int(o, base_seq);
        o = PUT_LIT(o, ",\"lastSequence\":"); o = put_int(o, last_seq);
        o = PUT_LIT(o, ",\"producerId\":"); o = put_int(o, producer_id);
        o = PUT_LIT(o, ",\"producerEpoch\":"); o = put_int(o, producer_epoch);
        o = PUT_LIT(o, ",\"partitionLeaderEpoch\":"); o = put_int(o, leader_epoch);
        o = PUT_LIT(o, ",\"isTransactional\":"); o = put_bool(o, attrs & 0x10);
        o = PUT_LIT(o, ",\"isControl\":"); o = put_bool(o, attrs & 0x20);
        o = PUT_LIT(o, ",\"deleteHorizonMs\":"); o = put_int(o, (attrs & 0x40) ? base_ts : -1);
        o = PUT_LIT(o, ",\"hasDeleteHorizon\":"); o = put_bool(o, attrs & 0x40);
        o = PUT_LIT(o, ",\"position\":"); o = put_int(o, p);
        o = PUT_LIT(o, ",\"timestampType\":\""); memcpy(o, ts_type, ts_len); o += ts_len;
        o = PUT_LIT(o, "\",\"maxTimestamp\":"); o = put_int(o, max_ts);
        o = PUT_LIT(o, ",\"baseTimestamp\":"); o = put_int(o, base_ts);
        o = PUT_LIT(o, ",\"size\":"); o = put_int(o, size);
        o = PUT_LIT(o, ",\"magic\":"); o = put_int(o, magic);
        o = PUT_LIT(o, ",\"compresscodec\":\"none\",\"crc\":"); o = put_int(o, (int64_t)crc);
        o = PUT_LIT(o, ",\"isvalid\":true}\n");
        if (!print_data) continue;
        const uint8_t *r = h + 61, *bend = h + size;
        int bad = 0;
        for (int64_t k = 0; k < count && !bad; k++) {
            int64_t length, ts_delta, off_delta, klen, vlen, nh, attr_unused;
            const uint8_t *key, *val;
            (void)attr_unused;
            if (!varint(&r, bend, 5, 32, &length) || length <= 0 || length > bend - r) { bad = 1; break; }
            const uint8_t *rend = r + length;
            r++;  /* attributes */
            if (!varint(&r, rend, 10, 64, &ts_delta) || !varint(&r, rend, 5, 32, &off_delta) ||
                !bytes_field(&r, rend, &key, &klen) || !bytes_field(&r, rend, &val, &vlen) ||
                !varint(&r, rend, 5, 32, &nh) || nh < 0 || nh > rend - r) { bad = 1; break; }
            int64_t ts, offset;
            if (log_append) ts = max_ts;
            else if (__builtin_add_overflow(base_ts, ts_delta, &ts)) { bad = 1; break; }
            if (__builtin_add_overflow(base_offset, off_delta, &offset)) { bad = 1; break; }
            memcpy(o, prefix, (size_t)plen); o += plen;
            o = PUT_LIT(o, "\"type\":\"record\",\"offset\":"); o = put_int(o, offset);
            o = PUT_LIT(o, ",\"timestampType\":\""); memcpy(o, ts_type, ts_len); o += ts_len;
            o = PUT_LIT(o, "\",\"timestamp\":"); o = put_int(o, ts);
            o = PUT_LIT(o, ",\"keySize\":"); o = put_int(o, key ? klen : -1);
            o = PUT_LIT(o, ",\"valueSize\":"); o = put_int(o, val ? vlen : -1);
            o = PUT_LIT(o, ",\"sequence\":"); o = put_int(o, base_seq == -1 ? -1 : base_seq + off_delta);
            o = PUT_LIT(o, ",\"headerKeys\":[");
            /* the headers twice: their keys first, then key/value objects after key and value */
            const uint8_t *hp = r;
            for (int64_t j = 0; j < nh; j++) {
                int64_t hk, hvl;
                const uint8_t *hv;
                if (!varint(&hp, rend, 5, 32, &hk) || hk < 0 || hk > rend - hp || !utf8_ok(hp, hk)) { bad = 1; break; }
                if (j) *o++ = ',';
                o = put_str(o, hp, hk);
                hp += hk;
                if (!bytes_field(&hp, rend, &hv, &hvl)) { bad = 1; break; }
            }
            if (bad || hp != rend) { bad = 1; break; }
            o = PUT_LIT(o, "],\"key\":"); o = put_bytes_or_null(o, key, klen);
            o = PUT_LIT(o, ",\"value\":"); o = put_bytes_or_null(o, val, vlen);
            o = PUT_LIT(o, ",\"headers\":[");
            hp = r;
            for (int64_t j = 0; j < nh; j++) {  /* (checked by the first loop) */
                int64_t hk = 0, hvl = -1;
                const uint8_t *hv = NULL;
                varint(&hp, rend, 5, 32, &hk);
                if (j) *o++ = ',';
                o = PUT_LIT(o, "{\"key\":");
                o = put_str(o, hp, hk);
                hp += hk;
                bytes_field(&hp, rend, &hv, &hvl);
                o = PUT_LIT(o, ",\"value\":");
                o = put_bytes_or_null(o, hv, hvl);
                *o++ = '}';
            }
            o = PUT_LIT(o, "]}\n");
            r = rend;
        }
        if (bad || r != bend) {
            o = line_start;
            status = 1;
            value = i;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&ob);
    PyBuffer_Release(&pf);
    PyBuffer_Release(&ps);
    PyBuffer_Release(&b);
    if (status == 0) value = o - out;
    else if (status == 1) {
        /* the lines of the batches before the declined one are kept: tell how many bytes */
        return Py_BuildValue("iLL", status, (long long)value, (long long)(o - out));
    }
    return Py_BuildValue("iLL", status, (long long)value, (long long)(status == 0 ? value : 0));
}

static PyMethodDef methods[] = {
    {"lines", (PyCFunction)(void (*)(void))lines, METH_FASTCALL,
     "lines(buf, positions, prefix, print_data, out) -> (status, value, bytes): the dump's JSON lines into out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nat_kafka_json", "Kafka dump JSON lines (native)", -1, methods};

PyMODINIT_FUNC PyInit__nat_kafka_json(void)
{
    mq_json_init();
    return PyModule_Create(&module);
}
