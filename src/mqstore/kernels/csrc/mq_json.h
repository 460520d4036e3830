/* JSON text written into byte buffers: the pieces both dumps' JSON-lines kernels use
 * (_nat_rmq_json.c, _nat_kafka_json.c).  Strings are copied as UTF-8 bytes with JSON's escapes
 * (\" \\ \b \t \n \f \r, \u00xx for the other control characters, everything else as is:
 * json.dumps(..., ensure_ascii=False)); integers in decimal; bytes in base64.
 * Call mq_json_init() once (module init) before using them. */
#ifndef MQ_JSON_H
#define MQ_JSON_H

#include "mq_common.h"

/* valid UTF-8 (no overlongs, surrogates or values above U+10FFFF) */
static int utf8_ok(const uint8_t *s, int64_t n)
{
    int64_t i = 0;
    while (i < n) {
        if (i + 8 <= n) {  /* eight ASCII bytes at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) { i += 8; continue; }
        }
        uint8_t c = s[i];
        if (c < 0x80) { i++; continue; }
        int need;
        uint8_t lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) { need = 2; lo = 0xA0; }
        else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) need = 2;
        else if (c == 0xED) { need = 2; hi = 0x9F; }
        else if (c == 0xF0) { need = 3; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else if (c == 0xF4) { need = 3; hi = 0x8F; }
        else return 0;
        if (i + need >= n) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (int k = 2; k <= need; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += need + 1;
    }
    return 1;
}

static const char HEXD[] = "0123456789abcdef";
static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static uint16_t B64_PAIRS[4096];
static uint8_t ESCAPED[256];

static char DIGIT_PAIRS[200];  /* "00".."99" */
static const uint64_t POW10[20] = {
    1ull, 10ull, 100ull, 1000ull, 10000ull, 100000ull, 1000000ull, 10000000ull, 100000000ull, 1000000000ull,
    10000000000ull, 100000000000ull, 1000000000000ull, 10000000000000ull, 100000000000000ull,
    1000000000000000ull, 10000000000000000ull, 100000000000000000ull, 1000000000000000000ull,
    10000000000000000000ull};

/* the decimal digits of v (two at a time from a table of pairs) */
static inline uint8_t *put_int(uint8_t *o, int64_t v)
{
    uint64_t u;
    if (v < 0) {
        *o++ = '-';
        u = (uint64_t)(-(v + 1)) + 1u;
    } else {
        u = (uint64_t)v;
    }
    if (u < 10) {
        *o = (uint8_t)('0' + u);
        return o + 1;
    }
    /* the digit count from the bit length (floor(log10(2^bits)) = bits * 1233 >> 12, then one
     * compare), not a loop over the powers of ten */
    int t = ((64 - __builtin_clzll(u)) * 1233) >> 12;
    int n = t + (u >= POW10[t]);
    uint8_t *e = o + n, *q = e;
    while (u >= 100000000u) {  /* eight digits at a time: 32-bit arithmetic, four pairs in parallel */
        uint32_t r = (uint32_t)(u % 100000000u), hi = r / 10000u, lo = r % 10000u;
        u /= 100000000u;
        q -= 8;
        memcpy(q, DIGIT_PAIRS + 2 * (hi / 100u), 2);
        memcpy(q + 2, DIGIT_PAIRS + 2 * (hi % 100u), 2);
        memcpy(q + 4, DIGIT_PAIRS + 2 * (lo / 100u), 2);
        memcpy(q + 6, DIGIT_PAIRS + 2 * (lo % 100u), 2);
    }
    uint32_t w = (uint32_t)u;
    while (w >= 100u) {
        unsigned d = w % 100u;
        w /= 100u;
        q -= 2;
        memcpy(q, DIGIT_PAIRS + 2 * d, 2);
    }
    if (w >= 10u) {
        q -= 2;
        memcpy(q, DIGIT_PAIRS + 2 * w, 2);
    } else {
        *--q = (uint8_t)('0' + w);
    }
    return e;
}

static uint8_t *put_str(uint8_t *o, const uint8_t *s, int64_t n)
{
    *o++ = '"';
    int64_t k = 0;
    while (k + 8 <= n) {  /* eight bytes at a time while none is '"', '\\' or below 0x20 */
        uint64_t w;
        memcpy(&w, s + k, 8);
        const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
        uint64_t quote = w ^ (ones * '"'), slash = w ^ (ones * '\\');
        uint64_t hit = ((quote - ones) & ~quote) | ((slash - ones) & ~slash) | ((w - ones * 0x20) & ~w);
        if (hit & highs) break;
        k += 8;
    }
    while (k < n && !ESCAPED[s[k]]) k++;
    memcpy(o, s, (size_t)k);
    o += k;
    for (; k < n; k++) {
        uint8_t c = s[k];
        if (!ESCAPED[c]) { *o++ = c; continue; }
        *o++ = '\\';
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case 8: *o++ = 'b'; break;
        case 9: *o++ = 't'; break;
        case 10: *o++ = 'n'; break;
        case 12: *o++ = 'f'; break;
        case 13: *o++ = 'r'; break;
        default:
            *o++ = 'u'; *o++ = '0'; *o++ = '0';
            *o++ = (uint8_t)HEXD[c >> 4];
            *o++ = (uint8_t)HEXD[c & 15];
        }
    }
    *o++ = '"';
    return o;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define MQ_B64_AVX2 1
static int HAVE_AVX2;  /* set by mq_json_init from the CPU's features */

/* 24 bytes -> 32 base64 characters per step with AVX2 while 28 bytes are readable: each 128-bit
 * lane gets 12 input bytes (two unaligned loads), a byte shuffle puts every 3-byte group into a
 * 32-bit word as b1 b0 b2 b1, two multiplies move the four 6-bit values into four bytes, and a
 * 16-entry shuffle table adds the offset of each value's range ('A', 'a', '0', '+', '/').
 * Returns the input bytes consumed (a multiple of 24); the caller encodes the rest. */
__attribute__((target("avx2"))) static int64_t b64_avx2(uint8_t **op, const uint8_t *s, int64_t n)
{
    uint8_t *o = *op;
    int64_t i = 0;
    const __m256i shuf = _mm256_setr_epi8(1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10,
                                          1, 0, 2, 1, 4, 3, 5, 4, 7, 6, 8, 7, 10, 9, 11, 10);
    const __m256i shift_lut = _mm256_setr_epi8(
        'a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
        '+' - 62, '/' - 63, 'A', 0, 0,
        'a' - 26, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52, '0' - 52,
        '+' - 62, '/' - 63, 'A', 0, 0);
    for (; i + 28 <= n; i += 24) {
        __m128i lo = _mm_loadu_si128((const __m128i *)(const void *)(s + i));
        __m128i hi = _mm_loadu_si128((const __m128i *)(const void *)(s + i + 12));
        __m256i in = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
        in = _mm256_shuffle_epi8(in, shuf);
        __m256i t0 = _mm256_and_si256(in, _mm256_set1_epi32(0x0fc0fc00));
        __m256i t1 = _mm256_mulhi_epu16(t0, _mm256_set1_epi32(0x04000040));
        __m256i t2 = _mm256_and_si256(in, _mm256_set1_epi32(0x003f03f0));
        __m256i t3 = _mm256_mullo_epi16(t2, _mm256_set1_epi32(0x01000010));
        __m256i idx = _mm256_or_si256(t1, t3);
        __m256i r = _mm256_subs_epu8(idx, _mm256_set1_epi8(51));
        __m256i less = _mm256_cmpgt_epi8(_mm256_set1_epi8(26), idx);
        r = _mm256_or_si256(r, _mm256_and_si256(less, _mm256_set1_epi8(13)));
        r = _mm256_add_epi8(_mm256_shuffle_epi8(shift_lut, r), idx);
        _mm256_storeu_si256((__m256i *)(void *)o, r);
        o += 32;
    }
    *op = o;
    return i;
}
#endif

static uint8_t *put_b64(uint8_t *o, const uint8_t *s, int64_t n)
{
    int64_t i = 0;
#ifdef MQ_B64_AVX2
    if (HAVE_AVX2 && n >= 28) i = b64_avx2(&o, s, n);
#endif
    /* 6 bytes -> 8 characters per step: one 8-byte big-endian load, four 12-bit table lookups,
     * one 8-byte store (the load reads 2 bytes past the 6, inside the span) */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 8 <= n; i += 6) {  /* (i: after the AVX2 steps, when any) */
        uint64_t v;
        memcpy(&v, s + i, 8);
        v = __builtin_bswap64(v);
        uint64_t w = (uint64_t)B64_PAIRS[(v >> 52) & 4095] | (uint64_t)B64_PAIRS[(v >> 40) & 4095] << 16 |
                     (uint64_t)B64_PAIRS[(v >> 28) & 4095] << 32 | (uint64_t)B64_PAIRS[(v >> 16) & 4095] << 48;
        memcpy(o, &w, 8);
        o += 8;
    }
#endif
    for (; i + 3 <= n; i += 3) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8) | s[i + 2];
        uint16_t a = B64_PAIRS[v >> 12], b = B64_PAIRS[v & 4095];
        memcpy(o, &a, 2);
        memcpy(o + 2, &b, 2);
        o += 4;
    }
    int64_t rest = n - i;
    if (rest == 1) {
        uint32_t v = (uint32_t)s[i] << 16;
        o[0] = (uint8_t)B64[(v >> 18) & 63]; o[1] = (uint8_t)B64[(v >> 12) & 63]; o[2] = '='; o[3] = '=';
        o += 4;
    } else if (rest == 2) {
        uint32_t v = ((uint32_t)s[i] << 16) | ((uint32_t)s[i + 1] << 8);
        o[0] = (uint8_t)B64[(v >> 18) & 63]; o[1] = (uint8_t)B64[(v >> 12) & 63]; o[2] = (uint8_t)B64[(v >> 6) & 63];
        o[3] = '=';
        o += 4;
    }
    return o;
}

#define PUT_LIT(o, s) (memcpy((o), (s), sizeof(s) - 1), (o) + sizeof(s) - 1)

static void mq_json_init(void)
{
#ifdef MQ_B64_AVX2
    __builtin_cpu_init();
    HAVE_AVX2 = __builtin_cpu_supports("avx2") && !getenv("MQSTORE_NO_AVX2");
#endif
    for (int v = 0; v < 4096; v++) {
        uint8_t pair[2] = {(uint8_t)B64[v >> 6], (uint8_t)B64[v & 63]};
        memcpy(&B64_PAIRS[v], pair, 2);
    }
    for (int d = 0; d < 100; d++) {
        DIGIT_PAIRS[2 * d] = (char)('0' + d / 10);
        DIGIT_PAIRS[2 * d + 1] = (char)('0' + d % 10);
    }
    for (int c = 0; c < 256; c++) ESCAPED[c] = c < 0x20 || c == '"' || c == '\\';
}

#endif
