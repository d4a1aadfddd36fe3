/* tfrecord.c: see tfrecord.h. */
#define _GNU_SOURCE
#include "io/tfrecord.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#include "util.h"

/* ---- CRC32C ------------------------------------------------------------------------------ */

#define CRC32C_POLY 0x82f63b78u /* Castagnoli, bit-reflected */

static uint32_t crc_table[8][256];
static int crc_use_hw;
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c & 1) ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[0][i] = c;
    }
    /* table[k][i]: the CRC of byte i followed by k zero bytes. */
    for (uint32_t i = 0; i < 256; i++)
        for (int k = 1; k < 8; k++) crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    crc_use_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static inline uint64_t load_le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static inline uint32_t load_le32(const uint8_t *p) {
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static inline void store_le64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void store_le32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The running value here is the inverted CRC register; crc32c_sw inverts on entry and exit. */
static uint32_t crc_sw_raw(uint32_t c, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint32_t lo = load_le32(p) ^ c, hi = load_le32(p + 4);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^ crc_table[5][(lo >> 16) & 0xff] ^
            crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
            crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw_raw(uint32_t c, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8(c, *p++);
        n--;
    }
    uint64_t c64 = c;
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
        p += 8;
        n -= 8;
    }
    c = (uint32_t)c64;
    while (n--) c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

uint32_t crc32c_sw(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    return ~crc_sw_raw(~crc, data, n);
}

uint32_t crc32c_extend(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
#if defined(__x86_64__)
    if (crc_use_hw) return ~crc_hw_raw(~crc, data, n);
#endif
    return ~crc_sw_raw(~crc, data, n);
}

uint32_t crc32c(const void *data, size_t n) { return crc32c_extend(0, data, n); }

int crc32c_hw_available(void) {
    pthread_once(&crc_once, crc_init);
    return crc_use_hw;
}

uint32_t crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint32_t crc32c_unmask(uint32_t masked) {
    uint32_t rot = masked - 0xa282ead8u;
    return (rot >> 17) | (rot << 15);
}

/* ---- Reader ------------------------------------------------------------------------------ */

#define READ_CHUNK (1u << 20)  /* read-ahead when records are read whole */
#define SCAN_CHUNK (16u << 10) /* read-ahead when only headers are read */

struct TfrReader {
    int fd;
    char *path;
    uint64_t size;
    uint64_t pos;    /* offset of the next record */
    uint8_t *buf;
    size_t cap, len; /* buf holds file bytes [bufpos, bufpos + len) */
    uint64_t bufpos;
    int skip_corrupt;
    size_t skipped;
    int ioerr; /* the last TFR_BAD was a read error, not corruption */
    void (*on_skip)(void *ctx, const char *msg);
    void *on_skip_ctx;
    char err[512];
};

TfrReader *tfr_open(const char *path, int skip_corrupt, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errlen, "%s: not a regular file", path);
        close(fd);
        return NULL;
    }
    TfrReader *r = xcalloc(1, sizeof *r);
    r->fd = fd;
    r->path = xstrdup(path);
    r->size = (uint64_t)st.st_size;
    r->skip_corrupt = skip_corrupt;
    return r;
}

void tfr_close(TfrReader *r) {
    if (!r) return;
    close(r->fd);
    free(r->path);
    free(r->buf);
    free(r);
}

const char *tfr_error(const TfrReader *r) { return r->err; }
size_t tfr_skipped(const TfrReader *r) { return r->skipped; }
uint64_t tfr_file_size(const TfrReader *r) { return r->size; }

/* Makes file bytes [off, off + n) available in r->buf, reading at least `chunk` bytes when it
 * must read. The caller has checked that off + n <= size. 0 on success, -1 on a read error. */
static int ensure(TfrReader *r, uint64_t off, size_t n, size_t chunk) {
    if (off >= r->bufpos && off + n <= r->bufpos + r->len) return 0;
    size_t want = n > chunk ? n : chunk;
    if (want > r->cap) {
        free(r->buf); /* a larger buffer: read everything again from off */
        r->buf = xmalloc(want);
        r->cap = want;
        r->len = 0;
    } else if (off >= r->bufpos && off < r->bufpos + r->len) {
        size_t keep = (size_t)(r->bufpos + r->len - off);
        memmove(r->buf, r->buf + (off - r->bufpos), keep);
        r->len = keep;
    } else {
        r->len = 0;
    }
    r->bufpos = off;
    while (r->len < want && r->bufpos + r->len < r->size) {
        ssize_t k = pread(r->fd, r->buf + r->len, want - r->len, (off_t)(r->bufpos + r->len));
        if (k < 0) {
            if (errno == EINTR) continue;
            snprintf(r->err, sizeof r->err, "%s: read error at byte offset %" PRIu64 ": %s", r->path,
                     r->bufpos + r->len, strerror(errno));
            r->ioerr = 1;
            return -1;
        }
        if (k == 0) break;
        r->len += (size_t)k;
    }
    if (r->len < n) {
        snprintf(r->err, sizeof r->err, "%s: file shrank while reading at byte offset %" PRIu64, r->path, off);
        r->ioerr = 1;
        return -1;
    }
    return 0;
}

__attribute__((format(printf, 3, 4))) static void set_bad(TfrReader *r, uint64_t off, const char *fmt, ...) {
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(r->err, sizeof r->err, "%s: corrupt record at byte offset %" PRIu64 " (%s)", r->path, off, what);
}

/* A corrupt record passed over (skip_corrupt): counted, and its message (r->err) reported. */
static void skipped_one(TfrReader *r) {
    r->skipped++;
    if (r->on_skip) r->on_skip(r->on_skip_ctx, r->err);
}

/* 1 if a plausible header starts at off (its length CRC matches and the record fits). */
static int header_ok_at(TfrReader *r, uint64_t off, int *ioerr) {
    if (r->size - off < TFR_HEADER_BYTES) return 0;
    if (ensure(r, off, TFR_HEADER_BYTES, SCAN_CHUNK) != 0) {
        *ioerr = 1;
        return 0;
    }
    const uint8_t *h = r->buf + (off - r->bufpos);
    if (crc32c_mask(crc32c(h, 8)) != load_le32(h + 8)) return 0;
    uint64_t len = load_le64(h);
    uint64_t avail = r->size - off;
    return avail >= TFR_HEADER_BYTES + TFR_FOOTER_BYTES && len <= avail - TFR_HEADER_BYTES - TFR_FOOTER_BYTES;
}

static int read_record(TfrReader *r, TfrRecord *rec, int want_data) {
    for (;;) {
        uint64_t off = r->pos;
        if (off >= r->size) return TFR_EOF;
        uint64_t avail = r->size - off;
        if (avail < TFR_HEADER_BYTES) {
            set_bad(r, off, "truncated header: %" PRIu64 " of %d bytes before the end of the file", avail,
                    TFR_HEADER_BYTES);
            r->pos = r->size;
            if (r->skip_corrupt) {
                skipped_one(r);
                return TFR_EOF;
            }
            return TFR_BAD;
        }
        if (ensure(r, off, TFR_HEADER_BYTES, want_data ? READ_CHUNK : SCAN_CHUNK) != 0) {
            r->pos = r->size;
            return TFR_BAD;
        }
        const uint8_t *h = r->buf + (off - r->bufpos);
        uint64_t len = load_le64(h);
        if (crc32c_mask(crc32c(h, 8)) != load_le32(h + 8)) {
            set_bad(r, off, "length CRC mismatch");
            if (!r->skip_corrupt) {
                r->pos = r->size;
                return TFR_BAD;
            }
            skipped_one(r);
            uint64_t q = off + 1;
            int ioerr = 0;
            while (q < r->size && !header_ok_at(r, q, &ioerr) && !ioerr) q++;
            if (ioerr) {
                r->pos = r->size;
                return TFR_BAD;
            }
            r->pos = q < r->size ? q : r->size;
            continue;
        }
        if (avail < TFR_HEADER_BYTES + TFR_FOOTER_BYTES || len > avail - TFR_HEADER_BYTES - TFR_FOOTER_BYTES) {
            set_bad(r, off, "truncated: a %" PRIu64 "-byte record needs %" PRIu64 " bytes, %" PRIu64 " left", len,
                    len + TFR_HEADER_BYTES + TFR_FOOTER_BYTES, avail);
            r->pos = r->size;
            if (r->skip_corrupt) {
                skipped_one(r);
                return TFR_EOF;
            }
            return TFR_BAD;
        }
        uint64_t next = off + TFR_HEADER_BYTES + len + TFR_FOOTER_BYTES;
        if (!want_data) {
            rec->data = NULL;
            rec->len = (size_t)len;
            rec->offset = off;
            r->pos = next;
            return TFR_OK;
        }
        if (ensure(r, off, (size_t)len + TFR_HEADER_BYTES + TFR_FOOTER_BYTES, READ_CHUNK) != 0) {
            r->pos = r->size;
            return TFR_BAD;
        }
        const uint8_t *p = r->buf + (off - r->bufpos) + TFR_HEADER_BYTES;
        if (crc32c_mask(crc32c(p, (size_t)len)) != load_le32(p + len)) {
            set_bad(r, off, "data CRC mismatch");
            if (!r->skip_corrupt) {
                r->pos = r->size;
                return TFR_BAD;
            }
            skipped_one(r);
            r->pos = next;
            continue;
        }
        rec->data = p;
        rec->len = (size_t)len;
        rec->offset = off;
        r->pos = next;
        return TFR_OK;
    }
}

int tfr_next(TfrReader *r, TfrRecord *rec) { return read_record(r, rec, 1); }
int tfr_next_header(TfrReader *r, TfrRecord *rec) { return read_record(r, rec, 0); }

int tfr_check_record(const uint8_t *buf, uint64_t len, const char **what) {
    if (crc32c_mask(crc32c(buf, 8)) != load_le32(buf + 8)) {
        *what = "length CRC mismatch";
        return -1;
    }
    if (load_le64(buf) != len) {
        *what = "length changed since the file was indexed";
        return -1;
    }
    if (crc32c_mask(crc32c(buf + TFR_HEADER_BYTES, (size_t)len)) != load_le32(buf + TFR_HEADER_BYTES + len)) {
        *what = "data CRC mismatch";
        return -1;
    }
    return 0;
}

long long tfr_scan(const char *path, int skip_corrupt, TfrIndexEntry **index, size_t *skipped, char *err,
                   size_t errlen) {
    return tfr_scan_reporting(path, skip_corrupt, index, skipped, err, errlen, NULL, NULL);
}

long long tfr_scan_reporting(const char *path, int skip_corrupt, TfrIndexEntry **index, size_t *skipped, char *err,
                             size_t errlen, void (*on_skip)(void *ctx, const char *msg), void *ctx) {
    TfrReader *r = tfr_open(path, skip_corrupt, err, errlen);
    if (!r) return -2;
    r->on_skip = on_skip;
    r->on_skip_ctx = ctx;
    size_t n = 0, cap = 0;
    TfrIndexEntry *ix = NULL;
    TfrRecord rec;
    int st;
    while ((st = tfr_next_header(r, &rec)) == TFR_OK) {
        if (index) {
            if (n == cap) {
                cap = cap ? 2 * cap : 256;
                ix = xrealloc(ix, cap * sizeof *ix);
            }
            ix[n].offset = rec.offset;
            ix[n].len = rec.len;
        }
        n++;
    }
    if (skipped) *skipped = r->skipped;
    if (st == TFR_BAD) {
        snprintf(err, errlen, "%s", r->err);
        const int io = r->ioerr;
        free(ix);
        tfr_close(r);
        return io ? -2 : -1;
    }
    tfr_close(r);
    if (index) *index = ix;
    return (long long)n;
}

/* ---- Writer ------------------------------------------------------------------------------ */

struct TfrWriter {
    FILE *f;
    int failed;
};

TfrWriter *tfr_writer_open(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return NULL;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 20);
    TfrWriter *w = xcalloc(1, sizeof *w);
    w->f = f;
    return w;
}

void tfr_frame(const void *data, size_t len, uint8_t *out) {
    store_le64(out, (uint64_t)len);
    store_le32(out + 8, crc32c_mask(crc32c(out, 8)));
    memcpy(out + TFR_HEADER_BYTES, data, len);
    store_le32(out + TFR_HEADER_BYTES + len, crc32c_mask(crc32c(data, len)));
}

int tfr_write(TfrWriter *w, const void *data, size_t len) {
    uint8_t head[TFR_HEADER_BYTES], foot[TFR_FOOTER_BYTES];
    store_le64(head, (uint64_t)len);
    store_le32(head + 8, crc32c_mask(crc32c(head, 8)));
    store_le32(foot, crc32c_mask(crc32c(data, len)));
    if (fwrite(head, 1, sizeof head, w->f) != sizeof head || (len && fwrite(data, 1, len, w->f) != len) ||
        fwrite(foot, 1, sizeof foot, w->f) != sizeof foot) {
        w->failed = 1;
        return -1;
    }
    return 0;
}

int tfr_writer_close(TfrWriter *w) {
    if (!w) return 0;
    int bad = w->failed;
    if (fflush(w->f) != 0) bad = 1;
    if (fclose(w->f) != 0) bad = 1;
    free(w);
    return bad ? -1 : 0;
}
