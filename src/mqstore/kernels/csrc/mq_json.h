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

static uint8_t *put_int(uint8_t *o, int64_t v)
{
    uint64_t u;
    if (v < 0) {
        *o++ = '-';
        u = (uint64_t)(-(v + 1)) + 1u;
    } else {
        u = (uint64_t)v;
    }
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + u % 10u);
        u /= 10u;
    } while (u);
    while (n) *o++ = (uint8_t)tmp[--n];
    return o;
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

static uint8_t *put_b64(uint8_t *o, const uint8_t *s, int64_t n)
{
    int64_t i = 0;
    /* 6 bytes -> 8 characters per step: one 8-byte big-endian load, four 12-bit table lookups,
     * one 8-byte store (the load reads 2 bytes past the 6, inside the span) */
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; i + 8 <= n; i += 6) {
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
    for (int v = 0; v < 4096; v++) {
        uint8_t pair[2] = {(uint8_t)B64[v >> 6], (uint8_t)B64[v & 63]};
        memcpy(&B64_PAIRS[v], pair, 2);
    }
    for (int c = 0; c < 256; c++) ESCAPED[c] = c < 0x20 || c == '"' || c == '\\';
}

#endif
