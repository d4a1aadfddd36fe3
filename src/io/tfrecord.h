/* tfrecord.h: the TFRecord container, CRC32C, a streaming reader, a writer and a scanner.
 *
 * A TFRecord file is a sequence of records, each
 *     uint64  length          little endian
 *     uint32  masked CRC32C of the 8 length bytes
 *     byte    data[length]
 *     uint32  masked CRC32C of data
 * with mask(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (all uint32 arithmetic).
 *
 * Corruption. Every record is checked against both CRCs. A bad record is reported as
 *     <file>: corrupt record at byte offset N (<what>)
 * where N is the offset of the record's first byte. With skip_corrupt the reader skips it and
 * counts it instead:
 *   - a bad data CRC: the length is trusted, the reader goes on at the next record;
 *   - a bad length CRC: the length cannot be trusted, so the reader resynchronises: it scans
 *     forward one byte at a time for the next offset whose 8 bytes match the CRC that follows
 *     them and whose length fits in the rest of the file, and goes on there. Everything between
 *     counts as one skipped record (a false match has probability 2^-32 per position, and is then
 *     caught by the data CRC);
 *   - a truncated tail (a header shorter than 12 bytes, or a length running past the end of the
 *     file) ends the file and counts as one skipped record.
 */
#ifndef NVCNN_IO_TFRECORD_H
#define NVCNN_IO_TFRECORD_H

#include <stddef.h>
#include <stdint.h>

#define TFR_HEADER_BYTES 12 /* length + its CRC */
#define TFR_FOOTER_BYTES 4  /* data CRC */

/* CRC32C (Castagnoli, reflected polynomial 0x82f63b78), as used by TFRecord. crc32c_extend
 * continues a CRC over more bytes: crc32c(ab) == crc32c_extend(crc32c(a), b). Uses SSE4.2 when
 * the CPU has it, a slice-by-8 table otherwise (both give identical results). */
uint32_t crc32c(const void *data, size_t n);
uint32_t crc32c_extend(uint32_t crc, const void *data, size_t n);
/* The table-driven implementation alone (for tests and machines without SSE4.2). */
uint32_t crc32c_sw(uint32_t crc, const void *data, size_t n);
/* 1 if the SSE4.2 instruction is in use. */
int crc32c_hw_available(void);
uint32_t crc32c_mask(uint32_t crc);
uint32_t crc32c_unmask(uint32_t masked);

/* Result of reading one record. */
enum { TFR_EOF = 0, TFR_OK = 1, TFR_BAD = -1 };

typedef struct TfrRecord {
    const uint8_t *data; /* the payload, owned by the reader, valid until the next call */
    size_t len;
    uint64_t offset;     /* byte offset of the record's header in the file */
} TfrRecord;

typedef struct TfrReader TfrReader;

/* Opens a file for reading. NULL with a message in err if it cannot be opened. */
TfrReader *tfr_open(const char *path, int skip_corrupt, char *err, size_t errlen);
/* The next record: TFR_OK, TFR_EOF at the end, or TFR_BAD (only without skip_corrupt) with the
 * one-line message "<file>: corrupt record at byte offset N (<what>)" in tfr_error(). After
 * TFR_BAD the reader is at the end of the file. */
int tfr_next(TfrReader *r, TfrRecord *rec);
/* Like tfr_next but without reading or checking the payload (only the header and the bounds):
 * rec->data is NULL. For counting and indexing. */
int tfr_next_header(TfrReader *r, TfrRecord *rec);
const char *tfr_error(const TfrReader *r);
/* Corrupt records skipped so far (with skip_corrupt). */
size_t tfr_skipped(const TfrReader *r);
uint64_t tfr_file_size(const TfrReader *r);
void tfr_close(TfrReader *r);

/* Checks one record already in memory: buf holds the header, payload and footer of a record
 * whose payload length is len (buf has len + 16 bytes). 0 if both CRCs and the length match,
 * -1 with what failed ("length CRC mismatch", ...) in *what. */
int tfr_check_record(const uint8_t *buf, uint64_t len, const char **what);

/* One entry of a file's index. */
typedef struct TfrIndexEntry {
    uint64_t offset; /* of the header */
    uint64_t len;    /* payload bytes */
} TfrIndexEntry;

/* Scans a file's framing (headers only; the data CRCs are checked when records are read) and
 * returns the number of records; *index (malloc'd, may be NULL if index is NULL) lists them.
 * Returns -1 with the corrupt-record message in err on a bad or truncated record (without
 * skip_corrupt), -2 with the message if the file cannot be opened or read (an I/O error, not
 * corruption). *skipped (may be NULL) gets the records skipped. */
long long tfr_scan(const char *path, int skip_corrupt, TfrIndexEntry **index, size_t *skipped, char *err,
                   size_t errlen);
/* tfr_scan, calling on_skip (when not NULL) with the message of each corrupt record it skips
 * ("<path>: corrupt record at byte offset N (<what>)"); on_skip may run on any thread that scans. */
long long tfr_scan_reporting(const char *path, int skip_corrupt, TfrIndexEntry **index, size_t *skipped, char *err,
                             size_t errlen, void (*on_skip)(void *ctx, const char *msg), void *ctx);

/* Writer: creates or truncates path. NULL with a message in err on failure. */
typedef struct TfrWriter TfrWriter;
TfrWriter *tfr_writer_open(const char *path, char *err, size_t errlen);
/* 0 on success, -1 on an I/O error (errno set). */
int tfr_write(TfrWriter *w, const void *data, size_t len);
/* Flushes and closes: 0 on success, -1 if any write failed. */
int tfr_writer_close(TfrWriter *w);
/* Frames one record into out (len + 16 bytes). */
void tfr_frame(const void *data, size_t len, uint8_t *out);

#endif
