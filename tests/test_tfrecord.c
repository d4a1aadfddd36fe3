/* test_tfrecord.c: CRC32C against published check values, the TFRecord framing against a file
 * written by TensorFlow (data/fixtures/tf-examples.tfrecord), writer/reader round trips, and
 * corruption and truncation detected at the right offsets (and skipped as documented). */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "testutil.h"
#include "io/tfrecord.h"
#include "util.h"

#define FIXTURE "data/fixtures/tf-examples.tfrecord"
#define FIXTURE_EXPECTED "data/fixtures/tf-examples.expected"

static void spit(const char *path, const uint8_t *b, size_t n) {
    FILE *f = xfopen(path, "wb");
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

TEST(crc32c_check_values) {
    CHECK(crc32c("123456789", 9) == 0xE3069283u);
    CHECK(crc32c_sw(0, "123456789", 9) == 0xE3069283u);
    /* RFC 3720 (iSCSI) B.4 vectors */
    uint8_t z[32], ff[32], inc[32], dec[32];
    for (int i = 0; i < 32; i++) {
        z[i] = 0;
        ff[i] = 0xff;
        inc[i] = (uint8_t)i;
        dec[i] = (uint8_t)(31 - i);
    }
    CHECK(crc32c(z, 32) == 0x8A9136AAu);
    CHECK(crc32c(ff, 32) == 0x62A8AB43u);
    CHECK(crc32c(inc, 32) == 0x46DD794Eu);
    CHECK(crc32c(dec, 32) == 0x113FDB5Cu);
    CHECK(crc32c_sw(0, dec, 32) == 0x113FDB5Cu);
    CHECK(crc32c("", 0) == 0);
    /* masking: mask(0) is the delta itself; unmask inverts */
    CHECK(crc32c_mask(0) == 0xa282ead8u);
    CHECK(crc32c_mask(0xE3069283u) == (((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u));
    for (uint32_t v = 1; v < 0xf0000000u; v = v * 7 + 13) CHECK(crc32c_unmask(crc32c_mask(v)) == v);
}

TEST(crc32c_hw_matches_table_any_alignment_and_split) {
    uint8_t buf[1200];
    Rng r;
    rng_seed(&r, 5);
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)rng_u64(&r);
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n < 1100; n += 1 + n / 3) {
            uint32_t a = crc32c(buf + off, n), b = crc32c_sw(0, buf + off, n);
            CHECK_MSG(a == b, "off %zu n %zu: %08x vs %08x", off, n, a, b);
            size_t cut = n / 3;
            CHECK(crc32c_extend(crc32c(buf + off, cut), buf + off + cut, n - cut) == a);
        }
}

/* The fixture's framing as TensorFlow wrote it: offsets, lengths and both CRCs. */
TEST(tfrecord_reads_tensorflow_fixture) {
    FILE *f = fopen(FIXTURE_EXPECTED, "r");
    CHECK_MSG(f != NULL, "cannot open %s", FIXTURE_EXPECTED);
    if (!f) return;
    unsigned long long off[8], len[8];
    int n = 0;
    char line[4096];
    while (fgets(line, sizeof line, f) && n < 8)
        if (strncmp(line, "pixels", 6) != 0 && sscanf(line, "%llu %llu", &off[n], &len[n]) == 2) n++;
    fclose(f);
    CHECK(n == 3);
    char err[512];
    TfrReader *r = tfr_open(FIXTURE, 0, err, sizeof err);
    CHECK_MSG(r != NULL, "%s", err);
    if (!r) return;
    TfrRecord rec;
    for (int i = 0; i < n; i++) {
        CHECK(tfr_next(r, &rec) == TFR_OK);
        CHECK(rec.offset == off[i]);
        CHECK(rec.len == len[i]);
    }
    CHECK(tfr_next(r, &rec) == TFR_EOF);
    CHECK(tfr_next(r, &rec) == TFR_EOF);
    CHECK(tfr_skipped(r) == 0);
    tfr_close(r);
    /* the header CRC TensorFlow wrote equals ours */
    size_t flen;
    uint8_t *b = tu_read_file(FIXTURE, &flen);
    CHECK(b && flen == off[2] + len[2] + 16);
    uint8_t *framed = xmalloc(len[0] + 16);
    tfr_frame(b + 12, len[0], framed);
    CHECK(memcmp(framed, b, len[0] + 16) == 0);
    free(framed);
    free(b);
    TfrIndexEntry *ix;
    CHECK(tfr_scan(FIXTURE, 0, &ix, NULL, err, sizeof err) == 3);
    for (int i = 0; i < 3; i++) CHECK(ix[i].offset == off[i] && ix[i].len == len[i]);
    free(ix);
}

/* Writes `n` records with sizes from sizes[] and deterministic contents. */
static void write_file(const char *path, const size_t *sizes, int n) {
    char err[512];
    TfrWriter *w = tfr_writer_open(path, err, sizeof err);
    CHECK_MSG(w != NULL, "%s", err);
    for (int i = 0; i < n; i++) {
        uint8_t *d = xmalloc(sizes[i] + 1);
        for (size_t k = 0; k < sizes[i]; k++) d[k] = (uint8_t)(k * 31 + (size_t)i * 7);
        CHECK(tfr_write(w, d, sizes[i]) == 0);
        free(d);
    }
    CHECK(tfr_writer_close(w) == 0);
}

TEST(tfrecord_round_trip_sizes_and_offsets) {
    char path[512];
    snprintf(path, sizeof path, "%s/rt.tfrecord", th_tmpdir());
    const size_t sizes[] = {0, 1, 100, 5, 3u << 20, 70000, 2, (1u << 20) - 3, 9};
    int n = (int)(sizeof sizes / sizeof sizes[0]);
    write_file(path, sizes, n);
    char err[512];
    TfrReader *r = tfr_open(path, 0, err, sizeof err);
    CHECK(r != NULL);
    if (!r) return;
    TfrRecord rec;
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        CHECK(tfr_next(r, &rec) == TFR_OK);
        CHECK(rec.len == sizes[i] && rec.offset == off);
        int same = 1;
        for (size_t k = 0; k < rec.len; k++) same &= rec.data[k] == (uint8_t)(k * 31 + (size_t)i * 7);
        CHECK_MSG(same, "record %d content differs", i);
        off += sizes[i] + 16;
    }
    CHECK(tfr_next(r, &rec) == TFR_EOF);
    CHECK(tfr_file_size(r) == off);
    tfr_close(r);
    TfrIndexEntry *ix;
    CHECK(tfr_scan(path, 0, &ix, NULL, err, sizeof err) == n);
    CHECK(ix[4].len == sizes[4] && ix[8].offset == off - 9 - 16);
    free(ix);
    /* an empty file is a valid file without records */
    snprintf(path, sizeof path, "%s/empty.tfrecord", th_tmpdir());
    spit(path, NULL, 0);
    r = tfr_open(path, 0, err, sizeof err);
    CHECK(r && tfr_next(r, &rec) == TFR_EOF);
    tfr_close(r);
    CHECK(tfr_scan(path, 0, NULL, NULL, err, sizeof err) == 0);
}

/* Reads a whole file, returning the count of records read, the status that ended it and the
 * error text. */
static int read_all(const char *path, int skip, int *status, size_t *skipped, char *msg, size_t msglen,
                    uint64_t *offsets) {
    char err[512];
    TfrReader *r = tfr_open(path, skip, err, sizeof err);
    if (!r) return -1;
    TfrRecord rec;
    int n = 0, st;
    while ((st = tfr_next(r, &rec)) == TFR_OK) offsets[n++] = rec.offset;
    *status = st;
    *skipped = tfr_skipped(r);
    snprintf(msg, msglen, "%s", tfr_error(r));
    tfr_close(r);
    return n;
}

TEST(tfrecord_corruption_detected_at_offset_and_skipped) {
    char good[512], bad[512];
    snprintf(good, sizeof good, "%s/good.tfrecord", th_tmpdir());
    snprintf(bad, sizeof bad, "%s/bad.tfrecord", th_tmpdir());
    const size_t sizes[] = {40, 300, 25, 60};
    write_file(good, sizes, 4);
    size_t flen;
    uint8_t *orig = tu_read_file(good, &flen);
    const uint64_t rec1 = 40 + 16, rec2 = rec1 + 300 + 16;
    struct {
        uint64_t at;
        const char *what;
    } cases[] = {
        {rec1 + 0, "length CRC mismatch"},        /* low byte of the length */
        {rec1 + 6, "length CRC mismatch"},        /* a high byte of the length */
        {rec1 + 9, "length CRC mismatch"},        /* the length CRC */
        {rec1 + 12, "data CRC mismatch"},         /* first payload byte */
        {rec1 + 12 + 299, "data CRC mismatch"},   /* last payload byte */
        {rec1 + 12 + 300 + 2, "data CRC mismatch"}, /* the data CRC */
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t *b = xmalloc(flen);
        memcpy(b, orig, flen);
        b[cases[c].at] ^= 0x20;
        spit(bad, b, flen);
        free(b);
        int st;
        size_t skipped;
        char msg[600], want[700];
        uint64_t offs[8];
        int n = read_all(bad, 0, &st, &skipped, msg, sizeof msg, offs);
        snprintf(want, sizeof want, "%s: corrupt record at byte offset %llu (%s)", bad, (unsigned long long)rec1,
                 cases[c].what);
        CHECK_MSG(n == 1 && st == TFR_BAD, "case %zu: n %d st %d", c, n, st);
        CHECK_MSG(strcmp(msg, want) == 0, "case %zu: got '%s' want '%s'", c, msg, want);
        /* skipping: records 0, 2 and 3 survive, one record counted */
        n = read_all(bad, 1, &st, &skipped, msg, sizeof msg, offs);
        CHECK_MSG(n == 3 && st == TFR_EOF && skipped == 1, "case %zu skip: n %d st %d skipped %zu", c, n, st, skipped);
        CHECK(offs[0] == 0 && offs[1] == rec2 && offs[2] == rec2 + 25 + 16);
        /* the scan sees framing errors only (data CRCs are checked when records are read) */
        char err[600];
        long long sn = tfr_scan(bad, 0, NULL, NULL, err, sizeof err);
        if (strstr(cases[c].what, "length"))
            CHECK_MSG(sn == -1 && strcmp(err, want) == 0, "case %zu scan: %lld '%s'", c, sn, err);
        else
            CHECK(sn == 4);
        size_t sk;
        CHECK(tfr_scan(bad, 1, NULL, &sk, err, sizeof err) == (strstr(cases[c].what, "length") ? 3 : 4));
    }
    free(orig);
}

TEST(tfrecord_truncation_detected) {
    char good[512], bad[512];
    snprintf(good, sizeof good, "%s/trgood.tfrecord", th_tmpdir());
    snprintf(bad, sizeof bad, "%s/trbad.tfrecord", th_tmpdir());
    const size_t sizes[] = {40, 300, 25};
    write_file(good, sizes, 3);
    size_t flen;
    uint8_t *orig = tu_read_file(good, &flen);
    const uint64_t rec2 = 40 + 16 + 300 + 16;
    /* cut inside the header, inside the payload, inside the data CRC */
    const uint64_t cuts[] = {rec2 + 1, rec2 + 11, rec2 + 12, rec2 + 20, flen - 1};
    for (size_t c = 0; c < sizeof cuts / sizeof cuts[0]; c++) {
        spit(bad, orig, cuts[c]);
        int st;
        size_t skipped;
        char msg[600], want[600];
        uint64_t offs[8];
        int n = read_all(bad, 0, &st, &skipped, msg, sizeof msg, offs);
        snprintf(want, sizeof want, "%s: corrupt record at byte offset %llu (truncated", bad, (unsigned long long)rec2);
        CHECK_MSG(n == 2 && st == TFR_BAD, "cut %llu: n %d st %d", (unsigned long long)cuts[c], n, st);
        CHECK_MSG(strncmp(msg, want, strlen(want)) == 0, "cut %llu: '%s'", (unsigned long long)cuts[c], msg);
        n = read_all(bad, 1, &st, &skipped, msg, sizeof msg, offs);
        CHECK(n == 2 && st == TFR_EOF && skipped == 1);
        char err[600];
        CHECK(tfr_scan(bad, 0, NULL, NULL, err, sizeof err) == -1 && strncmp(err, want, strlen(want)) == 0);
    }
    free(orig);
}

TEST(tfrecord_rejects_other_files) {
    char path[512];
    snprintf(path, sizeof path, "%s/notrecords.txt", th_tmpdir());
    const char *text = "this is a plain text file, not a TFRecord file at all\n";
    spit(path, (const uint8_t *)text, strlen(text));
    char err[600];
    CHECK(tfr_scan(path, 0, NULL, NULL, err, sizeof err) == -1);
    CHECK_MSG(strstr(err, "corrupt record at byte offset 0 (length CRC mismatch)") != NULL, "%s", err);
    size_t sk = 0;
    CHECK(tfr_scan(path, 1, NULL, &sk, err, sizeof err) == 0 && sk == 1);
    CHECK(tfr_scan("/nonexistent/x.tfrecord", 0, NULL, NULL, err, sizeof err) == -2 && strstr(err, "cannot open"));
}
