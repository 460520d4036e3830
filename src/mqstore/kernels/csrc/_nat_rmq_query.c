/* mqstore.kernels._nat_rmq_query: the exact single-key query (query_by_key) in C, the native twin
 * of mqstore/kernels/rocketmq/key_match_nb.py:exact_key_files.
 *
 * exact_key_files(files, segs, topic, key, prm, out) -> int
 *   files  int64 (nfiles, 4): (address, words, hash_slot_num, index_num) of the IndexFiles' uint32
 *          views, newest first (chain_walk.select_files's table);
 *   segs   int64 (nsegs, 4): (address, readable length, global base, file size) of the mapped
 *          CommitLog segments, ascending bases (key_match.SEG_*);
 *   topic, key: UTF-8 bytes; prm int64[7] (or a tuple of 7 ints): key_match.PRM_*; out int64
 *   (rows, 23) writable.
 * The key's chains are walked over every file with the rules of chain_walk.walk_chain /
 * select_files (same results, same cycle code SELECT_FILES_CYCLE - i); the candidates are sorted,
 * deduplicated, kept in [lo, hi), located in their segment and checked as key_match_nb does:
 * record structure and physical offset (columns.decode_one), topic, store time, the UNIQ_KEY value
 * or a space-separated KEYS piece (properties.prop_spans), then the body CRC of a match.  Returns
 * the number of matches (rows newest first by (store time, offset)), -1 (out too small) or -2 (a
 * candidate is not clean).  The caller keeps the addresses valid for the call.
 *
 * The GIL is released only when the walk found many candidates: a typical key has a handful and
 * its whole query takes about a microsecond, less than giving the GIL away and taking it back
 * under contention would cost.
 */
#include "mq_rmq.h"
#include "structmember.h"

#define HEADER_WORDS 10
#define ITEM_WORDS 5
#define MATCH_COLUMNS (MQ_N_FIELDS + 1)
#define F_SEGMENT MQ_N_FIELDS
#define N_FIELDS MQ_N_FIELDS
#define F_BODY_C_R_C MQ_F_BODY_CRC
#define F_PHYSICAL_OFFSET MQ_F_PHYSICAL_OFFSET
#define F_STORE_TIMESTAMP MQ_F_STORE_TIMESTAMP
#define F_BODY_START MQ_F_BODY_START
#define F_BODY_LEN MQ_F_BODY_LEN
#define F_TOPIC_START MQ_F_TOPIC_START
#define F_TOPIC_LEN MQ_F_TOPIC_LEN
#define F_PROPS_START MQ_F_PROPS_START
#define F_PROPS_LEN MQ_F_PROPS_LEN

#define SEG_ADDR 0
#define SEG_LIMIT 1
#define SEG_BASE 2
#define SEG_SIZE 3

#define WALK_OK 0
#define WALK_CYCLE 1
#define WALK_OUT_OF_FILE 2
#define WALK_ROOM 3
#define SELECT_ONE_ROOM (-2)
#define SELECT_FILES_CYCLE (-16)
#define EXACT_ROOM (-1)
#define EXACT_UNCLEAN (-2)
#define NOGIL_CANDIDATES 256

/* ---------------------------------------------------------------- the chain walk */

/* the row of segs (ascending bases) holding global offset off, or -1 */
static int64_t segment_of(const int64_t *segs, int64_t nsegs, int64_t off)
{
    int64_t lo = 0, hi = nsegs;
    while (lo < hi) {
        int64_t mid = (lo + hi) >> 1;
        if (segs[mid * 4 + SEG_BASE] <= off) lo = mid + 1;
        else hi = mid;
    }
    int64_t s = lo - 1;
    if (s < 0 || off >= segs[s * 4 + SEG_BASE] + segs[s * 4 + SEG_SIZE]) return -1;
    return s;
}

/* start loading the first cache lines of the record at global offset off (segs: the segment table,
 * NULL for none); a hint only, never a read */
static inline void prefetch_record(const int64_t *segs, int64_t nsegs, int64_t off)
{
    if (!segs) return;
    int64_t s = segment_of(segs, nsegs, off);
    if (s < 0) return;
    const int64_t *sg = segs + s * 4;
    int64_t pos = off - sg[SEG_BASE];
    if (pos < 0 || pos + 128 > sg[SEG_LIMIT]) return;
    const uint8_t *r = (const uint8_t *)(intptr_t)sg[SEG_ADDR] + pos;
    __builtin_prefetch(r);
    __builtin_prefetch(r + 64);
}


/* chain_walk.walk_chain on the IndexFile bytes p (nb bytes); writes to out[k..cap); the record
 * of each candidate is prefetched from segs (NULL: not) while the walk goes on */
static int walk_chain(const uint8_t *p, int64_t nb, int64_t slots, int64_t index_num, int64_t begin_ts, int64_t ic,
                      int64_t limit, int64_t h, int64_t max_num, int64_t begin, int64_t end, int64_t *out, int64_t cap,
                      int64_t k, int64_t *got_out, const int64_t *segs, int64_t nsegs)
{
    int64_t got = 0;
    *got_out = 0;
    if (slots <= 0) return WALK_OK;
    int64_t s = h % slots;
    if (s < 0) s += slots;
    if ((HEADER_WORDS + s + 1) * 4 > nb) return WALK_OUT_OF_FILE; /* a view shorter than its geometry */
    int64_t sv = mq_be32(p + (HEADER_WORDS + s) * 4);
    if (sv <= 0 || sv > limit || ic <= 1) return WALK_OK;
    int64_t items_w = HEADER_WORDS + slots;
    int64_t cur = sv, steps = 0;
    for (;;) {
        if (got >= max_num) break;
        if (cur >= index_num) {
            *got_out = got;
            return WALK_OUT_OF_FILE;
        }
        int64_t iw = items_w + cur * ITEM_WORDS;
        if ((iw + ITEM_WORDS) * 4 > nb) {
            *got_out = got;
            return WALK_OUT_OF_FILE;
        }
        const uint8_t *it = p + iw * 4;
        int64_t diff = mq_be32(it + 12);
        if (diff < 0) break;
        int64_t prev = mq_be32(it + 16);
        int64_t time_read = begin_ts + diff * 1000;
        if ((int64_t)mq_be32(it) == h && begin <= time_read && time_read <= end) {
            if (k + got >= cap) {
                *got_out = got;
                return WALK_ROOM;
            }
            out[k + got] = mq_be64(it + 4);
            prefetch_record(segs, nsegs, out[k + got]);
            got++;
        }
        if (prev <= 0 || prev > limit || prev == cur || time_read < begin) break;
        cur = prev;
        steps++;
        if (steps > ic) {
            *got_out = got;
            return WALK_CYCLE;
        }
    }
    *got_out = got;
    return WALK_OK;
}

/* start loading the hash slots of h in the first files of the table (a hint only, never a read) */
static inline void prefetch_slots(const int64_t *files, int64_t nfiles, int64_t h)
{
    for (int64_t f = 0; f < nfiles && f < 8; f++) { /* the slots of the first files load together */
        const int64_t *row = files + f * 4;
        int64_t slots = row[2];
        if (slots > 0 && (HEADER_WORDS + h % slots + 1) * 4 <= row[1] * 4)
            __builtin_prefetch((const uint8_t *)(intptr_t)row[0] + (HEADER_WORDS + h % slots) * 4);
    }
}

/* chain_walk.select_files with max_num unlimited: the candidates of hash h in every file (their
 * records prefetched from segs when not NULL); prefetched: prefetch_slots was called for h */
static int64_t select_files_p(const int64_t *files, int64_t nfiles, int64_t h, int64_t max_num, int64_t begin,
                              int64_t end, int64_t *out, int64_t cap, const int64_t *segs, int64_t nsegs, int prefetched)
{
    int64_t n = 0;
    if (!prefetched) prefetch_slots(files, nfiles, h);
    for (int64_t f = 0; f < nfiles; f++) {
        const int64_t *row = files + f * 4;
        const uint8_t *p = (const uint8_t *)(intptr_t)row[0];
        int64_t nb = row[1] * 4, slots = row[2], index_num = row[3];
        if (nb < HEADER_WORDS * 4) return n; /* not an IndexFile view: nothing more to walk */
        int64_t fb = mq_be64(p), fe = mq_be64(p + 8), ic = mq_be32(p + 36);
        if ((begin < fb && end > fe) || (fb <= begin && begin <= fe) || (fb <= end && end <= fe)) {
            if (n < max_num) {
                int64_t last_item = ic < index_num - 1 ? ic : index_num - 1;
                int64_t got;
                int st = walk_chain(p, nb, slots, index_num, fb, ic, last_item, h, max_num - n, begin, end, out, cap, n,
                                    &got, segs, nsegs);
                if (st == WALK_ROOM) return SELECT_ONE_ROOM;
                if (st == WALK_CYCLE) return SELECT_FILES_CYCLE - f;
                n += got;
            }
        }
        if (fb < begin || n >= max_num) break;
    }
    return n;
}

static int64_t select_files(const int64_t *files, int64_t nfiles, int64_t h, int64_t max_num, int64_t begin,
                            int64_t end, int64_t *out, int64_t cap, const int64_t *segs, int64_t nsegs)
{
    return select_files_p(files, nfiles, h, max_num, begin, end, out, cap, segs, nsegs, 0);
}

/* ---------------------------------------------------------------- the record checks */

static inline int eq_at(const uint8_t *buf, int64_t a, const uint8_t *c, int64_t n)
{
    return n == 0 || memcmp(buf + a, c, (size_t)n) == 0;
}

/* whether key is one of the space-separated pieces of buf[s:e] */
static int has_piece(const uint8_t *buf, int64_t s, int64_t e, const uint8_t *key, int64_t n)
{
    int64_t i = s;
    while (i < e) {
        int64_t j = i;
        while (j < e && buf[j] != ' ') j++;
        if (j - i == n && eq_at(buf, i, key, n)) return 1;
        i = j + 1;
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* the query after the walk: candidates c[0:n] -> matches in out (rows of MATCH_COLUMNS) */
static int64_t check_candidates(int64_t *c, int64_t n, const int64_t *segs, int64_t nsegs, const uint8_t *topic,
                                int64_t tl, const uint8_t *key, int64_t kl, const int64_t *prm, int64_t *out,
                                int64_t rows)
{
    int64_t lo = prm[3], hi = prm[4], b = prm[5], e = prm[6];
    if (n > 1) {
        int sorted = 1;
        for (int64_t i = 1; i < n && sorted; i++) sorted = c[i - 1] <= c[i];
        if (!sorted) qsort(c, (size_t)n, sizeof(int64_t), cmp_i64);
    }
    int64_t spans[MQ_PROP_SPANS];
    int64_t m = 0, prev = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t off = c[i];
        if (off == prev) continue;
        prev = off;
        if (off < lo || off >= hi) continue;
        int64_t s = segment_of(segs, nsegs, off);
        if (s < 0) continue;
        if (m == rows) return EXACT_ROOM;
        const int64_t *sg = segs + s * 4;
        const uint8_t *buf = (const uint8_t *)(intptr_t)sg[SEG_ADDR];
        int64_t *o = out + m * MATCH_COLUMNS;
        int64_t pos = off - sg[SEG_BASE];
        if (pos >= 0 && pos + 4 <= sg[SEG_LIMIT]) { /* the record's other lines load together */
            int64_t t = mq_be32(buf + pos), stop = pos + t < sg[SEG_LIMIT] ? pos + t : sg[SEG_LIMIT];
            for (int64_t a = pos + 128; a < stop; a += 64) __builtin_prefetch(buf + a);
        }
        if (!mq_decode_record(buf, sg[SEG_LIMIT], off - sg[SEG_BASE], o) || o[F_PHYSICAL_OFFSET] != off) return EXACT_UNCLEAN;
        if (o[F_TOPIC_LEN] != tl || !eq_at(buf, o[F_TOPIC_START], topic, tl)) continue;
        int64_t ts = o[F_STORE_TIMESTAMP];
        if (ts < b || ts > e) continue;
        int64_t ps = o[F_PROPS_START];
        mq_prop_spans(buf, ps, ps + o[F_PROPS_LEN], spans);
        int hit = spans[MQ_P_UNIQ + 1] - spans[MQ_P_UNIQ] == kl && (kl == 0 || eq_at(buf, spans[MQ_P_UNIQ], key, kl));
        if (!hit && spans[MQ_P_KEYS] >= 0) hit = has_piece(buf, spans[MQ_P_KEYS], spans[MQ_P_KEYS + 1], key, kl);
        if (!hit) continue;
        int64_t bl = o[F_BODY_LEN];
        int64_t crc = bl == 0 ? 0 : (int64_t)(mq_crc32(0, buf + o[F_BODY_START], (size_t)bl) & 0x7FFFFFFFu);
        if (crc != o[F_BODY_C_R_C]) return EXACT_UNCLEAN;
        o[F_SEGMENT] = s;
        m++;
    }
    /* newest first: (store time, offset) descending (insertion sort: a key has few matches) */
    int64_t tmp[MATCH_COLUMNS];
    for (int64_t i = 1; i < m; i++) {
        int64_t j = i;
        while (j > 0) {
            int64_t *x = out + j * MATCH_COLUMNS, *y = out + (j - 1) * MATCH_COLUMNS;
            if (!(x[F_STORE_TIMESTAMP] > y[F_STORE_TIMESTAMP] ||
                  (x[F_STORE_TIMESTAMP] == y[F_STORE_TIMESTAMP] && x[F_PHYSICAL_OFFSET] > y[F_PHYSICAL_OFFSET])))
                break;
            memcpy(tmp, x, sizeof tmp);
            memcpy(x, y, sizeof tmp);
            memcpy(y, tmp, sizeof tmp);
            j--;
        }
    }
    return m;
}

/* ---------------------------------------------------------------- the module function */

/* bytes objects are read in place (no buffer protocol round trip); anything else through a view */
static int get_view(PyObject *obj, Py_buffer *v, Py_ssize_t itemsize, int writable, const char *what, int *held)
{
    *held = 0;
    if (!writable && itemsize <= 1 && PyBytes_CheckExact(obj)) {
        v->buf = PyBytes_AS_STRING(obj);
        v->len = PyBytes_GET_SIZE(obj);
        v->itemsize = 1;
        return 0;
    }
    if (mq_view(obj, v, itemsize, writable, what) < 0) return -1;
    *held = 1;
    return 0;
}

static PyObject *exact_key_files(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "exact_key_files(files, segs, topic, key, prm, out)");
        return NULL;
    }
    static const char *what[6] = {"files", "segs", "topic", "key", "prm", "out"};
    static const Py_ssize_t isz[6] = {8, 8, 0, 0, 8, 8};
    Py_buffer v[6];
    int held[6] = {0, 0, 0, 0, 0, 0};
    int64_t result = 0;
    int ok = 0;
    int64_t prm_t[7];
    for (int i = 0; i < 6; i++) {
        if (i == 4 && PyTuple_CheckExact(args[4]) && PyTuple_GET_SIZE(args[4]) == 7) { /* prm as a tuple of ints */
            for (int j = 0; j < 7; j++)
                if ((prm_t[j] = mq_i64(PyTuple_GET_ITEM(args[4], j))) == -1 && PyErr_Occurred()) goto done;
            v[4].buf = prm_t;
            v[4].len = sizeof prm_t;
            continue;
        }
        if (get_view(args[i], &v[i], isz[i], i == 5, what[i], &held[i]) < 0) goto done;
    }
    if (v[0].len % 32 || v[1].len % 32 || v[4].len < 7 * 8 || v[5].len % (MATCH_COLUMNS * 8)) {
        PyErr_SetString(PyExc_ValueError, "exact_key_files: files/segs need 4 columns, prm 7 slots, out 23 columns");
        goto done;
    }
    const int64_t *files = v[0].buf, *segs = v[1].buf, *prm = v[4].buf;
    int64_t nfiles = v[0].len / 32, nsegs = v[1].len / 32, rows = v[5].len / (MATCH_COLUMNS * 8);
    const uint8_t *topic = v[2].buf, *key = v[3].buf;
    int64_t tl = v[2].len, kl = v[3].len;
    int64_t *out = v[5].buf;
    int64_t seed = prm[0];
    int64_t h = seed < 0 ? mq_index_hash_of_state(mq_hash_continue(key, 0, kl, (uint32_t)~seed)) : seed;
    int64_t small[64];
    int64_t *cand = small, cap = 64;
    int64_t n = select_files(files, nfiles, h, INT64_MAX, prm[1], prm[2], cand, cap, segs, nsegs);
    while (n == SELECT_ONE_ROOM) {
        if (cand != small) PyMem_RawFree(cand);
        cap *= 16;
        cand = PyMem_RawMalloc((size_t)cap * sizeof(int64_t));
        if (!cand) {
            PyErr_NoMemory();
            goto done;
        }
        if (cap > 4096) {
            Py_BEGIN_ALLOW_THREADS
            n = select_files(files, nfiles, h, INT64_MAX, prm[1], prm[2], cand, cap, segs, nsegs);
            Py_END_ALLOW_THREADS
        } else {
            n = select_files(files, nfiles, h, INT64_MAX, prm[1], prm[2], cand, cap, segs, nsegs);
        }
    }
    if (n < 0) {
        result = n;
    } else if (n > NOGIL_CANDIDATES) {
        Py_BEGIN_ALLOW_THREADS
        result = check_candidates(cand, n, segs, nsegs, topic, tl, key, kl, prm, out, rows);
        Py_END_ALLOW_THREADS
    } else {
        result = check_candidates(cand, n, segs, nsegs, topic, tl, key, kl, prm, out, rows);
    }
    if (cand != small) PyMem_RawFree(cand);
    ok = 1;
done:
    for (int i = 0; i < 6; i++)
        if (held[i]) PyBuffer_Release(&v[i]);
    return ok ? PyLong_FromLongLong((long long)result) : NULL;
}


/* ---------------------------------------------------------------- the messages of the matches */

/* bind_messages(cls, slots, hosts, host_of): the message class, the member descriptors of its 18
 * fields in constructor order (slots of a slots dataclass: T_OBJECT_EX members of cls), the cache
 * raw host bytes -> Host and the function that fills it on a miss. */
#define N_MSG_FIELDS 18
static PyTypeObject *msg_type = NULL;
static Py_ssize_t msg_off[N_MSG_FIELDS];
static PyObject *host_cache = NULL, *host_of = NULL;

static void clear_recent_hosts(void);

static PyObject *bind_messages(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4 || !PyType_Check(args[0]) || !PyTuple_Check(args[1]) || PyTuple_GET_SIZE(args[1]) != N_MSG_FIELDS ||
        !PyDict_Check(args[2]) || !PyCallable_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "bind_messages(cls, 18 member descriptors, hosts dict, host_of)");
        return NULL;
    }
    PyTypeObject *t = (PyTypeObject *)args[0];
    Py_ssize_t off[N_MSG_FIELDS];
    for (int i = 0; i < N_MSG_FIELDS; i++) {
        PyObject *d = PyTuple_GET_ITEM(args[1], i);
        if (!Py_IS_TYPE(d, &PyMemberDescr_Type) || ((PyDescrObject *)d)->d_type != t ||
            ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX ||
            (((PyMemberDescrObject *)d)->d_member->flags & READONLY)) {
            PyErr_Format(PyExc_TypeError, "bind_messages: field %d is not a writable object slot of the class", i);
            return NULL;
        }
        off[i] = ((PyMemberDescrObject *)d)->d_member->offset;
    }
    Py_INCREF(t);
    Py_XSETREF(msg_type, t);
    memcpy(msg_off, off, sizeof off);
    Py_INCREF(args[2]);
    Py_XSETREF(host_cache, args[2]);
    Py_INCREF(args[3]);
    Py_XSETREF(host_of, args[3]);
    clear_recent_hosts();
    Py_RETURN_NONE;
}

/* the last hosts seen (raw bytes -> the object the host cache gave): a query's messages mostly
 * share one store host and few born hosts, so most lookups end here without a bytes object */
#define N_RECENT_HOSTS 4
static uint8_t recent_raw[N_RECENT_HOSTS][20];
static int64_t recent_len[N_RECENT_HOSTS];
static PyObject *recent_obj[N_RECENT_HOSTS];
static int recent_next = 0;

static void clear_recent_hosts(void)
{
    for (int i = 0; i < N_RECENT_HOSTS; i++) {
        Py_CLEAR(recent_obj[i]);
        recent_len[i] = 0;
    }
}

static PyObject *host_lookup(const uint8_t *p, int64_t n);

/* the Host of the raw address bytes p[0:n] (the recent hosts, else host_lookup); a new reference */
static PyObject *host_obj(const uint8_t *p, int64_t n)
{
    if (n <= 20) {
        for (int i = 0; i < N_RECENT_HOSTS; i++)
            if (recent_obj[i] && recent_len[i] == n && memcmp(recent_raw[i], p, (size_t)n) == 0)
                return Py_NewRef(recent_obj[i]);
    }
    PyObject *h = host_lookup(p, n);
    if (h && n <= 20) {
        int i = recent_next;
        recent_next = (recent_next + 1) % N_RECENT_HOSTS;
        memcpy(recent_raw[i], p, (size_t)n);
        recent_len[i] = n;
        Py_XSETREF(recent_obj[i], Py_NewRef(h));
    }
    return h;
}

/* the Host of the raw address bytes p[0:n] (the host cache, else host_of(raw)); a new reference */
static PyObject *host_lookup(const uint8_t *p, int64_t n)
{
    PyObject *raw = PyBytes_FromStringAndSize((const char *)p, (Py_ssize_t)n);
    if (!raw) return NULL;
    PyObject *h = PyDict_GetItemWithError(host_cache, raw);
    if (h) {
        Py_INCREF(h);
    } else if (!PyErr_Occurred()) {
        h = PyObject_CallOneArg(host_of, raw);
    }
    Py_DECREF(raw);
    return h;
}

/* the list of the Messages of the n match rows (exact_key_files's rows, F_SEGMENT naming the row of
 * segs), fields as the Python builder (api.rocketmq._messages_of_matches) sets them: body bytes,
 * properties text decoded with errors="replace", properties left to parse on first access (None).
 * NULL with an exception set on failure (ValueError for a row outside its segment). */
static PyObject *build_messages(const int64_t *rows, int64_t n, const int64_t *segs, int64_t nsegs, PyObject *topic)
{
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) return NULL;
    for (int64_t r = 0; r < n; r++) {
        const int64_t *o = rows + r * MATCH_COLUMNS;
        int64_t s = o[F_SEGMENT];
        if (s < 0 || s >= nsegs) goto bad_row;
        const uint8_t *buf = (const uint8_t *)(intptr_t)segs[s * 4 + SEG_ADDR];
        int64_t lim = segs[s * 4 + SEG_LIMIT];
        /* the spans were checked by decode_one against this limit; check again (rows may come from Python) */
        if (o[9] < 0 || o[9] + o[10] > lim || o[12] < 0 || o[12] + o[13] > lim || o[F_BODY_START] < 0 ||
            o[F_BODY_START] + o[F_BODY_LEN] > lim || o[F_PROPS_START] < 0 || o[F_PROPS_START] + o[F_PROPS_LEN] > lim ||
            o[F_BODY_LEN] < 0 || o[F_PROPS_LEN] < 0 || o[10] < 0 || o[13] < 0)
            goto bad_row;
        PyObject *v[N_MSG_FIELDS];
        v[0] = Py_NewRef(topic);
        v[1] = PyBytes_FromStringAndSize((const char *)buf + o[F_BODY_START], (Py_ssize_t)o[F_BODY_LEN]);
        v[2] = PyLong_FromLongLong(o[3]);  /* queue_id */
        v[3] = PyLong_FromLongLong(o[4]);  /* flag */
        v[4] = PyLong_FromLongLong(o[5]);  /* queue_offset */
        v[5] = PyLong_FromLongLong(o[6]);  /* commit_log_offset */
        v[6] = PyLong_FromLongLong(o[7]);  /* sys_flag */
        v[7] = PyLong_FromLongLong(o[8]);  /* born_timestamp */
        v[8] = host_obj(buf + o[9], o[10]);
        v[9] = PyLong_FromLongLong(o[11]); /* store_timestamp */
        v[10] = host_obj(buf + o[12], o[13]);
        v[11] = PyLong_FromLongLong(o[14]); /* reconsume_times */
        v[12] = PyLong_FromLongLong(o[15]); /* prepared_transaction_offset */
        v[13] = PyUnicode_DecodeUTF8((const char *)buf + o[F_PROPS_START], (Py_ssize_t)o[F_PROPS_LEN], "replace");
        v[14] = PyLong_FromLongLong(o[2]);  /* body_crc */
        v[15] = PyLong_FromLongLong(o[1]);  /* magic */
        v[16] = PyLong_FromLongLong(o[0]);  /* total_size */
        v[17] = Py_NewRef(Py_None);         /* properties: parsed on first access */
        int fail = 0;
        for (int i = 0; i < N_MSG_FIELDS; i++) fail |= v[i] == NULL;
        PyObject *m = fail ? NULL : msg_type->tp_alloc(msg_type, 0);
        if (!m) {
            for (int i = 0; i < N_MSG_FIELDS; i++) Py_XDECREF(v[i]);
            Py_DECREF(list);
            return NULL;
        }
        for (int i = 0; i < N_MSG_FIELDS; i++) *(PyObject **)((char *)m + msg_off[i]) = v[i];
        PyList_SET_ITEM(list, (Py_ssize_t)r, m);
    }
    return list;
bad_row:
    Py_DECREF(list);
    PyErr_SetString(PyExc_ValueError, "messages: a row lies outside its segment");
    return NULL;
}

/* messages(out, n, segs, topic) -> list: build_messages of the first n rows of out */
static PyObject *messages(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 4 || !PyUnicode_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "messages(out, n, segs, topic: str)");
        return NULL;
    }
    if (!msg_type) {
        PyErr_SetString(PyExc_RuntimeError, "messages: bind_messages was not called");
        return NULL;
    }
    int64_t n;
    Py_buffer vo, vs;
    if ((n = mq_i64(args[1])) == -1 && PyErr_Occurred()) return NULL;
    if (mq_view(args[0], &vo, 8, 0, "out") < 0) return NULL;
    if (mq_view(args[2], &vs, 8, 0, "segs") < 0) {
        PyBuffer_Release(&vo);
        return NULL;
    }
    PyObject *list = NULL;
    if (n < 0 || n * MATCH_COLUMNS * 8 > vo.len)
        PyErr_SetString(PyExc_ValueError, "messages: n outside out");
    else
        list = build_messages(vo.buf, n, vs.buf, vs.len / 32, args[3]);
    PyBuffer_Release(&vo);
    PyBuffer_Release(&vs);
    return list;
}

/* ---------------------------------------------------------------- the whole query in one call */

#define QUERY_NEED_INDEX_PLAN (-3)
#define QUERY_NEED_SEGMENT_PLAN (-4)
#define QUERY_FALLBACK (-5)
#define QUERY_ROWS 8
#define QUERY_SEGS 64

static PyObject *str_wrote_position = NULL;

/* whether plan is a tuple (files snapshot list, ..., ..., table bytes of 4 int64 columns) whose
 * snapshot holds exactly the objects of the live list `live`; the table in *tab, its rows in *n */
static int plan_current(PyObject *plan, PyObject *live, const int64_t **tab, int64_t *n)
{
    if (!PyTuple_CheckExact(plan) || PyTuple_GET_SIZE(plan) < 4 || !PyList_CheckExact(live)) return 0;
    PyObject *snap = PyTuple_GET_ITEM(plan, 0), *tb = PyTuple_GET_ITEM(plan, 3);
    if (!PyList_CheckExact(snap) || !PyBytes_CheckExact(tb)) return 0;
    Py_ssize_t k = PyList_GET_SIZE(live);
    if (PyList_GET_SIZE(snap) != k || PyBytes_GET_SIZE(tb) != (Py_ssize_t)k * 32) return 0;
    for (Py_ssize_t i = 0; i < k; i++)
        if (PyList_GET_ITEM(snap, i) != PyList_GET_ITEM(live, i)) return 0;
    *tab = (const int64_t *)PyBytes_AS_STRING(tb);
    *n = (int64_t)k;
    return 1;
}

/* the UTF-8 bytes of a str (NULL, no exception, when it has none: lone surrogates) */
static const uint8_t *utf8_of(PyObject *s, Py_ssize_t *len)
{
    if (PyUnicode_IS_ASCII(s)) {
        *len = PyUnicode_GET_LENGTH(s);
        return (const uint8_t *)PyUnicode_DATA(s);
    }
    const char *p = PyUnicode_AsUTF8AndSize(s, len);
    if (!p) PyErr_Clear();
    return (const uint8_t *)p;
}

/* query(index_plan, index_files, segment_plan, segments, topic, key, begin, end, max_num) -> list | int
 *
 * The whole exact single-key query (IndexService.exact_query): the key's hash from the UTF-8 of
 * "topic#" and the key, the chains of every IndexFile of the plan (select_files's rules, no cap),
 * the candidates checked in the CommitLog segments (check_candidates) and the list of the
 * Messages of the matches, newest first, at most max_num (< 0: all).
 * index_plan: IndexService._plan, (files snapshot, table, views, table as bytes), current when its
 * snapshot holds the objects of index_files; segment_plan: CommitLog._seg_plan, the same shape
 * against segments (the CommitLog's MappedFile list; the last one's readable length is read from its
 * wrote_position).  An int instead of the list: QUERY_NEED_INDEX_PLAN / QUERY_NEED_SEGMENT_PLAN (a
 * plan is missing or stale: make it and call again), QUERY_FALLBACK (the key is not encodable or
 * holds U+FFFD), EXACT_UNCLEAN (a candidate is not a clean record) or SELECT_FILES_CYCLE - i (a
 * looping chain in IndexFile i of the plan, newest first). */
/* the UTF-8 of topic and key and the key's IndexFile hash (hash of "topic#key"); 0 (no exception)
 * when the compiled path cannot compare the key (not encodable, or holding U+FFFD) */
static int key_hash(PyObject *topic_s, PyObject *key_s, const uint8_t **topic, Py_ssize_t *tl, const uint8_t **key,
                    Py_ssize_t *kl, int64_t *h)
{
    *topic = utf8_of(topic_s, tl);
    *key = utf8_of(key_s, kl);
    if (!*topic || !*key) return 0;
    const uint8_t *k = *key;
    if (!PyUnicode_IS_ASCII(key_s))
        for (Py_ssize_t i = 0; i + 2 < *kl; i++)
            if (k[i] == 0xEF && k[i + 1] == 0xBF && k[i + 2] == 0xBD) return 0;
    uint32_t st = mq_hash_continue(*topic, 0, *tl, 0);
    st = st * 31u + (uint32_t)'#';
    *h = mq_index_hash_of_state(mq_hash_continue(k, 0, *kl, st));
    return 1;
}

/* the query of query(); hashed: the caller gave topic, key and h from key_hash (else made here) */
static PyObject *query_run(PyObject *index_plan, PyObject *index_files, PyObject *segment_plan, PyObject *segments,
                           PyObject *topic_s, PyObject *key_s, int64_t b, int64_t e, int64_t max_num, int hashed,
                           const uint8_t *topic, Py_ssize_t tl, const uint8_t *key, Py_ssize_t kl, int64_t h)
{
    const int64_t *files, *stab;
    int64_t nfiles, nsegs;
    if (!plan_current(index_plan, index_files, &files, &nfiles)) return PyLong_FromLong(QUERY_NEED_INDEX_PLAN);
    if (!hashed && !key_hash(topic_s, key_s, &topic, &tl, &key, &kl, &h)) return PyLong_FromLong(QUERY_FALLBACK);
    /* the key's slots load while the segment table is made */
    prefetch_slots(files, nfiles, h);
    if (!plan_current(segment_plan, segments, &stab, &nsegs)) return PyLong_FromLong(QUERY_NEED_SEGMENT_PLAN);
    /* the segment table with the live readable length of the last segment */
    int64_t seg_small[QUERY_SEGS * 4];
    int64_t *segs = seg_small;
    int64_t lo = 0, hi = 0;
    if (nsegs > 0) {
        PyObject *wp = PyObject_GetAttr(PyList_GET_ITEM(segments, nsegs - 1), str_wrote_position);
        if (!wp) return NULL;
        int64_t last_limit = mq_i64(wp);
        Py_DECREF(wp);
        if (last_limit == -1 && PyErr_Occurred()) return NULL;
        if (nsegs > QUERY_SEGS && !(segs = PyMem_Malloc((size_t)nsegs * 32))) return PyErr_NoMemory();
        memcpy(segs, stab, (size_t)nsegs * 32);
        segs[(nsegs - 1) * 4 + SEG_LIMIT] = last_limit;
        lo = segs[SEG_BASE] > 0 ? segs[SEG_BASE] : 0;
        hi = segs[(nsegs - 1) * 4 + SEG_BASE] + last_limit;
    }
    int64_t prm[7] = {0, b > 1000 ? b - 1000 : 0, e, lo, hi, b, e};
    PyObject *res = NULL;
    int64_t cand_small[64], rows_small[QUERY_ROWS * MATCH_COLUMNS];
    int64_t *cand = cand_small, cap = 64, *rows = rows_small, nrows = QUERY_ROWS;
    int64_t n = select_files_p(files, nfiles, h, INT64_MAX, prm[1], prm[2], cand, cap, segs, nsegs, 1);
    while (n == SELECT_ONE_ROOM) {
        if (cand != cand_small) PyMem_RawFree(cand);
        cap *= 16;
        if (!(cand = PyMem_RawMalloc((size_t)cap * sizeof(int64_t)))) {
            PyErr_NoMemory();
            goto done;
        }
        Py_BEGIN_ALLOW_THREADS
        n = select_files(files, nfiles, h, INT64_MAX, prm[1], prm[2], cand, cap, segs, nsegs);
        Py_END_ALLOW_THREADS
    }
    if (n < 0) {
        res = PyLong_FromLongLong((long long)n);
        goto done;
    }
    if (n > nrows) { /* room for every candidate: no second pass */
        nrows = n;
        if (!(rows = PyMem_RawMalloc((size_t)nrows * MATCH_COLUMNS * 8))) {
            PyErr_NoMemory();
            goto done;
        }
    }
    int64_t m;
    if (n > NOGIL_CANDIDATES) {
        Py_BEGIN_ALLOW_THREADS
        m = check_candidates(cand, n, segs, nsegs, topic, tl, key, kl, prm, rows, nrows);
        Py_END_ALLOW_THREADS
    } else {
        m = check_candidates(cand, n, segs, nsegs, topic, tl, key, kl, prm, rows, nrows);
    }
    if (m < 0) {
        res = PyLong_FromLongLong((long long)m);
        goto done;
    }
    if (max_num >= 0 && m > max_num) m = max_num;
    res = build_messages(rows, m, segs, nsegs, topic_s);
done:
    if (cand != cand_small) PyMem_RawFree(cand);
    if (rows != rows_small) PyMem_RawFree(rows);
    if (segs != seg_small) PyMem_Free(segs);
    return res;
}

static PyObject *query(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 9 || !PyUnicode_Check(args[4]) || !PyUnicode_Check(args[5])) {
        PyErr_SetString(PyExc_TypeError,
                        "query(index_plan, index_files, segment_plan, segments, topic: str, key: str, begin, end, max_num)");
        return NULL;
    }
    if (!msg_type) {
        PyErr_SetString(PyExc_RuntimeError, "query: bind_messages was not called");
        return NULL;
    }
    int64_t b = mq_i64(args[6]), e, max_num;
    if (b == -1 && PyErr_Occurred()) return NULL;
    if ((e = mq_i64(args[7])) == -1 && PyErr_Occurred()) return NULL;
    if ((max_num = mq_i64(args[8])) == -1 && PyErr_Occurred()) return NULL;
    return query_run(args[0], args[1], args[2], args[3], args[4], args[5], b, e, max_num, 0, NULL, 0, NULL, 0, 0);
}

/* ---------------------------------------------------------------- the query bound to a store */

/* KeyQuery(engine, index, commit_log, segments_queue, read_only, topics_ok): MessageStore.query_by_key's
 * common case in one call, arguments included.  Called as kq(topic, key[, begin[, end[, max_num]]])
 * it answers the list of query() when every argument has the plain shape the Python method would
 * accept without converting anything: topic an exact str already in the set topics_ok (topics that
 * passed validate_topic), key a non-empty exact str, begin/end None or an exact int of int64,
 * max_num None or an exact positive int; and the engine is open (engine._closed is False).  A
 * writable engine's pending records are dispatched first (engine.dispatch_pending()).  Any other
 * case answers an int (QUERY_SLOW, or query()'s codes: a plan to make, a fallback, a cycle): the
 * caller then runs the whole Python method, which checks, raises and answers as it always did. */
#define QUERY_SLOW (-6)

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *engine, *index, *commit_log, *queue, *topics_ok;
    /* the instance dicts of engine, index, commit_log and queue when their attributes read here
     * are plain instance attributes (read from the dict; NULL: read with getattr) */
    PyObject *d_engine, *d_index, *d_commit_log, *d_queue;
    /* the last current index plan seen (its table: where the next key's slots are prefetched
     * before the plan is checked; a prefetch is a hint, never a read) */
    PyObject *last_plan;
    int read_only;
} KeyQuery;

static PyObject *str_closed = NULL, *str_plan = NULL, *str_files = NULL, *str_seg_plan = NULL,
                *str_dispatch_pending = NULL;

/* an int64 argument: None -> dflt, an exact int in range -> its value; 0 when the argument has
 * another shape (no exception set) */
static int plain_i64(PyObject *o, int64_t dflt, int64_t *out)
{
    if (o == Py_None) {
        *out = dflt;
        return 1;
    }
    if (!PyLong_CheckExact(o)) return 0;
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow || (v == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        return 0;
    }
    *out = (int64_t)v;
    return 1;
}

/* obj.name (a new reference): from the instance dict d when given and holding it, else getattr */
static inline PyObject *attr_of(PyObject *obj, PyObject *d, PyObject *name)
{
    if (d) {
        PyObject *v = PyDict_GetItemWithError(d, name);
        if (v) return Py_NewRef(v);
        if (PyErr_Occurred()) return NULL;
    }
    return PyObject_GetAttr(obj, name);
}

/* the instance dict of obj when every name of names (NULL-terminated) is a plain instance
 * attribute (no attribute of that name on its type, present in the dict), else NULL; no exception */
static PyObject *plain_dict(PyObject *obj, PyObject *const *names)
{
    if (!Py_TYPE(obj)->tp_dictoffset) return NULL;
    for (int i = 0; names[i]; i++) {
        int on_type = PyObject_HasAttr((PyObject *)Py_TYPE(obj), names[i]);
        if (on_type) return NULL;
    }
    PyObject *d = PyObject_GenericGetDict(obj, NULL);
    if (!d) {
        PyErr_Clear();
        return NULL;
    }
    for (int i = 0; names[i]; i++) {
        if (!PyDict_CheckExact(d) || !PyDict_GetItemWithError(d, names[i])) {
            PyErr_Clear();
            Py_DECREF(d);
            return NULL;
        }
    }
    return d;
}

static PyObject *key_query_call(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames)
{
    KeyQuery *q = (KeyQuery *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    if (kwnames || nargs < 2 || nargs > 5 || !msg_type) return PyLong_FromLong(QUERY_SLOW);
    PyObject *topic = args[0], *key = args[1];
    if (!PyUnicode_CheckExact(topic) || !PyUnicode_CheckExact(key) || PyUnicode_GET_LENGTH(key) == 0)
        return PyLong_FromLong(QUERY_SLOW);
    int known = PySet_Contains(q->topics_ok, topic);
    if (known < 0) return NULL;
    int64_t b, e, mn;
    if (!known || !plain_i64(nargs > 2 ? args[2] : Py_None, 0, &b) ||
        !plain_i64(nargs > 3 ? args[3] : Py_None, INT64_MAX, &e) || !plain_i64(nargs > 4 ? args[4] : Py_None, -1, &mn) ||
        mn == 0 || mn < -1 || (mn == -1 && nargs > 4 && args[4] != Py_None))
        return PyLong_FromLong(QUERY_SLOW);
    /* the key's hash first, and its slots prefetched where the last plan had its files: they load
     * while the store's state is read and the plans are checked */
    const uint8_t *tb, *kb;
    Py_ssize_t tl, kl;
    int64_t h = 0;
    int hashed = key_hash(topic, key, &tb, &tl, &kb, &kl, &h);
    if (hashed && q->last_plan) {
        PyObject *tab = PyTuple_GET_ITEM(q->last_plan, 3);
        prefetch_slots((const int64_t *)PyBytes_AS_STRING(tab), PyBytes_GET_SIZE(tab) / 32, h);
    }
    PyObject *closed = attr_of(q->engine, q->d_engine, str_closed);
    if (!closed) return NULL;
    Py_DECREF(closed);
    if (closed != Py_False) return PyLong_FromLong(QUERY_SLOW);
    if (!q->read_only) {
        PyObject *r = PyObject_CallMethodNoArgs(q->engine, str_dispatch_pending);
        if (!r) return NULL;
        Py_DECREF(r);
    }
    if (!hashed) return PyLong_FromLong(QUERY_FALLBACK);
    PyObject *ip = attr_of(q->index, q->d_index, str_plan), *ifl = ip ? attr_of(q->index, q->d_index, str_files) : NULL;
    PyObject *sp = ifl ? attr_of(q->commit_log, q->d_commit_log, str_seg_plan) : NULL;
    PyObject *sf = sp ? attr_of(q->queue, q->d_queue, str_files) : NULL;
    PyObject *res = NULL;
    if (sf) {
        const int64_t *ft;
        int64_t nf;
        if (ip != q->last_plan && plan_current(ip, ifl, &ft, &nf)) Py_XSETREF(q->last_plan, Py_NewRef(ip));
        res = query_run(ip, ifl, sp, sf, topic, key, b, e, mn, 1, tb, tl, kb, kl, h);
    }
    Py_XDECREF(ip);
    Py_XDECREF(ifl);
    Py_XDECREF(sp);
    Py_XDECREF(sf);
    return res;
}

static int key_query_traverse(PyObject *self, visitproc visit, void *arg)
{
    KeyQuery *q = (KeyQuery *)self;
    Py_VISIT(q->engine);
    Py_VISIT(q->index);
    Py_VISIT(q->commit_log);
    Py_VISIT(q->queue);
    Py_VISIT(q->topics_ok);
    Py_VISIT(q->d_engine);
    Py_VISIT(q->d_index);
    Py_VISIT(q->d_commit_log);
    Py_VISIT(q->d_queue);
    Py_VISIT(q->last_plan);
    return 0;
}

static int key_query_clear(PyObject *self)
{
    KeyQuery *q = (KeyQuery *)self;
    Py_CLEAR(q->engine);
    Py_CLEAR(q->index);
    Py_CLEAR(q->commit_log);
    Py_CLEAR(q->queue);
    Py_CLEAR(q->topics_ok);
    Py_CLEAR(q->d_engine);
    Py_CLEAR(q->d_index);
    Py_CLEAR(q->d_commit_log);
    Py_CLEAR(q->d_queue);
    Py_CLEAR(q->last_plan);
    return 0;
}

static void key_query_dealloc(PyObject *self)
{
    PyObject_GC_UnTrack(self);
    key_query_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *key_query_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *engine, *index, *cl, *queue, *topics_ok;
    int read_only;
    static char *kw[] = {"engine", "index", "commit_log", "segments_queue", "read_only", "topics_ok", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOpO!:KeyQuery", kw, &engine, &index, &cl, &queue, &read_only,
                                     &PySet_Type, &topics_ok))
        return NULL;
    KeyQuery *q = PyObject_GC_New(KeyQuery, type);
    if (!q) return NULL;
    q->vectorcall = key_query_call;
    q->engine = Py_NewRef(engine);
    q->index = Py_NewRef(index);
    q->commit_log = Py_NewRef(cl);
    q->queue = Py_NewRef(queue);
    q->topics_ok = Py_NewRef(topics_ok);
    PyObject *n_engine[] = {str_closed, NULL}, *n_index[] = {str_plan, str_files, NULL}, *n_cl[] = {str_seg_plan, NULL},
             *n_queue[] = {str_files, NULL};
    q->d_engine = plain_dict(engine, n_engine);
    q->d_index = plain_dict(index, n_index);
    q->d_commit_log = plain_dict(cl, n_cl);
    q->d_queue = plain_dict(queue, n_queue);
    q->last_plan = NULL;
    q->read_only = read_only;
    PyObject_GC_Track(q);
    return (PyObject *)q;
}

static PyTypeObject KeyQueryType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "mqstore.kernels._nat_rmq_query.KeyQuery",
    .tp_basicsize = sizeof(KeyQuery),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_doc = "KeyQuery(engine, index, commit_log, segments_queue, read_only, topics_ok): a store's "
              "query_by_key common case in one call (list), else an int (the caller's Python path answers)",
    .tp_new = key_query_new,
    .tp_dealloc = key_query_dealloc,
    .tp_traverse = key_query_traverse,
    .tp_clear = key_query_clear,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(KeyQuery, vectorcall),
};


/* ---------------------------------------------------------------- many keys of one file (chain_walk.select_many) */

/* select_many(buf, slots, index_num, begin_ts, ic, hashes, max_num, begin, end, out, splits, states) -> k
 * The native twin of chain_walk._select_few / select_range over one file's bytes buf (its size
 * checked by the caller): for key i (hashes: int32), the phyOffsets of its chain (walk_chain with
 * limit = ic) newest first into out[splits[i]:splits[i+1]] (out int64, splits int64[n+1], states
 * int8[n]: 0, 1 = the chain loops, 2 = it points past the file).  Returns k = splits[n], or -1
 * when out is too small (the caller grows it and calls again). */
static PyObject *select_many(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError,
                        "select_many(buf, slots, index_num, begin_ts, ic, hashes, max_num, begin, end, out, splits, states)");
        return NULL;
    }
    int64_t prm[8];
    static const int pidx[8] = {1, 2, 3, 4, 6, 7, 8, 0};
    for (int j = 0; j < 7; j++)
        if ((prm[j] = mq_i64(args[pidx[j]])) == -1 && PyErr_Occurred()) return NULL;
    int64_t slots = prm[0], index_num = prm[1], begin_ts = prm[2], ic = prm[3], max_num = prm[4], begin = prm[5],
            end = prm[6];
    static const int vidx[5] = {0, 5, 9, 10, 11};
    static const Py_ssize_t isz[5] = {1, 4, 8, 8, 1};
    static const char *what[5] = {"buf", "hashes", "out", "splits", "states"};
    Py_buffer v[5];
    int got = 0;
    PyObject *ret = NULL;
    for (; got < 5; got++)
        if (mq_view(args[vidx[got]], &v[got], isz[got], got >= 2, what[got]) < 0) goto done;
    int64_t n = v[1].len / 4, cap = v[2].len / 8;
    if (v[3].len / 8 != n + 1 || v[4].len != n || slots <= 0 || index_num <= 0) {
        PyErr_SetString(PyExc_ValueError, "select_many: splits needs n + 1 slots, states n, the geometry > 0");
        goto done;
    }
    const uint8_t *p = v[0].buf;
    const int32_t *hashes = v[1].buf;
    int64_t *out = v[2].buf, *splits = v[3].buf;
    int8_t *states = v[4].buf;
    int64_t nb = v[0].len, k = 0;
    int room = 0;
    Py_BEGIN_ALLOW_THREADS
    splits[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        /* keys ahead: the slot of key i + 16 starts loading, the head item of key i + 8 (its slot
         * loaded by now) too, so that the walks' first misses overlap */
        if (i + 16 < n) {
            int64_t s16 = (int64_t)hashes[i + 16] % slots;
            if (s16 < 0) s16 += slots;
            if ((HEADER_WORDS + s16 + 1) * 4 <= nb) __builtin_prefetch(p + (HEADER_WORDS + s16) * 4);
        }
        if (i + 8 < n) {
            int64_t s8 = (int64_t)hashes[i + 8] % slots;
            if (s8 < 0) s8 += slots;
            if ((HEADER_WORDS + s8 + 1) * 4 <= nb) {
                int64_t head = mq_be32(p + (HEADER_WORDS + s8) * 4);
                int64_t at = (HEADER_WORDS + slots + head * ITEM_WORDS) * 4;
                if (head > 0 && at + ITEM_WORDS * 4 <= nb) __builtin_prefetch(p + at);
            }
        }
        int64_t g;
        int st = walk_chain(p, nb, slots, index_num, begin_ts, ic, ic, (int64_t)hashes[i], max_num, begin, end, out,
                            cap, k, &g, NULL, 0);
        if (st == WALK_ROOM) {
            room = 1;
            break;
        }
        states[i] = st == WALK_CYCLE ? 1 : st == WALK_OUT_OF_FILE ? 2 : 0;
        k += g;
        splits[i + 1] = k;
    }
    Py_END_ALLOW_THREADS
    ret = PyLong_FromLongLong(room ? -1 : (long long)k);
done:
    for (int j = 0; j < got; j++) PyBuffer_Release(&v[j]);
    return ret;
}

static PyMethodDef methods[] = {
    MQ_BIND_CHECKSUMS_METHOD,
    {"exact_key_files", (PyCFunction)(void (*)(void))exact_key_files, METH_FASTCALL,
     "exact_key_files(files, segs, topic, key, prm, out) -> matches (see key_match.exact_key_files)"},
    {"bind_messages", (PyCFunction)(void (*)(void))bind_messages, METH_FASTCALL,
     "bind_messages(cls, member descriptors, hosts, host_of): the class messages() builds"},
    {"messages", (PyCFunction)(void (*)(void))messages, METH_FASTCALL,
     "messages(out, n, segs, topic) -> list of the messages of the match rows"},
    {"select_many", (PyCFunction)(void (*)(void))select_many, METH_FASTCALL,
     "select_many(buf, slots, index_num, begin_ts, ic, hashes, max_num, begin, end, out, splits, states) -> k | -1"},
    {"query", (PyCFunction)(void (*)(void))query, METH_FASTCALL,
     "query(index_plan, index_files, segment_plan, segments, topic, key, begin, end, max_num) -> list | int"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_nat_rmq_query", "mqstore's native exact key query", -1,
                                    methods};

PyMODINIT_FUNC PyInit__nat_rmq_query(void)
{
    (void)mq_crc32c; /* (mq_common.h's; only CRC-32 is used here) */
    mq_init_checksums(NULL);
    if (!str_wrote_position && !(str_wrote_position = PyUnicode_InternFromString("wrote_position"))) return NULL;
    if (!str_closed && !(str_closed = PyUnicode_InternFromString("_closed"))) return NULL;
    if (!str_plan && !(str_plan = PyUnicode_InternFromString("_plan"))) return NULL;
    if (!str_files && !(str_files = PyUnicode_InternFromString("files"))) return NULL;
    if (!str_seg_plan && !(str_seg_plan = PyUnicode_InternFromString("_seg_plan"))) return NULL;
    if (!str_dispatch_pending && !(str_dispatch_pending = PyUnicode_InternFromString("dispatch_pending"))) return NULL;
    if (PyType_Ready(&KeyQueryType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddObjectRef(m, "KeyQuery", (PyObject *)&KeyQueryType) < 0 ||
        PyModule_AddIntConstant(m, "QUERY_SLOW", QUERY_SLOW) < 0 ||
        PyModule_AddIntConstant(m, "QUERY_NEED_INDEX_PLAN", QUERY_NEED_INDEX_PLAN) < 0 ||
        PyModule_AddIntConstant(m, "QUERY_NEED_SEGMENT_PLAN", QUERY_NEED_SEGMENT_PLAN) < 0 ||
        PyModule_AddIntConstant(m, "QUERY_FALLBACK", QUERY_FALLBACK) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
