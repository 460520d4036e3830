/* mqstore.kernels._nat_rmq_json: the JSON lines of `mqstore rocketmq dump --json` in C (the native
 * twin of mqstore/kernels/rocketmq/json_lines.py).
 *
 * One pass per record: locate the fields (the checks of columns.decode_one), check the stored
 * physical offset and that topic and properties are valid UTF-8, split the properties into kept
 * pairs (non-empty name and value; a repeated name keeps its first position and its last value),
 * KEYS pieces, TAGS and UNIQ_KEY, format the hosts like Host.__str__, and write
 *   {"topic":..,"flag":..,"body":"<base64>","properties":{..},"queueId":..,"queueOffset":..,
 *    "commitLogOffset":..,"size":..,"bornTimestamp":..,"storeTimestamp":..,"bornHost":"..",
 *    "storeHost":"..","sysFlag":..,"reconsumeTimes":..,"bodyCRC":..,"keys":[..],"tags":..,"uniqKey":..}\n
 * byte for byte as json.dumps(ensure_ascii=False, separators=(",", ":")) does.
 */
#include "mq_json.h"

#define MAGIC_V1 (-626843481)
#define MAGIC_V2 (-626843477)
#define FIXED_MIN 88

typedef struct {
    int64_t size, magic, body_crc, queue_id, flag, queue_offset, physical_offset, sys_flag, born_ts;
    int64_t born_pos, born_w, store_ts, store_pos, store_w, reconsume, body_start, body_len;
    int64_t topic_start, topic_len, props_start, props_len;
} Rec;

/* the fields of the record at pos (columns.decode_one's rules); 0 when it is not a valid record */
static int decode(const uint8_t *buf, int64_t nbuf, int64_t pos, Rec *o)
{
    if (pos < 0 || pos + 8 > nbuf) return 0;
    int64_t total = mq_be32(buf + pos), magic = mq_be32(buf + pos + 4);
    if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total < FIXED_MIN || pos + total > nbuf) return 0;
    int64_t rend = pos + total;
    int64_t sys = mq_be32(buf + pos + 36);
    int64_t bw = (sys & 0x10) ? 20 : 8, sw = (sys & 0x20) ? 20 : 8;
    int64_t p = pos + 48 + bw + 8 + sw + 12;
    if (p + 4 > rend) return 0;
    int64_t body_len = mq_be32(buf + p);
    p += 4;
    if (body_len < 0 || p + body_len > rend) return 0;
    int64_t bs = p, tl, tw;
    p += body_len;
    if (magic == MAGIC_V2) {
        if (p + 2 > rend) return 0;
        tl = mq_be16(buf + p);
        p += 2;
        tw = 2;
    } else {
        if (p + 1 > rend) return 0;
        tl = (int8_t)buf[p];
        p += 1;
        tw = 1;
    }
    if (tl < 0 || p + tl > rend) return 0;
    int64_t tps = p;
    p += tl;
    if (p + 2 > rend) return 0;
    int64_t pl = mq_be16(buf + p);
    p += 2;
    if (pl < 0 || p + pl > rend) return 0;
    if (48 + bw + 8 + sw + 12 + 4 + body_len + tw + tl + 2 + pl != total) return 0;
    o->size = total;
    o->magic = magic;
    o->body_crc = mq_be32(buf + pos + 8);
    o->queue_id = mq_be32(buf + pos + 12);
    o->flag = mq_be32(buf + pos + 16);
    o->queue_offset = mq_be64(buf + pos + 20);
    o->physical_offset = mq_be64(buf + pos + 28);
    o->sys_flag = sys;
    o->born_ts = mq_be64(buf + pos + 40);
    o->born_pos = pos + 48;
    o->born_w = bw;
    o->store_ts = mq_be64(buf + pos + 48 + bw);
    o->store_pos = pos + 56 + bw;
    o->store_w = sw;
    o->reconsume = mq_be32(buf + pos + 56 + bw + sw);
    o->body_start = bs;
    o->body_len = body_len;
    o->topic_start = tps;
    o->topic_len = tl;
    o->props_start = p;
    o->props_len = pl;
    return 1;
}

/* Host.__str__: a.b.c.d:port, or [8 groups of 4 hex digits]:port (IPv6), port a signed int32 */
static uint8_t *put_host(uint8_t *o, const uint8_t *h, int64_t w)
{
    if (w == 8) {
        for (int k = 0; k < 4; k++) {
            if (k) *o++ = '.';
            o = put_int(o, h[k]);
        }
    } else {
        *o++ = '[';
        for (int g = 0; g < 8; g++) {
            if (g) *o++ = ':';
            uint8_t b0 = h[2 * g], b1 = h[2 * g + 1];
            *o++ = (uint8_t)HEXD[b0 >> 4]; *o++ = (uint8_t)HEXD[b0 & 15];
            *o++ = (uint8_t)HEXD[b1 >> 4]; *o++ = (uint8_t)HEXD[b1 & 15];
        }
        *o++ = ']';
    }
    *o++ = ':';
    return put_int(o, mq_be32(h + w - 4));
}

typedef struct { int64_t ns, nl, vs, vl; } Pair;

/* an upper bound of the bytes of one record's line */
static inline int64_t line_bound(const Rec *r) { return 640 + 2 * r->body_len + 24 * (r->topic_len + r->props_len); }

static int eq_name(const uint8_t *buf, const Pair *p, const char *name, int64_t n)
{
    return p->nl == n && memcmp(buf + p->ns, name, (size_t)n) == 0;
}

/* lines(buf, positions int64[n], file_from_offset, out uint8[cap]) -> (status, value):
 * (0, bytes written) | (1, first row that needs the per-record path) | (2, capacity needed) */
static PyObject *lines(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "lines(buf, positions, file_from_offset, out)");
        return NULL;
    }
    int64_t base_off = mq_i64(args[2]);
    if (PyErr_Occurred()) return NULL;
    Py_buffer b, ps, ob;
    if (mq_view(args[0], &b, 0, 0, "buf") < 0) return NULL;
    if (mq_view(args[1], &ps, 8, 0, "positions") < 0) { PyBuffer_Release(&b); return NULL; }
    if (mq_view(args[3], &ob, 1, 1, "out") < 0) { PyBuffer_Release(&ps); PyBuffer_Release(&b); return NULL; }
    const uint8_t *buf = b.buf;
    const int64_t nbuf = (int64_t)b.len;
    const int64_t *pos = ps.buf;
    const Py_ssize_t n = mq_len(&ps);
    uint8_t *out = ob.buf, *o = out, *end = out + ob.len;
    int status = 0;
    int64_t value = 0;
    Pair *pairs = NULL;
    int64_t pairs_cap = 0;
    int oom = 0;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t r = 0; r < n; r++) {
        Rec rec;
        if (!decode(buf, nbuf, pos[r], &rec) || rec.physical_offset != base_off + pos[r] ||
            !utf8_ok(buf + rec.topic_start, rec.topic_len) || !utf8_ok(buf + rec.props_start, rec.props_len)) {
            status = 1;
            value = r;
            break;
        }
        if (line_bound(&rec) > end - o) {  /* the capacity this call needs from here on */
            int64_t need = (o - out) + line_bound(&rec);
            for (Py_ssize_t q = r + 1; q < n; q++) {
                Rec x;
                need += decode(buf, nbuf, pos[q], &x) ? line_bound(&x) : 0;
            }
            status = 2;
            value = need;
            break;
        }
        /* the kept pairs of the properties text name\x01value\x02... */
        const uint8_t *pt = buf + rec.props_start;
        int64_t pl = rec.props_len, np = 0;
        if (pl / 3 + 1 > pairs_cap) {
            free(pairs);
            pairs_cap = pl / 3 + 64;
            pairs = malloc((size_t)pairs_cap * sizeof(Pair));
            if (!pairs) { oom = 1; break; }
        }
        for (int64_t start = 0; start < pl;) {
            const uint8_t *sp = memchr(pt + start, 2, (size_t)(pl - start));
            int64_t e = sp ? sp - pt : pl;
            const uint8_t *s1 = memchr(pt + start, 1, (size_t)(e - start));
            int64_t sep = s1 ? s1 - pt : -1;
            if (sep > start && sep < e - 1) {
                int64_t s0 = rec.props_start + start, l0 = sep - start, dup = -1;
                for (int64_t q = 0; q < np; q++)
                    if (pairs[q].nl == l0 && memcmp(buf + pairs[q].ns, buf + s0, (size_t)l0) == 0) { dup = q; break; }
                Pair *t = dup >= 0 ? &pairs[dup] : &pairs[np++];
                if (dup < 0) { t->ns = s0; t->nl = l0; }
                t->vs = rec.props_start + sep + 1;
                t->vl = e - sep - 1;
            }
            start = e + 1;
        }
        const Pair *keys = NULL, *tags = NULL, *uniq = NULL;
        for (int64_t q = 0; q < np; q++) {
            if (eq_name(buf, &pairs[q], "KEYS", 4)) keys = &pairs[q];
            else if (eq_name(buf, &pairs[q], "TAGS", 4)) tags = &pairs[q];
            else if (eq_name(buf, &pairs[q], "UNIQ_KEY", 8)) uniq = &pairs[q];
        }
        o = PUT_LIT(o, "{\"topic\":");
        o = put_str(o, buf + rec.topic_start, rec.topic_len);
        o = PUT_LIT(o, ",\"flag\":");
        o = put_int(o, rec.flag);
        o = PUT_LIT(o, ",\"body\":\"");
        o = put_b64(o, buf + rec.body_start, rec.body_len);
        o = PUT_LIT(o, "\",\"properties\":{");
        for (int64_t q = 0; q < np; q++) {
            if (q) *o++ = ',';
            o = put_str(o, buf + pairs[q].ns, pairs[q].nl);
            *o++ = ':';
            o = put_str(o, buf + pairs[q].vs, pairs[q].vl);
        }
        o = PUT_LIT(o, "},\"queueId\":");
        o = put_int(o, rec.queue_id);
        o = PUT_LIT(o, ",\"queueOffset\":");
        o = put_int(o, rec.queue_offset);
        o = PUT_LIT(o, ",\"commitLogOffset\":");
        o = put_int(o, base_off + pos[r]);
        o = PUT_LIT(o, ",\"size\":");
        o = put_int(o, rec.size);
        o = PUT_LIT(o, ",\"bornTimestamp\":");
        o = put_int(o, rec.born_ts);
        o = PUT_LIT(o, ",\"storeTimestamp\":");
        o = put_int(o, rec.store_ts);
        o = PUT_LIT(o, ",\"bornHost\":\"");
        o = put_host(o, buf + rec.born_pos, rec.born_w);
        o = PUT_LIT(o, "\",\"storeHost\":\"");
        o = put_host(o, buf + rec.store_pos, rec.store_w);
        o = PUT_LIT(o, "\",\"sysFlag\":");
        o = put_int(o, rec.sys_flag);
        o = PUT_LIT(o, ",\"reconsumeTimes\":");
        o = put_int(o, rec.reconsume);
        o = PUT_LIT(o, ",\"bodyCRC\":");
        o = put_int(o, rec.body_crc);
        o = PUT_LIT(o, ",\"keys\":[");
        if (keys && keys->vl > 0) {
            const uint8_t *ks = buf + keys->vs;
            int64_t kn = keys->vl, first = 1;
            for (int64_t i = 0; i < kn;) {
                int64_t j = i;
                while (j < kn && ks[j] != ' ') j++;
                if (j > i) {
                    if (!first) *o++ = ',';
                    first = 0;
                    o = put_str(o, ks + i, j - i);
                }
                i = j + 1;
            }
        }
        o = PUT_LIT(o, "],\"tags\":");
        o = tags ? put_str(o, buf + tags->vs, tags->vl) : PUT_LIT(o, "null");
        o = PUT_LIT(o, ",\"uniqKey\":");
        o = uniq ? put_str(o, buf + uniq->vs, uniq->vl) : PUT_LIT(o, "null");
        o = PUT_LIT(o, "}\n");
    }
    free(pairs);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&ob);
    PyBuffer_Release(&ps);
    PyBuffer_Release(&b);
    if (oom) return PyErr_NoMemory();
    if (status == 0) value = o - out;
    return Py_BuildValue("iL", status, (long long)value);
}

static PyMethodDef methods[] = {
    {"lines", (PyCFunction)(void (*)(void))lines, METH_FASTCALL,
     "lines(buf, positions, file_from_offset, out) -> (status, value): the dump's JSON lines into out"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nat_rmq_json", "RocketMQ dump JSON lines (native)", -1, methods};

PyMODINIT_FUNC PyInit__nat_rmq_json(void)
{
    mq_json_init();
    return PyModule_Create(&module);
}
