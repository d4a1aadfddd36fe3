/* models.h: nvcnn's model zoo through the builder, and the registry name -> builder.
 * Adding a model is one file (models/X.c) plus one line in models/registry.c.
 */
#ifndef NVCNN_MODELS_H
#define NVCNN_MODELS_H

#include "builder.h"

/* Builds the body of a model on `x` (the scaled input image tensor) and returns its feature
 * tensor (2-D); the caller adds the final FC layer for the classes and the loss. A builder sets
 * nb->use_batch_norm as nvcnn does for that model; its ReLUs are nb->activation (nvcnn's builder
 * default, ReLU). */
typedef NbT (*ModelBuildFn)(Net *nb, NbT x);

typedef struct ModelInfo {
    const char *name;
    ModelBuildFn build;
    int image_size;    /* input height = width: 224; alexnet 227, overfeat 231, inception 299, lenet 28 */
    double base_lr;    /* default learning rate; < 0: resnet rule 0.1 x total batch / 256 */
    const char *description;
} ModelInfo;

/* NULL if unknown. */
const ModelInfo *model_find(const char *name);
/* All models, in registry order. */
const ModelInfo *model_list(int *count);
/* "trivial, lenet, alexnet, ..." (static buffer). */
const char *model_names(void);
/* Default learning rate for a total batch size. */
double model_default_lr(const ModelInfo *m, int total_batch);

/* A complete training net: input [batch][3][s][s], body, final FC (num_classes, linear),
 * softmax cross-entropy. Not finalized. */
Net *model_build_net(const ModelInfo *m, int batch, int num_classes);
/* The same at image_size x image_size; a size that does not fit the model's windows is exit 2
 * naming the layer. */
Net *model_build_sized(const ModelInfo *m, int batch, int num_classes, int image_size);
/* 1 when the model takes other input sizes than its own (no fully connected layer sized for the
 * input: a global average pool before the classifier). */
int model_fully_convolutional(const ModelInfo *m);
/* The smallest input size at which every window of the model fits. */
int model_min_image_size(const ModelInfo *m);
/* A variant for tests: the same model code on an image_size input, every channel count of the
 * body divided by width_div (nb_width; the logits keep num_classes), and `act` wherever the model
 * has its ReLUs (a smooth function lets finite differences through deep nets without kinks).
 * width_div 1, ACT_RELU and the model's image size give model_build_net's net. */
Net *model_build_reduced(const ModelInfo *m, int batch, int num_classes, int image_size, int width_div, Act act);

/* The families (one file each). */
NbT model_trivial(Net *nb, NbT x);
NbT model_lenet(Net *nb, NbT x);
NbT model_alexnet(Net *nb, NbT x);
NbT model_overfeat(Net *nb, NbT x);
NbT model_googlenet(Net *nb, NbT x);
NbT model_inception3(Net *nb, NbT x);
NbT model_inception4(Net *nb, NbT x);
NbT model_inception_resnet2(Net *nb, NbT x);
NbT model_vgg11(Net *nb, NbT x);
NbT model_vgg13(Net *nb, NbT x);
NbT model_vgg16(Net *nb, NbT x);
NbT model_vgg19(Net *nb, NbT x);
NbT model_resnet18(Net *nb, NbT x);
NbT model_resnet34(Net *nb, NbT x);
NbT model_resnet50(Net *nb, NbT x);
NbT model_resnet101(Net *nb, NbT x);
NbT model_resnet152(Net *nb, NbT x);
NbT model_resnext50(Net *nb, NbT x);
NbT model_resnext101(Net *nb, NbT x);
NbT model_resnext152(Net *nb, NbT x);

#endif
