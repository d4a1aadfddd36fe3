/* registry.c: model name -> builder, image size, default learning rate (as nvcnn). */
#include <string.h>

#include "layers/layers.h"
#include "models.h"
#include "util.h"

static const ModelInfo models[] = {
    {"trivial", model_trivial, 224, 0.001, "one FC layer (input-pipeline benchmark)"},
    {"lenet", model_lenet, 28, 0.001, "TensorFlow MNIST tutorial 2-conv model"},
    {"alexnet", model_alexnet, 227, 0.03, "AlexNet, one weird trick"},
    {"overfeat", model_overfeat, 231, 0.001, "OverFeat (fast)"},
    {"googlenet", model_googlenet, 224, 0.04, "GoogLeNet (biases, no BN, no auxiliary heads)"},
    {"vgg11", model_vgg11, 224, 0.02, "VGG-A"},
    {"vgg13", model_vgg13, 224, 0.02, "VGG-B"},
    {"vgg16", model_vgg16, 224, 0.02, "VGG-D"},
    {"vgg19", model_vgg19, 224, 0.02, "VGG-E"},
    {"resnet18", model_resnet18, 224, -1, "ResNet-18 v1 (basic blocks)"},
    {"resnet34", model_resnet34, 224, -1, "ResNet-34 v1 (basic blocks)"},
    {"resnet50", model_resnet50, 224, -1, "ResNet-50 v1 (bottleneck blocks)"},
    {"resnet101", model_resnet101, 224, -1, "ResNet-101 v1"},
    {"resnet152", model_resnet152, 224, -1, "ResNet-152 v1"},
    {"resnext50", model_resnext50, 224, 0.1, "ResNeXt-50, 32 branches of width 4 per block"},
    {"resnext101", model_resnext101, 224, 0.1, "ResNeXt-101, 32 branches of width 4 per block"},
    {"resnext152", model_resnext152, 224, 0.1, "ResNeXt-152, 32 branches of width 4 per block"},
    {"inception3", model_inception3, 299, 0.2, "Inception v3 (no auxiliary head)"},
    {"inception4", model_inception4, 299, 0.045, "Inception v4 (no auxiliary head)"},
    {"inception-resnet2", model_inception_resnet2, 299, 0.045, "Inception-ResNet v2 (residual scale 0.2)"},
};

const ModelInfo *model_list(int *count) {
    *count = (int)(sizeof models / sizeof models[0]);
    return models;
}

const ModelInfo *model_find(const char *name) {
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (strcmp(models[i].name, name) == 0) return &models[i];
    return NULL;
}

const char *model_names(void) {
    static char buf[512];
    if (!buf[0]) {
        size_t off = 0;
        for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
            off += (size_t)snprintf(buf + off, sizeof buf - off, "%s%s", i ? ", " : "", models[i].name);
    }
    return buf;
}

/* nvcnn.py's defaults; the ResNets' (base_lr < 0) scales with the total batch: 1.0 x batch / 1024 */
double model_default_lr(const ModelInfo *m, int total_batch) {
    if (m->base_lr < 0) return 1.0 * (double)total_batch / 1024.0;
    return m->base_lr;
}

Net *model_build_net(const ModelInfo *m, int batch, int num_classes) { return model_build_sized(m, batch, num_classes, m->image_size); }

Net *model_build_sized(const ModelInfo *m, int batch, int num_classes, int image_size) {
    Net *net = model_build_reduced(m, batch, num_classes, image_size, 1, ACT_RELU);
    if (net->shape_error[0])
        die_code(EXIT_USAGE, "model %s at %dx%d: %s", m->name, image_size, image_size, net->shape_error);
    return net;
}

/* A flatten layer on a map larger than 1x1 feeds a fully connected layer whose weights are sized
 * for the input; a model without one ends in a global average pool and takes any size that fits. */
int model_fully_convolutional(const ModelInfo *m) {
    Net *net = model_build_reduced(m, 1, 2, m->image_size, 1, ACT_RELU);
    int fixed = 0;
    for (int i = 0; i < net->nlayer; i++) {
        const Layer *l = &net->layer[i];
        const Shape s = net->node[l->in[0]].shape;
        if (strcmp(l->ops->type, "flatten") == 0 && s.h * s.w > 1) fixed = 1;
    }
    net_free(net);
    return !fixed;
}

/* The windows' outputs grow with the input, so the sizes that fit are those from the smallest up. */
int model_min_image_size(const ModelInfo *m) {
    for (int size = 1; size < m->image_size; size++) {
        Net *net = model_build_reduced(m, 1, 2, size, 1, ACT_RELU);
        const int fits = !net->shape_error[0];
        net_free(net);
        if (fits) return size;
    }
    return m->image_size;
}

Net *model_build_reduced(const ModelInfo *m, int batch, int num_classes, int image_size, int width_div, Act act) {
    Net *nb = net_new(batch, 3, image_size, image_size);
    nb->model = m->name;
    nb->width_div = width_div;
    nb->activation = act;
    NbT x = m->build(nb, nb_input(nb));
    Shape s = nb_shape(nb, x);
    if (s.h != 1 || s.w != 1) die("model %s: body output must be 2-D, got %dx%dx%d", m->name, s.c, s.h, s.w);
    nb->width_div = 1; /* the classifier keeps its classes */
    nb_section(nb, "classifier");
    NbT logits = nb_fc(nb, x, num_classes, ACT_LINEAR);
    nb_softmax_xent(nb, logits);
    return nb;
}
