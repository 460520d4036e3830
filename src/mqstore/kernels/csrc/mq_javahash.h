/* Java String.hashCode over UTF-8 bytes, and RocketMQ's IndexFile key hash (the native twin of
 * mqstore/kernels/javahash_nb.py: hash_continue, index_hash_of_state).
 *
 * Java hashes UTF-16 code units: h = 31*h + unit, wrapping at 32 bits.  The bytes of a key are
 * UTF-8, decoded on the fly: ASCII is one unit per byte (four at a time when four in a row are
 * ASCII), a valid multi-byte sequence gives its code point (two surrogate units above U+FFFF), and
 * every invalid or truncated sequence gives one U+FFFD consuming its maximal valid prefix, exactly
 * as Python's bytes.decode("utf-8", "replace") does.  States are carried as uint32 (only the low
 * 32 bits matter), so the hash of "topic#key" is the state of "topic#" continued over the key.
 *
 * Header-only, for every native module that hashes keys (the IndexFile kernels, the CommitLog
 * scan).  Include after mq_common.h.
 */
#ifndef MQ_JAVAHASH_H
#define MQ_JAVAHASH_H

#include <stdint.h>

#define MQ_REPL 0xFFFDu

/* One code point at p[i] (i < e): stores it in *cp and returns the next index. */
static inline int64_t mq_utf8_next(const uint8_t *p, int64_t i, int64_t e, uint32_t *cp)
{
    uint32_t b0 = p[i];
    if (b0 < 0x80) {
        *cp = b0;
        return i + 1;
    }
    if (b0 < 0xC2 || b0 > 0xF4) {
        *cp = MQ_REPL;
        return i + 1;
    }
    int need;
    uint32_t c, lo = 0x80, hi = 0xBF;
    if (b0 < 0xE0) {
        need = 1;
        c = b0 & 0x1F;
    } else if (b0 < 0xF0) {
        need = 2;
        c = b0 & 0x0F;
        if (b0 == 0xE0) lo = 0xA0;
        if (b0 == 0xED) hi = 0x9F;
    } else {
        need = 3;
        c = b0 & 0x07;
        if (b0 == 0xF0) lo = 0x90;
        if (b0 == 0xF4) hi = 0x8F;
    }
    int64_t j = i + 1;
    if (j >= e || p[j] < lo || p[j] > hi) {
        *cp = MQ_REPL;
        return j;
    }
    c = (c << 6) | (p[j] & 0x3F);
    j++;
    for (int k = 1; k < need; k++) {
        if (j >= e || p[j] < 0x80 || p[j] > 0xBF) {
            *cp = MQ_REPL;
            return j;
        }
        c = (c << 6) | (p[j] & 0x3F);
        j++;
    }
    *cp = c;
    return j;
}

/* The Java hash state h continued over the UTF-8 bytes p[s:e]. */
static inline uint32_t mq_hash_continue(const uint8_t *p, int64_t s, int64_t e, uint32_t h)
{
    int64_t i = s;
    while (i < e) {
        if (i + 4 <= e) {
            uint32_t b0 = p[i], b1 = p[i + 1], b2 = p[i + 2], b3 = p[i + 3];
            if (((b0 | b1 | b2 | b3) & 0x80) == 0) {
                h = h * 923521u + b0 * 29791u + b1 * 961u + b2 * 31u + b3;
                i += 4;
                continue;
            }
        }
        uint32_t b = p[i];
        if (b < 0x80) {
            h = h * 31u + b;
            i++;
            continue;
        }
        uint32_t cp;
        i = mq_utf8_next(p, i, e, &cp);
        if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            h = h * 31u + (0xD800u + (v >> 10));
            h = h * 31u + (0xDC00u + (v & 0x3FF));
        } else {
            h = h * 31u + cp;
        }
    }
    return h;
}

/* IndexFile.indexKeyHashMethod of a finished state: abs(hashCode), 0 for Integer.MIN_VALUE. */
static inline int32_t mq_index_hash_of_state(uint32_t h)
{
    int32_t v = (int32_t)h;
    if (v == INT32_MIN) return 0;
    return v < 0 ? -v : v;
}

#endif
