/* onnx.h: a trained net as an ONNX model (--export_onnx).
 *
 * The model is the net's inference form: batch norm on its running statistics
 * (BatchNormalization), dropout left out, the loss replaced by a softmax. Opset 17 of the default
 * domain (ai.onnx), IR version 8; weights and batch-norm statistics are initializers (float32,
 * raw little-endian data). The graph's input is "images", float32 [N, 3, H, W] with a symbolic
 * batch dimension N, holding nvcnn's input layer's values (x / 127.5 - 1 of RGB bytes x); its
 * outputs are "logits" [N, classes] (the last fully connected layer) and "softmax" [N, classes]
 * (class k is the TFRecord label k + 1). The model's metadata (metadata_props) says the same. The
 * file is written through protobuf-c from ONNX's schema (data/onnx.proto).
 */
#ifndef NVCNN_ONNX_H
#define NVCNN_ONNX_H

#include <stddef.h>

#include "net.h"

#define ONNX_OPSET 17
#define ONNX_IR_VERSION 8

typedef struct OnnxInfo {
    const char *model;  /* the model's registry name */
    long step;          /* training steps of the weights */
    const char *source; /* where the weights come from (a checkpoint's path), for the metadata; NULL: none */
} OnnxInfo;

/* Writes `net` (finalized, its parameters and state on the host) to `path` as above. The file is
 * written under a temporary name beside it and renamed into place when complete. Returns 0, -1
 * with a one-line reason in err (a layer ONNX cannot express, naming it and its type; a path that
 * cannot be used), or -2 (writing failed: an I/O error such as a full disk): nothing is then left
 * at path or beside it. */
int onnx_export(const Net *net, const OnnxInfo *info, const char *path, char *err, size_t errlen);

#endif
