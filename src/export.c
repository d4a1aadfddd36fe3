/* export.c: see export.h. */
#include "export.h"

#include <stdio.h>
#include <string.h>

#include "ckpt.h"
#include "lifecycle.h"
#include "models.h"
#include "onnx.h"
#include "util.h"

int export_only_run(const Run *r) {
    const Config *c = &r->cfg;
    return c->export_onnx && c->log_dir && !config_given(c, &c->num_batches) && !config_given(c, &c->num_epochs);
}

void export_check_path(const Run *r, int before_log_dir) {
    const Config *c = &r->cfg;
    if (before_log_dir && c->profile && export_only_run(r))
        die_code(EXIT_USAGE, "--profile: --export_onnx alone (without --num_batches or --num_epochs) trains no step to profile");
    if (!c->export_onnx || r->dist.rank != 0) return;
    if (lifecycle_check_output(c, "export_onnx", c->export_onnx, before_log_dir, "the model")) return;
    if (c->profile && same_output_path(c->export_onnx, c->profile))
        die_code(EXIT_USAGE, "--export_onnx=%s and --profile=%s name one file: give them two", c->export_onnx, c->profile);
}

static void write_onnx(const Run *r, const Net *net, long step, const char *source) {
    char err[512];
    const OnnxInfo info = {r->model->name, step, source};
    const int rc = onnx_export(net, &info, r->cfg.export_onnx, err, sizeof err);
    if (rc != 0) die_code(rc == -2 ? EXIT_FAILURE_GENERIC : EXIT_USAGE, "%s", err);
    const Shape in = net->node[net->input].shape;
    printf("Exported %s (step %ld, %dx%d, %d classes) to %s: ONNX opset %d, input \"images\" (x / 127.5 - 1, RGB, NCHW), "
           "outputs \"logits\" and \"softmax\"\n",
           r->model->name, step, in.h, in.w, net->node[net->logits].shape.c, r->cfg.export_onnx, ONNX_OPSET);
}

int export_checkpoint(Run *r) {
    const Config *c = &r->cfg;
    if (r->dist.rank != 0) return 0;
    char path[4096], err[1024];
    CkptMeta m;
    const char *why = lifecycle_log_dir_missing(c->log_dir);
    if (why) die_code(EXIT_USAGE, "--export_onnx: --log_dir=%s %s", c->log_dir, why);
    char tf[512];
    if (!ckpt_latest(c->log_dir, path, sizeof path) && lifecycle_foreign_checkpoint(c->log_dir, tf, sizeof tf))
        die_code(EXIT_USAGE, "--export_onnx: no checkpoint of nvcnn in --log_dir=%s: it holds %s, which nvcnn cannot read", c->log_dir,
                 tf);
    if (!ckpt_latest(c->log_dir, path, sizeof path))
        die_code(EXIT_USAGE, "--export_onnx: no checkpoint in --log_dir=%s (with --num_batches or --num_epochs the run trains, "
                             "then exports)", c->log_dir);
    int rc = ckpt_verify(path, err, sizeof err); /* a corrupt file said as such, before its header is believed */
    if (rc == 0) rc = ckpt_read_meta(path, &m, err, sizeof err);
    if (rc != 0) die_code(ckpt_exit_code(rc), "--export_onnx: %s", err);
    if (strcmp(m.model, r->model->name) != 0)
        die_code(EXIT_USAGE, "--export_onnx: %s is a checkpoint of %s, not of --model=%s", path, m.model, r->model->name);
    if (config_given(c, &c->num_classes) && c->num_classes != m.num_classes)
        die_code(EXIT_USAGE, "--export_onnx: %s has %d classes, not --num_classes=%d", path, m.num_classes, c->num_classes);
    if (c->image_size && (c->image_size != m.in_h || c->image_size != m.in_w))
        die_code(EXIT_USAGE, "--export_onnx: %s was trained at %dx%d, not --image_size=%d (a model is exported at the size it was "
                             "trained at)", path, m.in_h, m.in_w, c->image_size);
    if (m.in_h != m.in_w || m.in_c != 3)
        die_code(EXIT_USAGE, "--export_onnx: %s has a %dx%dx%d input, not square RGB", path, m.in_c, m.in_h, m.in_w);
    Net *net = model_build_sized(r->model, 1, m.num_classes, m.in_h);
    net_finalize(net, c->seed);
    rc = ckpt_load(path, r->model->name, net, NULL, &m, err, sizeof err);
    if (rc != 0) die_code(ckpt_exit_code(rc), "--export_onnx: %s", err);
    write_onnx(r, net, (long)m.step, path);
    net_free(net);
    return 0;
}

void export_trained(Run *r, Net *net, Trainer *tr, long step) {
    if (!r->cfg.export_onnx || r->dist.rank != 0) return;
    trainer_sync_host(tr); /* the GPU backend's parameters and statistics */
    char source[4200];
    snprintf(source, sizeof source, "the end of a training run (--log_dir=%s)", r->cfg.log_dir ? r->cfg.log_dir : "none");
    write_onnx(r, net, step, source);
}
