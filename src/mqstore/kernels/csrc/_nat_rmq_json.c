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
#include "mq_rmq.h"

/* the decimal text of every byte value (its digits then a '.', stored as one 4-byte word) and its
 * digit count: an IPv4 address is four word stores */
static uint32_t OCTET[256];
static uint8_t OCTET_LEN[256];

static void octets_init(void)
{
    for (int v = 0; v < 256; v++) {
        uint8_t t[4] = {0, 0, 0, 0};
        uint8_t *e = put_int(t, v);
        *e = '.';
        memcpy(&OCTET[v], t, 4);
        OCTET_LEN[v] = (uint8_t)(e - t);
    }
}

/* Host.__str__: a.b.c.d:port, or [8 groups of 4 hex digits]:port (IPv6), port a signed int32.
 * (The IPv4 words may write up to 3 bytes past the text: the line's bound leaves room.) */
static uint8_t *put_host(uint8_t *o, const uint8_t *h, int64_t w)
{
    if (w == 8) {
        for (int k = 0; k < 4; k++) {
            memcpy(o, &OCTET[h[k]], 4);
            o += OCTET_LEN[h[k]] + (k < 3);  /* the '.' kept after the first three */
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

#if defined(__x86_64__) && defined(__SSE2__)
#include <emmintrin.h>
#define MQ_STR_SSE2 1
static int USE_SSE2_STR;  /* SSE2 is in every x86-64; off with MQSTORE_NO_AVX2 (the all-scalar writer) */
#endif

/* put_str of buf's string s[0:n] (readable up to lim; out writable up to oend): the escape-free
 * bytes 16 at a time with SSE2 (one compare per class: '"', '\\', below 0x20), stored whole, the
 * pointers moved by the bytes that belong; the first byte that needs an escape, and everything
 * when the 16 bytes are not readable or writable, goes to put_str (the scalar writer). */
static inline uint8_t *put_str_in(uint8_t *o, const uint8_t *s, int64_t n, const uint8_t *lim, const uint8_t *oend)
{
#ifdef MQ_STR_SSE2
    if (USE_SSE2_STR && n > 0 && s + 16 <= lim && o + 17 + n <= oend) {
        uint8_t *q = o;
        *q++ = '"';
        const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'), ctl = _mm_set1_epi8(0x1F);
        int64_t k = 0;
        while (k < n) {
            if (s + k + 16 > lim) break;
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(s + k));
            __m128i low = _mm_cmpeq_epi8(_mm_max_epu8(v, ctl), ctl);  /* unsigned v <= 0x1F */
            __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, slash)), low);
            unsigned m = (unsigned)_mm_movemask_epi8(hit);
            int64_t left = n - k;
            if (left < 16) m &= (1u << left) - 1u;
            _mm_storeu_si128((__m128i *)(void *)q, v);  /* (o + 17 + n <= oend: inside the output) */
            if (m) {
                int z = __builtin_ctz(m);
                q += z;
                k += z;
                break;
            }
            int64_t step = left < 16 ? left : 16;
            q += step;
            k += step;
        }
        if (k == n) {
            *q++ = '"';
            return q;
        }
        /* the rest (from an escape, or bytes not readable 16 at a time): the scalar writer, whose
         * opening quote lands on the byte before q (put back: the last byte copied, or our quote) */
        uint8_t keep = q[-1];
        uint8_t *e = put_str(q - 1, s + k, n - k);
        q[-1] = keep;
        return e;
    }
#else
    (void)lim;
    (void)oend;
#endif
    return put_str(o, s, n);
}

/* the first ' ' of s[i:n] at or after i (n when none): 16 bytes at a time with SSE2 while they
 * are readable (lim), else one at a time */
static inline int64_t next_space(const uint8_t *s, int64_t i, int64_t n, const uint8_t *lim)
{
#ifdef MQ_STR_SSE2
    if (USE_SSE2_STR) {
        const __m128i sp = _mm_set1_epi8(' ');
        for (; i < n && s + i + 16 <= lim; i += 16) {
            unsigned m = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(const void *)(s + i)), sp));
            if (m) {
                int64_t j = i + __builtin_ctz(m);
                return j < n ? j : n;
            }
        }
        if (i >= n) return n;
    }
#endif
    while (i < n && s[i] != ' ') i++;
    return i;
}

typedef struct { int64_t ns, nl, vs, vl; } Pair;

/* an upper bound of the bytes of one record's line */
static inline int64_t line_bound(const int64_t *r)
{
    return 640 + 2 * r[MQ_F_BODY_LEN] + 24 * (r[MQ_F_TOPIC_LEN] + r[MQ_F_PROPS_LEN]);
}

/* the bytes a[0:n] equal b[0:n] (short names: inline, no libc call; 8 or 4 bytes at a time, the
 * last word overlapping the one before, never reading outside the n bytes) */
static inline int same_bytes(const uint8_t *a, const uint8_t *b, int64_t n)
{
    if (n >= 8) {
        uint64_t x, y;
        for (int64_t i = 0; i + 8 <= n; i += 8) {
            memcpy(&x, a + i, 8);
            memcpy(&y, b + i, 8);
            if (x != y) return 0;
        }
        memcpy(&x, a + n - 8, 8);
        memcpy(&y, b + n - 8, 8);
        return x == y;
    }
    if (n >= 4) {
        uint32_t x0, y0, x1, y1;
        memcpy(&x0, a, 4);
        memcpy(&y0, b, 4);
        memcpy(&x1, a + n - 4, 4);
        memcpy(&y1, b + n - 4, 4);
        return x0 == y0 && x1 == y1;
    }
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

/* one pair of the properties text ended (its span [s, e) of buf, sep: its first \x01 or -1): kept
 * when the name and value are non-empty; a repeated name keeps its first position and takes the
 * last value.  Returns the new pair count. */
static inline int64_t props_pair(const uint8_t *buf, int64_t s, int64_t sep, int64_t e, Pair *pairs, int64_t np)
{
    if (sep <= s || sep >= e - 1) return np;
    const int64_t l0 = sep - s;
    for (int64_t q = 0; q < np; q++) {
        if (pairs[q].nl == l0 && same_bytes(buf + pairs[q].ns, buf + s, l0)) {
            pairs[q].vs = sep + 1;
            pairs[q].vl = e - sep - 1;
            return np;
        }
    }
    pairs[np].ns = s;
    pairs[np].nl = l0;
    pairs[np].vs = sep + 1;
    pairs[np].vl = e - sep - 1;
    return np + 1;
}

/* The kept pairs (props_pair) of the properties text buf[ps:ps+pl] in text order, and which of
 * them are KEYS, TAGS and UNIQ_KEY (NULL: none); *high: whether any byte is >= 0x80.  The separators are found 16 bytes at a time
 * with SSE2 where the bytes are readable (lim), else one byte at a time; the same pairs. */
static int64_t props_pairs(const uint8_t *buf, int64_t ps, int64_t pl, const uint8_t *lim, Pair *pairs,
                           const Pair **keys, const Pair **tags, const Pair **uniq, int *high)
{
    int64_t np = 0, start = ps, sep = -1, i = 0;
    unsigned hi = 0;
    const uint8_t *pt = buf + ps;
#ifdef MQ_STR_SSE2
    if (USE_SSE2_STR) {
        const __m128i one = _mm_set1_epi8(1), two = _mm_set1_epi8(2);
        for (; i < pl && pt + i + 16 <= lim; i += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(pt + i));
            unsigned m1 = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, one));
            unsigned m2 = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, two));
            unsigned mh = (unsigned)_mm_movemask_epi8(v);  /* bytes >= 0x80 */
            if (pl - i < 16) {
                unsigned keep = (1u << (pl - i)) - 1u;
                m1 &= keep;
                m2 &= keep;
                mh &= keep;
            }
            hi |= mh;
            unsigned m = m1 | m2;
            while (m) {
                int z = __builtin_ctz(m);
                int64_t at = ps + i + z;
                if (m2 & (1u << z)) {
                    np = props_pair(buf, start, sep, at, pairs, np);
                    start = at + 1;
                    sep = -1;
                } else if (sep < 0) {
                    sep = at;
                }
                m &= m - 1;
            }
        }
        if (i > pl) i = pl;
    }
#endif
    for (; i < pl; i++) {
        uint8_t c = pt[i];
        hi |= c & 0x80u;
        if (c == 2) {
            np = props_pair(buf, start, sep, ps + i, pairs, np);
            start = ps + i + 1;
            sep = -1;
        } else if (c == 1 && sep < 0) {
            sep = ps + i;
        }
    }
    if (start < ps + pl) np = props_pair(buf, start, sep, ps + pl, pairs, np);
    *high = hi != 0;
    *keys = *tags = *uniq = NULL;
    for (int64_t q = 0; q < np; q++) {
        const Pair *p = &pairs[q];
        if (p->nl == 4 && same_bytes(buf + p->ns, (const uint8_t *)"KEYS", 4)) *keys = p;
        else if (p->nl == 4 && same_bytes(buf + p->ns, (const uint8_t *)"TAGS", 4)) *tags = p;
        else if (p->nl == 8 && same_bytes(buf + p->ns, (const uint8_t *)"UNIQ_KEY", 8)) *uniq = p;
    }
    return np;
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
    const uint8_t *lim = buf + nbuf;  /* what put_str_in may read */
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
        int64_t rec[MQ_N_FIELDS];
        if (!mq_decode_record(buf, nbuf, pos[r], rec) || rec[MQ_F_PHYSICAL_OFFSET] != base_off + pos[r] ||
            !utf8_ok(buf + rec[MQ_F_TOPIC_START], rec[MQ_F_TOPIC_LEN])) {
            status = 1;
            value = r;
            break;
        }
        /* the kept pairs of the properties text name\x01value\x02... (one pass: props_pairs, which
         * also says whether any byte is not ASCII: only then is the text checked as UTF-8) */
        const int64_t pl = rec[MQ_F_PROPS_LEN];
        if (pl / 3 + 1 > pairs_cap) {
            free(pairs);
            pairs_cap = pl / 3 + 64;
            pairs = malloc((size_t)pairs_cap * sizeof(Pair));
            if (!pairs) { oom = 1; break; }
        }
        const Pair *keys = NULL, *tags = NULL, *uniq = NULL;
        int high = 0;
        const int64_t np = props_pairs(buf, rec[MQ_F_PROPS_START], pl, lim, pairs, &keys, &tags, &uniq, &high);
        if (high && !utf8_ok(buf + rec[MQ_F_PROPS_START], pl)) {
            status = 1;
            value = r;
            break;
        }
        if (line_bound(rec) > end - o) {  /* the capacity this call needs from here on */
            int64_t need = (o - out) + line_bound(rec);
            for (Py_ssize_t q = r + 1; q < n; q++) {
                int64_t x[MQ_N_FIELDS];
                need += mq_decode_record(buf, nbuf, pos[q], x) ? line_bound(x) : 0;
            }
            status = 2;
            value = need;
            break;
        }
        o = PUT_LIT(o, "{\"topic\":");
        o = put_str_in(o, buf + rec[MQ_F_TOPIC_START], rec[MQ_F_TOPIC_LEN], lim, end);
        o = PUT_LIT(o, ",\"flag\":");
        o = put_int(o, rec[MQ_F_FLAG]);
        o = PUT_LIT(o, ",\"body\":\"");
        o = put_b64(o, buf + rec[MQ_F_BODY_START], rec[MQ_F_BODY_LEN]);
        o = PUT_LIT(o, "\",\"properties\":{");
        for (int64_t q = 0; q < np; q++) {
            if (q) *o++ = ',';
            o = put_str_in(o, buf + pairs[q].ns, pairs[q].nl, lim, end);
            *o++ = ':';
            o = put_str_in(o, buf + pairs[q].vs, pairs[q].vl, lim, end);
        }
        o = PUT_LIT(o, "},\"queueId\":");
        o = put_int(o, rec[MQ_F_QUEUE_ID]);
        o = PUT_LIT(o, ",\"queueOffset\":");
        o = put_int(o, rec[MQ_F_QUEUE_OFFSET]);
        o = PUT_LIT(o, ",\"commitLogOffset\":");
        o = put_int(o, base_off + pos[r]);
        o = PUT_LIT(o, ",\"size\":");
        o = put_int(o, rec[MQ_F_SIZE]);
        o = PUT_LIT(o, ",\"bornTimestamp\":");
        o = put_int(o, rec[MQ_F_BORN_TIMESTAMP]);
        o = PUT_LIT(o, ",\"storeTimestamp\":");
        o = put_int(o, rec[MQ_F_STORE_TIMESTAMP]);
        o = PUT_LIT(o, ",\"bornHost\":\"");
        o = put_host(o, buf + rec[MQ_F_BORN_HOST_POS], rec[MQ_F_BORN_HOST_WIDTH]);
        o = PUT_LIT(o, "\",\"storeHost\":\"");
        o = put_host(o, buf + rec[MQ_F_STORE_HOST_POS], rec[MQ_F_STORE_HOST_WIDTH]);
        o = PUT_LIT(o, "\",\"sysFlag\":");
        o = put_int(o, rec[MQ_F_SYS_FLAG]);
        o = PUT_LIT(o, ",\"reconsumeTimes\":");
        o = put_int(o, rec[MQ_F_RECONSUME_TIMES]);
        o = PUT_LIT(o, ",\"bodyCRC\":");
        o = put_int(o, rec[MQ_F_BODY_CRC]);
        o = PUT_LIT(o, ",\"keys\":[");
        if (keys && keys->vl > 0) {
            const uint8_t *ks = buf + keys->vs;
            int64_t kn = keys->vl, first = 1;
            for (int64_t i = 0; i < kn;) {
                int64_t j = next_space(ks, i, kn, lim);
                if (j > i) {
                    if (!first) *o++ = ',';
                    first = 0;
                    o = put_str_in(o, ks + i, j - i, lim, end);
                }
                i = j + 1;
            }
        }
        o = PUT_LIT(o, "],\"tags\":");
        o = tags ? put_str_in(o, buf + tags->vs, tags->vl, lim, end) : PUT_LIT(o, "null");
        o = PUT_LIT(o, ",\"uniqKey\":");
        o = uniq ? put_str_in(o, buf + uniq->vs, uniq->vl, lim, end) : PUT_LIT(o, "null");
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
    octets_init();
#ifdef MQ_STR_SSE2
    USE_SSE2_STR = !getenv("MQSTORE_NO_AVX2");
#endif
    return PyModule_Create(&module);
}
