/* ckpt.c: see ckpt.h. */
#define _GNU_SOURCE
#include "ckpt.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/tfrecord.h"

static const char MAGIC[8] = {'N', 'V', 'C', 'N', 'N', 'C', 'K', 'P'};

/* ---- a growable byte buffer for the header ---- */
typedef struct Buf {
    uint8_t *p;
    size_t n, cap;
} Buf;

static void put(Buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 256;
        b->p = xrealloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void put_u32(Buf *b, uint32_t v) { put(b, &v, 4); }
static void put_u64(Buf *b, uint64_t v) { put(b, &v, 8); }
static void put_str(Buf *b, const char *s) {
    uint32_t n = (uint32_t)strlen(s);
    put_u32(b, n);
    put(b, s, n);
}

typedef struct Rd {
    const uint8_t *p;
    size_t n, off;
    int bad;
} Rd;

static void get(Rd *r, void *d, size_t n) {
    if (r->bad || r->off + n > r->n) {
        r->bad = 1;
        memset(d, 0, n);
        return;
    }
    memcpy(d, r->p + r->off, n);
    r->off += n;
}
static uint32_t get_u32(Rd *r) {
    uint32_t v;
    get(r, &v, 4);
    return v;
}
static uint64_t get_u64(Rd *r) {
    uint64_t v;
    get(r, &v, 8);
    return v;
}
static void get_str(Rd *r, char *s, size_t cap) {
    uint32_t n = get_u32(r);
    if (r->bad || n >= cap || r->off + n > r->n) {
        r->bad = 1;
        s[0] = 0;
        return;
    }
    memcpy(s, r->p + r->off, n);
    s[n] = 0;
    r->off += n;
}

static void header(Buf *b, const Net *net, const CkptMeta *m) {
    put(b, m->model, sizeof m->model);
    put(b, &m->num_classes, 4);
    put(b, &m->in_c, 4);
    put(b, &m->in_h, 4);
    put(b, &m->in_w, 4);
    put(b, &m->precision, 4);
    put(b, &m->step, 8);
    put(b, &m->epoch, 8);
    put_u64(b, m->seed);
    put(b, &m->world_size, 4);
    put(b, &m->loss_scale, 8);
    put(b, &m->good_steps, 8);
    put(b, &m->skipped_steps, 8);
    put_u64(b, m->data_position);
    put(b, m->rng, sizeof m->rng);
    put_u32(b, (uint32_t)net->nparam);
    for (int i = 0; i < net->nparam; i++) {
        put_str(b, net->param[i].name);
        put_u64(b, net->param[i].count);
    }
    put_u32(b, (uint32_t)net->nbuf);
    for (int i = 0; i < net->nbuf; i++) {
        put_str(b, net->buf[i].name);
        put_u64(b, net->buf[i].count);
    }
    put(b, &m->loss_avg_sum, 8);
    put(b, &m->loss_avg_weight, 8);
    put(b, &m->target_top1, 8);
    put(b, &m->eval_pending, 8);
    put(b, &m->train_images, 8);
    put(b, m->opt, sizeof m->opt);
}

static int write_all(int fd, const void *d, size_t n, uint32_t *crc) {
    const uint8_t *p = d;
    *crc = crc32c_extend(*crc, d, n);
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* "ckpt-<step>.nvcnn" -> step, for the names ckpt_save writes only: the step in decimal without
 * leading zeros, at most 18 digits (a name it never writes, such as ckpt-007.nvcnn or one whose
 * number overflows, is not a checkpoint of this run's: neither resumed from nor pruned). */
static int step_of(const char *name, long long *step) {
    size_t len = strlen(name);
    if (len < 12 || len > 5 + 18 + 6 || strncmp(name, "ckpt-", 5) != 0 || strcmp(name + len - 6, ".nvcnn") != 0) return 0;
    if (name[5] == '0' && len != 12) return 0;
    long long s = 0;
    for (size_t i = 5; i < len - 6; i++) {
        if (name[i] < '0' || name[i] > '9') return 0;
        s = s * 10 + (name[i] - '0');
    }
    *step = s;
    return 1;
}

int ckpt_step_of_name(const char *path, long long *step) {
    const char *slash = strrchr(path, '/');
    return step_of(slash ? slash + 1 : path, step);
}

/* Steps of the checkpoints in dir, newest first. */
static int list_steps(const char *dir, long long **steps) {
    DIR *d = opendir(dir);
    *steps = NULL;
    if (!d) return 0;
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        long long s;
        if (!step_of(e->d_name, &s)) continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            *steps = xrealloc(*steps, (size_t)cap * sizeof **steps);
        }
        (*steps)[n++] = s;
    }
    closedir(d);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) {
            long long t = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = t;
        }
    return n;
}

int ckpt_save(const char *dir, const Net *net, const float *velocity, const CkptMeta *meta, char *path_out,
              size_t path_len, char *err, size_t errlen) {
    char path[4096], tmp[4200];
    snprintf(path, sizeof path, "%s/ckpt-%" PRId64 ".nvcnn", dir, meta->step);
    snprintf(tmp, sizeof tmp, "%s/.ckpt-%" PRId64 ".nvcnn.tmp.%d", dir, meta->step, (int)getpid());
    Buf h = {0};
    header(&h, net, meta);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot write a checkpoint in %s: %s", dir, strerror(errno));
        free(h.p);
        return -1;
    }
    uint32_t crc = 0, version = CKPT_VERSION, hb = (uint32_t)h.n;
    int bad = write_all(fd, MAGIC, 8, &crc) || write_all(fd, &version, 4, &crc) || write_all(fd, &hb, 4, &crc) ||
              write_all(fd, h.p, h.n, &crc) ||
              write_all(fd, net->params, net->params_total * sizeof(float), &crc) ||
              write_all(fd, net->state, net->state_total * sizeof(float), &crc);
    if (!bad) {
        if (velocity)
            bad = write_all(fd, velocity, net->params_total * sizeof(float), &crc);
        else {
            float *z = xcalloc(net->params_total ? net->params_total : 1, sizeof(float));
            bad = write_all(fd, z, net->params_total * sizeof(float), &crc);
            free(z);
        }
    }
    uint32_t c = crc;
    if (!bad) bad = write_all(fd, &c, 4, &crc);
    if (!bad) bad = fsync(fd) != 0;
    int e = errno;
    if (close(fd) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    free(h.p);
    if (bad || rename(tmp, path) != 0) {
        if (!bad) e = errno;
        unlink(tmp);
        snprintf(err, errlen, "cannot write checkpoint %s: %s", path, strerror(e));
        return -1;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    long long *steps;
    int n = list_steps(dir, &steps);
    for (int i = CKPT_KEEP; i < n; i++) {
        char old[4096];
        snprintf(old, sizeof old, "%s/ckpt-%lld.nvcnn", dir, steps[i]);
        unlink(old);
    }
    free(steps);
    if (path_out) snprintf(path_out, path_len, "%s", path);
    return 0;
}

int ckpt_latest(const char *dir, char *path, size_t path_len) {
    long long *steps;
    int n = list_steps(dir, &steps);
    if (n > 0) snprintf(path, path_len, "%s/ckpt-%lld.nvcnn", dir, steps[0]);
    free(steps);
    return n > 0;
}

/* The fixed fields at the start of the header. Returns 0, or -1 when they are cut short. */
/* The fields after the state tensors' list, r there: where the header ends before them (written
 * before they were added), they stay 0. */
static void get_tail(Rd *r, CkptMeta *m) {
    if (r->bad || r->n - r->off < 24) return;
    get(r, &m->loss_avg_sum, 8);
    get(r, &m->loss_avg_weight, 8);
    get(r, &m->target_top1, 8);
    if (!r->bad && r->n - r->off >= 8) get(r, &m->eval_pending, 8); /* added after the three above */
    if (!r->bad && r->n - r->off >= 8) get(r, &m->train_images, 8);  /* and then this */
    if (!r->bad && r->n - r->off >= sizeof m->opt) get(r, m->opt, sizeof m->opt); /* and then these */
}

/* Passes over the parameter and state tensors' lists, then reads the fields after them. */
static void skip_lists_get_tail(Rd *r, CkptMeta *m) {
    for (int list = 0; list < 2 && !r->bad; list++) {
        const uint32_t k = get_u32(r);
        for (uint32_t i = 0; i < k && !r->bad; i++) {
            char name[64];
            get_str(r, name, sizeof name);
            (void)get_u64(r);
        }
    }
    get_tail(r, m);
}

static int get_meta(Rd *r, CkptMeta *m) {
    memset(m, 0, sizeof *m);
    get(r, m->model, sizeof m->model);
    m->model[sizeof m->model - 1] = 0;
    get(r, &m->num_classes, 4);
    get(r, &m->in_c, 4);
    get(r, &m->in_h, 4);
    get(r, &m->in_w, 4);
    get(r, &m->precision, 4);
    get(r, &m->step, 8);
    get(r, &m->epoch, 8);
    m->seed = get_u64(r);
    get(r, &m->world_size, 4);
    get(r, &m->loss_scale, 8);
    get(r, &m->good_steps, 8);
    get(r, &m->skipped_steps, 8);
    m->data_position = get_u64(r);
    get(r, m->rng, sizeof m->rng);
    return r->bad ? -1 : 0;
}

int ckpt_exit_code(int rc) {
    return rc == CKPT_EIO ? EXIT_FAILURE_GENERIC : rc == CKPT_ECORRUPT ? EXIT_DATA : EXIT_USAGE;
}

/* Opens a checkpoint for reading, or says why not in err with a CKPT_E* code in *rc: what is not a
 * regular file (a folder, a FIFO, whose open would wait for a writer for good, a device) and a
 * dangling symbolic link are named as such. */
static FILE *open_checkpoint(const char *path, char *err, size_t errlen, int *rc) {
    const int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    struct stat st;
    memset(&st, 0, sizeof st);
    if (fd < 0) {
        const int e = errno;
        char link[4200];
        if (util_dangling_link(path, e, link, sizeof link))
            snprintf(err, errlen, "%s %s", path, link);
        else
            snprintf(err, errlen, "%s: %s", path, strerror(e));
        *rc = CKPT_EIO;
        return NULL;
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        const char *kind = S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : S_ISSOCK(st.st_mode) ? "a socket" : "a device";
        close(fd);
        snprintf(err, errlen, "%s is %s, not a checkpoint: move it away", path, kind);
        *rc = CKPT_EMISMATCH;
        return NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(fd);
        *rc = CKPT_EIO;
    }
    return f;
}

int ckpt_read_meta(const char *path, CkptMeta *meta, char *err, size_t errlen) {
    int orc = 0;
    FILE *f = open_checkpoint(path, err, errlen, &orc);
    if (!f) return orc;
    uint8_t pre[16], *head = NULL;
    size_t got = fread(pre, 1, sizeof pre, f);
    int rc = CKPT_ECORRUPT;
    uint32_t version, hb;
    if (got < sizeof pre || memcmp(pre, MAGIC, 8) != 0) {
        snprintf(err, errlen, "%s: not an nvcnn checkpoint (bad magic)", path);
        rc = CKPT_ECORRUPT;
        goto out;
    }
    memcpy(&version, pre + 8, 4);
    memcpy(&hb, pre + 12, 4);
    if (version != CKPT_VERSION) {
        snprintf(err, errlen, "%s: checkpoint format version %u; this nvcnn reads version %u", path, version, CKPT_VERSION);
        rc = CKPT_EMISMATCH;
        goto out;
    }
    /* the whole header (its tensor lists, then the fields after them), as far as the file has it */
    head = malloc(hb ? hb : 1);
    if (!head) {
        snprintf(err, errlen, "%s: a header of %u bytes (corrupt?)", path, hb);
        goto out;
    }
    got = fread(head, 1, hb, f);
    Rd r = {head, got, 0, 0};
    if (get_meta(&r, meta) != 0) {
        snprintf(err, errlen, "%s: truncated header", path);
        rc = CKPT_ECORRUPT;
        goto out;
    }
    skip_lists_get_tail(&r, meta);
    rc = 0;
out:
    free(head);
    fclose(f);
    return rc;
}

/* The whole file in *buf (n bytes), its magic, version and checksum verified: 0, or a CKPT_E* code
 * with the reason (*buf NULL). */
static int read_verified(const char *path, uint8_t **buf, size_t *len, char *err, size_t errlen) {
    *buf = NULL;
    int orc = 0;
    FILE *f = open_checkpoint(path, err, errlen, &orc);
    if (!f) return orc;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 20) {
        fclose(f);
        snprintf(err, errlen, "%s: not a checkpoint (too short)", path);
        return CKPT_ECORRUPT;
    }
    size_t n = (size_t)st.st_size;
    uint8_t *b = malloc(n);
    if (!b || fread(b, 1, n, f) != n) {
        free(b);
        fclose(f);
        snprintf(err, errlen, "%s: read error", path);
        return CKPT_EIO;
    }
    fclose(f);
    int rc = 0;
    uint32_t version, stored;
    memcpy(&version, b + 8, 4);
    memcpy(&stored, b + n - 4, 4);
    if (memcmp(b, MAGIC, 8) != 0) {
        snprintf(err, errlen, "%s: not an nvcnn checkpoint (bad magic)", path);
        rc = CKPT_ECORRUPT;
    } else if (version != CKPT_VERSION) {
        snprintf(err, errlen, "%s: checkpoint format version %u; this nvcnn reads version %u", path, version, CKPT_VERSION);
        rc = CKPT_EMISMATCH;
    } else if (crc32c(b, n - 4) != stored) {
        snprintf(err, errlen, "%s: checksum mismatch (truncated or corrupt checkpoint)", path);
        rc = CKPT_ECORRUPT;
    }
    if (rc) {
        free(b);
        return rc;
    }
    *buf = b;
    *len = n;
    return 0;
}

int ckpt_verify(const char *path, char *err, size_t errlen) {
    uint8_t *b;
    size_t n;
    const int rc = read_verified(path, &b, &n, err, errlen);
    free(b);
    return rc;
}

int ckpt_load(const char *path, const char *model, Net *net, float *velocity, CkptMeta *meta, char *err,
              size_t errlen) {
    uint8_t *b;
    size_t n;
    int rc = read_verified(path, &b, &n, err, errlen);
    if (rc) return rc;
    rc = CKPT_ECORRUPT;
    uint32_t hb;
    memcpy(&hb, b + 12, 4);
    Rd r = {b + 16, n - 20 < hb ? n - 20 : hb, 0, 0};
    CkptMeta m;
    if (get_meta(&r, &m) != 0) {
        snprintf(err, errlen, "%s: truncated header", path);
        rc = CKPT_ECORRUPT;
        goto out;
    }
    if (model && strcmp(m.model, model) != 0) {
        snprintf(err, errlen, "%s is a checkpoint of model %s, not %s", path, m.model, model);
        rc = CKPT_EMISMATCH;
        goto out;
    }
    /* The input's height and width may differ (a fully convolutional model trained at one
     * --image_size, evaluated or trained on at another): every tensor's size is checked below,
     * which a model whose weights depend on the input size fails. */
    Shape in = net->node[net->input].shape;
    if (m.in_c != in.c) {
        snprintf(err, errlen, "%s: input %dx%dx%d, this net's is %dx%dx%d", path, m.in_c, m.in_h, m.in_w, in.c, in.h, in.w);
        rc = CKPT_EMISMATCH;
        goto out;
    }
    uint32_t np = get_u32(&r);
    if (np != (uint32_t)net->nparam) {
        snprintf(err, errlen, "%s: %u parameter tensors, this net has %d (another model or shape)", path, np, net->nparam);
        rc = CKPT_EMISMATCH;
        goto out;
    }
    for (uint32_t i = 0; i < np; i++) {
        char name[64];
        get_str(&r, name, sizeof name);
        uint64_t cnt = get_u64(&r);
        if (r.bad) break;
        const int32_t classes = (int32_t)net->node[net->logits].shape.c;
        if ((strcmp(name, net->param[i].name) != 0 || cnt != net->param[i].count) && m.num_classes > 0 && m.num_classes != classes) {
            /* the difference a user makes (a --num_classes left out), said in its terms */
            snprintf(err, errlen, "%s is a checkpoint of %d classes, this run has %d (--num_classes=%d for it)", path, m.num_classes,
                     classes, m.num_classes);
            rc = CKPT_EMISMATCH;
            goto out;
        }
        if (strcmp(name, net->param[i].name) != 0 || cnt != net->param[i].count) {
            snprintf(err, errlen, "%s: tensor %u is %s with %" PRIu64 " elements, this net's is %s with %zu", path, i, name, cnt,
                     net->param[i].name, net->param[i].count);
            rc = CKPT_EMISMATCH;
            goto out;
        }
    }
    uint32_t nbuf = get_u32(&r);
    if (!r.bad && nbuf != (uint32_t)net->nbuf) {
        snprintf(err, errlen, "%s: %u state tensors, this net has %d", path, nbuf, net->nbuf);
        rc = CKPT_EMISMATCH;
        goto out;
    }
    for (uint32_t i = 0; i < nbuf && !r.bad; i++) {
        char name[64];
        get_str(&r, name, sizeof name);
        uint64_t cnt = get_u64(&r);
        if (!r.bad && (strcmp(name, net->buf[i].name) != 0 || cnt != net->buf[i].count)) {
            snprintf(err, errlen, "%s: state tensor %s with %" PRIu64 " elements, this net's is %s with %zu", path, name,
                     cnt, net->buf[i].name, net->buf[i].count);
            rc = CKPT_EMISMATCH;
            goto out;
        }
    }
    if (r.bad) {
        snprintf(err, errlen, "%s: truncated header", path);
        rc = CKPT_ECORRUPT;
        goto out;
    }
    get_tail(&r, &m);
    size_t pbytes = net->params_total * sizeof(float), sbytes = net->state_total * sizeof(float);
    size_t need = 16 + (size_t)hb + 2 * pbytes + sbytes + 4;
    if (need != n) {
        snprintf(err, errlen, "%s: %zu bytes, expected %zu", path, n, need);
        rc = CKPT_ECORRUPT;
        goto out;
    }
    const uint8_t *p = b + 16 + hb;
    memcpy(net->params, p, pbytes);
    memcpy(net->state, p + pbytes, sbytes);
    if (velocity) memcpy(velocity, p + pbytes + sbytes, pbytes);
    if (meta) *meta = m;
    rc = 0;
out:
    free(b);
    return rc;
}
