/* jpeg.c: JPEG decoding and encoding through libjpeg-turbo's libjpeg API (jpeglib.h), PNG
 * through libpng. Decoding as nvcnn: JDCT_IFAST, no fancy upsampling; grayscale and CMYK/YCCK
 * come out RGB. Region decodes read only the rows and iMCU columns the region needs, at the
 * coarsest DCT scale (1/1, 1/2, 1/4, 1/8) that keeps it at least the requested size.
 * Library errors never exit: they come back as -1 with a message. */
#include <stddef.h>
#include <stdio.h>
/* jpeglib.h needs size_t and FILE first */
#include <jpeglib.h>
/* the message codes (JWRN_...) */
#include <jerror.h>
#include <png.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdlib.h>
#include <string.h>

#include "io/image.h"
#include "util.h"

ImageFormat image_sniff(const uint8_t *d, size_t n) {
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return IMG_JPEG;
    static const uint8_t png_magic[8] = {0x89, 'P', 'N', 'G', 0x0D, 0x0A, 0x1A, 0x0A};
    if (n >= 8 && memcmp(d, png_magic, 8) == 0) return IMG_PNG;
    return IMG_UNKNOWN;
}

/* ---- libjpeg error handling: longjmp back with the message ---- */
typedef struct JErr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} JErr;

static void jerr_exit(j_common_ptr c) {
    JErr *e = (JErr *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jb, 1);
}

/* Warnings that leave the pixels as the file means them (as TensorFlow's decode_jpeg, which
 * decodes these files, gives them): a JFIF revision it does not know, bytes between two markers
 * (the decoder skips them), an Adobe transform code it does not know, an ICC profile split
 * oddly. Every other warning is damage to the coded data (a premature end, a bad Huffman code,
 * a lost restart marker) that libjpeg pads with gray: an error here, not a silent wrong sample. */
static int harmless_warning(int code) {
    return code == JWRN_JFIF_MAJOR || code == JWRN_EXTRANEOUS_DATA || code == JWRN_ADOBE_XFORM || code == JWRN_BOGUS_ICC;
}

static void jerr_emit(j_common_ptr c, int level) {
    if (level < 0 && !harmless_warning(c->err->msg_code)) {
        JErr *e = (JErr *)c->err;
        (*c->err->format_message)(c, e->msg);
        longjmp(e->jb, 1);
    }
}

static void jerr_init(struct jpeg_decompress_struct *ci, JErr *e) {
    ci->err = jpeg_std_error(&e->pub);
    e->pub.error_exit = jerr_exit;
    e->pub.emit_message = jerr_emit;
    e->msg[0] = 0;
}

static int fail(char *err, size_t errlen, const char *fmt, const char *detail) {
    if (err && errlen) snprintf(err, errlen, fmt, detail);
    return -1;
}

/* Converts n pixels of CMYK (Adobe files store it inverted) to RGB, in place from 4 to 3
 * bytes per pixel. */
static void cmyk_to_rgb(uint8_t *p, int n, int inverted) {
    for (int i = 0; i < n; i++) {
        int c = p[4 * i], m = p[4 * i + 1], y = p[4 * i + 2], k = p[4 * i + 3];
        if (!inverted) {
            c = 255 - c;
            m = 255 - m;
            y = 255 - y;
            k = 255 - k;
        }
        /* inverted: values are (1 - ink); R = (1-C)(1-K) */
        p[3 * i] = (uint8_t)((c * k + 127) / 255);
        p[3 * i + 1] = (uint8_t)((m * k + 127) / 255);
        p[3 * i + 2] = (uint8_t)((y * k + 127) / 255);
    }
}

static int png_dims(const uint8_t *d, size_t n, int *w, int *h) {
    if (n < 24 || memcmp(d + 12, "IHDR", 4) != 0) return -1;
    *w = (int)((uint32_t)d[16] << 24 | (uint32_t)d[17] << 16 | (uint32_t)d[18] << 8 | d[19]);
    *h = (int)((uint32_t)d[20] << 24 | (uint32_t)d[21] << 16 | (uint32_t)d[22] << 8 | d[23]);
    return (*w > 0 && *h > 0) ? 0 : -1;
}

/* "PNG: 17000x16000 is 272000000 pixels, more than the 268435456 (2^28) nvcnn decodes", or 0 */
static int too_large(const char *fmt, uint64_t w, uint64_t h, char *err, size_t errlen) {
    if (w * h <= IMAGE_MAX_PIXELS) return 0;
    char what[160];
    snprintf(what, sizeof what, "%" PRIu64 "x%" PRIu64 " is %" PRIu64 " pixels, more than the %llu (2^28) nvcnn decodes",
             w, h, w * h, IMAGE_MAX_PIXELS);
    return fail(err, errlen, fmt, what);
}

int image_dims(const uint8_t *data, size_t len, int *w, int *h, char *err, size_t errlen) {
    ImageFormat f = image_sniff(data, len);
    if (f == IMG_PNG) {
        if (png_dims(data, len, w, h) != 0) return fail(err, errlen, "PNG: %s", "bad IHDR header");
        return too_large("PNG: %s", (uint64_t)*w, (uint64_t)*h, err, errlen);
    }
    if (f != IMG_JPEG) return fail(err, errlen, "%s", "not a JPEG or PNG image");
    struct jpeg_decompress_struct ci;
    JErr je;
    jerr_init(&ci, &je);
    if (setjmp(je.jb)) {
        jpeg_destroy_decompress(&ci);
        return fail(err, errlen, "JPEG: %s", je.msg);
    }
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, data, (unsigned long)len);
    jpeg_read_header(&ci, TRUE);
    *w = (int)ci.image_width;
    *h = (int)ci.image_height;
    jpeg_destroy_decompress(&ci);
    return too_large("JPEG: %s", (uint64_t)*w, (uint64_t)*h, err, errlen);
}

/* libpng errors longjmp back here with the message. */
typedef struct PErr {
    jmp_buf jb;
    char msg[200];
} PErr;

static void png_err(png_structp png, png_const_charp m) {
    PErr *e = png_get_error_ptr(png);
    snprintf(e->msg, sizeof e->msg, "%s", m);
    longjmp(e->jb, 1);
}

static void png_warn(png_structp png, png_const_charp m) {
    (void)png;
    (void)m;
}

typedef struct PngSrc {
    const uint8_t *d;
    size_t n, off;
} PngSrc;

static void png_read_mem(png_structp png, png_bytep out, png_size_t n) {
    PngSrc *s = png_get_io_ptr(png);
    if (s->off + n > s->n) png_error(png, "premature end of data");
    memcpy(out, s->d + s->off, n);
    s->off += n;
}

/* As TensorFlow's decode_png(channels=3): palette and low bit depths expanded, 16-bit scaled to
 * 8, gray replicated to RGB, alpha dropped. The region (x, y, cw, ch) (cw <= 0: the whole image)
 * into a malloc'd RGB buffer: rows are read one at a time down to the region's last and only the
 * region kept, so the memory is the region's plus one row; an interlaced PNG (Adam7: every row is
 * complete only after the last pass) is decoded whole and cropped. */
static int decode_png(const uint8_t *data, size_t len, int x, int y, int cw, int ch, uint8_t **out, int *ow, int *oh,
                      char *err, size_t errlen) {
    PErr pe;
    pe.msg[0] = 0;
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &pe, png_err, png_warn);
    if (!png) return fail(err, errlen, "PNG: %s", "out of memory");
    png_infop info = png_create_info_struct(png);
    uint8_t *volatile buf = NULL, *volatile res = NULL;
    png_bytep *volatile rows = NULL;
    if (!info || setjmp(pe.jb)) {
        png_destroy_read_struct(&png, info ? &info : NULL, NULL);
        free(buf);
        free(res);
        free(rows);
        return fail(err, errlen, "PNG: %s", pe.msg[0] ? pe.msg : "out of memory");
    }
    PngSrc src = {data, len, 0};
    png_set_read_fn(png, &src, png_read_mem);
    png_read_info(png, info);
    png_uint_32 W = png_get_image_width(png, info), H = png_get_image_height(png, info);
    if (W == 0 || H == 0) png_error(png, "image size out of range");
    char why[160];
    if (too_large("%s", W, H, why, sizeof why)) png_error(png, why);
    const int whole = cw <= 0, rx = whole ? 0 : x, ry = whole ? 0 : y, rw = whole ? (int)W : cw, rh = whole ? (int)H : ch;
    if (rx < 0 || ry < 0 || rh <= 0 || (uint64_t)rx + (uint64_t)rw > W || (uint64_t)ry + (uint64_t)rh > H) {
        snprintf(pe.msg, sizeof pe.msg, "region outside the image");
        longjmp(pe.jb, 1);
    }
    int color = png_get_color_type(png, info), depth = png_get_bit_depth(png, info);
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (color == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (png_get_valid(png, info, PNG_INFO_tRNS)) png_set_tRNS_to_alpha(png);
    if (depth == 16) png_set_strip_16(png); /* the high byte, as TensorFlow's decode_png */
    png_set_strip_alpha(png);
    if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    const int interlaced = png_set_interlace_handling(png) > 1;
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)W * 3) png_error(png, "unexpected row layout");
    const size_t rb = (size_t)W * 3, cb = (size_t)rw * 3;
    res = malloc(cb * (size_t)rh);
    if (!res) png_error(png, "out of memory");
    if (interlaced) {
        buf = malloc(rb * H);
        rows = malloc(H * sizeof *rows);
        if (!buf || !rows) png_error(png, "out of memory");
        for (png_uint_32 r = 0; r < H; r++) rows[r] = buf + (size_t)r * rb;
        png_read_image(png, rows);
        for (int r = 0; r < rh; r++) memcpy(res + (size_t)r * cb, buf + (size_t)(ry + r) * rb + (size_t)rx * 3, cb);
    } else {
        buf = malloc(rb);
        if (!buf) png_error(png, "out of memory");
        for (int r = 0; r < ry + rh; r++) {
            png_read_row(png, buf, NULL);
            if (r >= ry) memcpy(res + (size_t)(r - ry) * cb, buf + (size_t)rx * 3, cb);
        }
    }
    png_destroy_read_struct(&png, &info, NULL);
    free(buf);
    free(rows);
    *out = res;
    *ow = rw;
    *oh = rh;
    return 0;
}

int image_decode_region(const uint8_t *data, size_t len, int x, int y, int cw, int ch, int min_w, int min_h,
                        uint8_t **out, int *ow, int *oh, char *err, size_t errlen) {
    *out = NULL;
    ImageFormat f = image_sniff(data, len);
    if (f == IMG_PNG) {
        if (cw <= 0) return fail(err, errlen, "%s", "region outside the image");
        return decode_png(data, len, x, y, cw, ch, out, ow, oh, err, errlen);
    }
    if (f != IMG_JPEG) return fail(err, errlen, "%s", "not a JPEG or PNG image");

    struct jpeg_decompress_struct ci;
    JErr je;
    uint8_t *volatile res = NULL;
    uint8_t *volatile row = NULL;
    jerr_init(&ci, &je);
    if (setjmp(je.jb)) {
        jpeg_destroy_decompress(&ci);
        free(res);
        free(row);
        return fail(err, errlen, "JPEG: %s", je.msg);
    }
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, data, (unsigned long)len);
    jpeg_read_header(&ci, TRUE);
    const int W = (int)ci.image_width, H = (int)ci.image_height;
    if (too_large("JPEG: %s", (uint64_t)W, (uint64_t)H, err, errlen)) {
        jpeg_destroy_decompress(&ci);
        return -1;
    }
    if (x < 0 || y < 0 || cw <= 0 || ch <= 0 || x + cw > W || y + ch > H) {
        jpeg_destroy_decompress(&ci);
        return fail(err, errlen, "%s", "region outside the image");
    }
    int cmyk = ci.jpeg_color_space == JCS_CMYK || ci.jpeg_color_space == JCS_YCCK;
    int inverted = cmyk && ci.saw_Adobe_marker;
    ci.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    ci.dct_method = JDCT_IFAST;
    ci.do_fancy_upsampling = FALSE;
    ci.scale_num = 1;
    ci.scale_denom = 1;
    for (int s = 8; s >= 2; s /= 2)
        if (cw / s >= min_w && ch / s >= min_h) {
            ci.scale_denom = (unsigned)s;
            break;
        }
    jpeg_start_decompress(&ci);
    const int SW = (int)ci.output_width, SH = (int)ci.output_height, comps = ci.output_components;
    /* the region in scaled coordinates */
    int x0 = (int)((long long)x * SW / W), y0 = (int)((long long)y * SH / H);
    int x1 = (int)(((long long)(x + cw) * SW + W - 1) / W), y1 = (int)(((long long)(y + ch) * SH + H - 1) / H);
    if (x1 > SW) x1 = SW;
    if (y1 > SH) y1 = SH;
    if (x1 <= x0) x1 = x0 + 1;
    if (y1 <= y0) y1 = y0 + 1;
    JDIMENSION xoff = (JDIMENSION)x0, width = (JDIMENSION)(x1 - x0);
    if (xoff > 0 || width < (JDIMENSION)SW) jpeg_crop_scanline(&ci, &xoff, &width);
    const int rw = x1 - x0, rh = y1 - y0, skip_left = x0 - (int)xoff;
    res = malloc((size_t)rw * rh * 3);
    row = malloc((size_t)width * (size_t)comps);
    if (!res || !row) longjmp(je.jb, 1);
    if (y0 > 0) jpeg_skip_scanlines(&ci, (JDIMENSION)y0);
    for (int r = 0; r < rh; r++) {
        JSAMPROW rp = row;
        if (jpeg_read_scanlines(&ci, &rp, 1) != 1) {
            snprintf(je.msg, sizeof je.msg, "premature end of data");
            longjmp(je.jb, 1);
        }
        uint8_t *dst = res + (size_t)r * rw * 3;
        if (cmyk) {
            cmyk_to_rgb(row + (size_t)skip_left * 4, rw, inverted);
            memcpy(dst, row + (size_t)skip_left * 4, (size_t)rw * 3);
        } else {
            memcpy(dst, row + (size_t)skip_left * 3, (size_t)rw * 3);
        }
    }
    jpeg_abort_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    free(row);
    *out = res;
    *ow = rw;
    *oh = rh;
    return 0;
}

int image_decode_rgb(const uint8_t *data, size_t len, uint8_t **out, int *w, int *h, char *err, size_t errlen) {
    if (image_sniff(data, len) == IMG_PNG) return decode_png(data, len, 0, 0, 0, 0, out, w, h, err, errlen);
    int W, H;
    if (image_dims(data, len, &W, &H, err, errlen) != 0) return -1;
    return image_decode_region(data, len, 0, 0, W, H, W, H, out, w, h, err, errlen);
}

int image_encode_jpeg(const uint8_t *pixels, int w, int h, int channels, int quality, uint8_t **out, size_t *outlen) {
    struct jpeg_compress_struct cc;
    JErr je;
    unsigned char *volatile buf = NULL;
    unsigned long size = 0;
    cc.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = jerr_exit;
    if (setjmp(je.jb)) {
        jpeg_destroy_compress(&cc);
        free(buf);
        return -1;
    }
    if (channels != 1 && channels != 3) return -1;
    jpeg_create_compress(&cc);
    unsigned char *b = NULL;
    jpeg_mem_dest(&cc, &b, &size);
    cc.image_width = (JDIMENSION)w;
    cc.image_height = (JDIMENSION)h;
    cc.input_components = channels;
    cc.in_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    jpeg_set_defaults(&cc);
    jpeg_set_quality(&cc, quality, TRUE);
    jpeg_start_compress(&cc, TRUE);
    while (cc.next_scanline < cc.image_height) {
        JSAMPROW rp = (JSAMPROW)(pixels + (size_t)cc.next_scanline * w * channels);
        jpeg_write_scanlines(&cc, &rp, 1);
    }
    jpeg_finish_compress(&cc);
    buf = b;
    jpeg_destroy_compress(&cc);
    *out = (uint8_t *)buf;
    *outlen = size;
    return 0;
}

int image_encode_png(const uint8_t *pixels, int w, int h, int channels, uint8_t **out, size_t *outlen) {
    if (channels != 1 && channels != 3) return -1;
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
    png_alloc_size_t size = 0;
    if (!png_image_write_to_memory(&im, NULL, &size, 0, pixels, 0, NULL)) return -1;
    uint8_t *buf = malloc(size);
    if (!buf) return -1;
    if (!png_image_write_to_memory(&im, buf, &size, 0, pixels, 0, NULL)) {
        free(buf);
        return -1;
    }
    *out = buf;
    *outlen = size;
    return 0;
}
