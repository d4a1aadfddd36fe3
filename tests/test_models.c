/* test_models.c: the model zoo. Every registered model builds with the parameter count of its
 * reference definition and the expected feature shapes; the registry answers lookups and
 * learning rates; small models run a forward (and backward) pass. Nets are built without
 * net_finalize unless noted, so building even the big models allocates nothing large. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "models.h"
#include "testutil.h"

static const char *const all_names[15] = {"trivial",  "lenet",    "alexnet",   "overfeat",  "googlenet",
                                          "vgg11",    "vgg13",    "vgg16",     "vgg19",     "resnet18",
                                          "resnet34", "resnet50", "resnet101", "resnet152", "inception3"};

static Net *build(const char *name, int batch, int classes) {
    const ModelInfo *m = model_find(name);
    if (!m) return NULL;
    return model_build_net(m, batch, classes);
}

/* The shape of the last 4-D tensor the body produces (the input of flatten / spatial average). */
static Shape last_4d(const Net *net) {
    Shape s = net->node[net->input].shape;
    for (int i = 0; i < net->nnode; i++)
        if (net->node[i].shape.h > 1 || net->node[i].shape.w > 1) s = net->node[i].shape;
    return s;
}

TEST(models_registry_lookup) {
    int n = 0;
    const ModelInfo *list = model_list(&n);
    CHECK(n == 15);
    CHECK(model_find("resnet51") == NULL);
    CHECK(model_find("") == NULL);
    CHECK(model_find("ResNet50") == NULL);
    const char *names = model_names();
    for (int i = 0; i < 15; i++) {
        const ModelInfo *m = model_find(all_names[i]);
        CHECK_MSG(m != NULL, "model %s not registered", all_names[i]);
        if (!m) continue;
        CHECK(strcmp(m->name, all_names[i]) == 0);
        CHECK(m->build != NULL);
        CHECK_MSG(strstr(names, all_names[i]) != NULL, "%s missing from \"%s\"", all_names[i], names);
    }
    /* every registered model is one of the known fifteen, and names are unique */
    for (int i = 0; i < n; i++) {
        int known = 0;
        for (int j = 0; j < 15; j++) known += strcmp(list[i].name, all_names[j]) == 0;
        CHECK_MSG(known == 1, "unexpected model %s", list[i].name);
        CHECK(model_find(list[i].name) == &list[i]);
    }
}

TEST(models_image_sizes_and_default_lr) {
    CHECK(model_find("alexnet")->image_size == 227);
    CHECK(model_find("overfeat")->image_size == 231);
    CHECK(model_find("inception3")->image_size == 299);
    CHECK(model_find("lenet")->image_size == 28);
    CHECK(model_find("resnet50")->image_size == 224);
    CHECK(model_find("googlenet")->image_size == 224);
    /* resnet: nvcnn.py's 1.0 x total batch / 1024 */
    CHECK_NEAR(model_default_lr(model_find("resnet50"), 256), 0.25, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("resnet18"), 64), 0.0625, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("resnet152"), 1024), 1.0, 1e-12);
    /* the others: a fixed rate, independent of the batch */
    CHECK_NEAR(model_default_lr(model_find("alexnet"), 256), 0.03, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("alexnet"), 1024), 0.03, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("googlenet"), 128), 0.04, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("vgg16"), 64), 0.02, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("inception3"), 64), 0.2, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("lenet"), 32), 0.001, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("overfeat"), 32), 0.001, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("trivial"), 32), 0.001, 1e-12);
}

TEST(models_parameter_counts) {
    /* With 1000 classes. Reference values: torchvision for resnet, alexnet and vgg (BN gamma and
     * beta are parameters, moving statistics are not); the GoogLeNet paper's network with biases
     * and no auxiliary heads; Keras's InceptionV3 (trainable beta) plus one gamma per BN channel;
     * trivial, lenet and overfeat from their layer sizes. */
    static const struct {
        const char *name;
        size_t params;
    } ref[15] = {
        {"trivial", 224 * 224 * 3 + 1 + 1000 + 1000},
        {"lenet", (32 * 3 * 25 + 32) + (64 * 32 * 25 + 64) + (7 * 7 * 64 * 512 + 512) + (512 * 1000 + 1000)},
        {"alexnet", 61100840},
        {"overfeat", 145920872},
        {"googlenet", 6998552},
        {"vgg11", 132863336},
        {"vgg13", 133047848},
        {"vgg16", 138357544},
        {"vgg19", 143667240},
        {"resnet18", 11689512},
        {"resnet34", 21797672},
        {"resnet50", 25557032},
        {"resnet101", 44549160},
        {"resnet152", 60192808},
        {"inception3", 23834568},
    };
    for (int i = 0; i < 15; i++) {
        Net *net = build(ref[i].name, 2, 1000);
        CHECK_MSG(net != NULL, "%s not registered", ref[i].name);
        if (!net) continue;
        CHECK_MSG(net_num_params(net) == ref[i].params, "%s: %zu parameters, expected %zu", ref[i].name,
                  net_num_params(net), ref[i].params);
        CHECK(!net->finalized && net->params == NULL);
        net_free(net);
    }
}

TEST(models_logits_shape_and_loss_last) {
    for (int i = 0; i < 15; i++) {
        Net *net = build(all_names[i], 2, 1000);
        CHECK(net->logits >= 0);
        if (net->logits < 0) {
            net_free(net);
            continue;
        }
        Shape s = net->node[net->logits].shape;
        CHECK_MSG(s.n == 2 && s.c == 1000 && s.h == 1 && s.w == 1, "%s: logits %dx%dx%dx%d", all_names[i], s.n,
                  s.c, s.h, s.w);
        /* the loss is the last layer and reads the logits */
        const Layer *last = &net->layer[net->nlayer - 1];
        CHECK(strcmp(last->ops->type, "softmax_xent") == 0);
        CHECK(last->nin == 1 && last->in[0] == net->logits);
        net_free(net);
    }
    /* the class count reaches the logits */
    Net *net = build("resnet18", 3, 17);
    Shape s = net->node[net->logits].shape;
    CHECK(s.n == 3 && s.c == 17);
    net_free(net);
}

TEST(models_feature_shapes) {
    static const struct {
        const char *name;
        int c, h, w;
    } ref[] = {
        {"lenet", 64, 7, 7},        {"alexnet", 256, 6, 6},     {"overfeat", 1024, 6, 6},
        {"googlenet", 1024, 7, 7},  {"vgg11", 512, 7, 7},       {"vgg19", 512, 7, 7},
        {"resnet18", 512, 7, 7},    {"resnet34", 512, 7, 7},    {"resnet50", 2048, 7, 7},
        {"resnet101", 2048, 7, 7},  {"resnet152", 2048, 7, 7},  {"inception3", 2048, 8, 8},
        {"trivial", 3, 224, 224},
    };
    for (size_t i = 0; i < sizeof ref / sizeof ref[0]; i++) {
        Net *net = build(ref[i].name, 2, 1000);
        Shape s = last_4d(net);
        CHECK_MSG(s.n == 2 && s.c == ref[i].c && s.h == ref[i].h && s.w == ref[i].w,
                  "%s: last 4-D tensor %dx%dx%d, expected %dx%dx%d", ref[i].name, s.c, s.h, s.w, ref[i].c,
                  ref[i].h, ref[i].w);
        net_free(net);
    }
}

/* The channel counts and sizes at the module boundaries of the branching models. */
static int has_shape(const Net *net, int c, int h, int w) {
    for (int i = 0; i < net->nnode; i++) {
        Shape s = net->node[i].shape;
        if (s.c == c && s.h == h && s.w == w) return 1;
    }
    return 0;
}

static int count_type(const Net *net, const char *type) {
    int n = 0;
    for (int i = 0; i < net->nlayer; i++) n += strcmp(net->layer[i].ops->type, type) == 0;
    return n;
}

TEST(models_inner_structure) {
    Net *net = build("googlenet", 1, 1000);
    CHECK(count_type(net, "concat") == 9);
    CHECK(count_type(net, "conv") == 3 + 9 * 6);
    CHECK(count_type(net, "bn") == 0);
    CHECK(has_shape(net, 256, 28, 28) && has_shape(net, 480, 28, 28)); /* 3a, 3b */
    CHECK(has_shape(net, 512, 14, 14) && has_shape(net, 528, 14, 14) && has_shape(net, 832, 14, 14));
    CHECK(has_shape(net, 832, 7, 7));
    net_free(net);

    net = build("inception3", 1, 1000);
    CHECK(count_type(net, "concat") == 11);
    CHECK(count_type(net, "conv") == 94);
    CHECK(count_type(net, "bn") == 94);
    CHECK(has_shape(net, 192, 71, 71));
    CHECK(has_shape(net, 256, 35, 35) && has_shape(net, 288, 35, 35));
    CHECK(has_shape(net, 768, 17, 17) && has_shape(net, 1280, 8, 8));
    net_free(net);

    /* resnet50: 16 residual sums, 4 projection shortcuts, 53 convs each with BN */
    net = build("resnet50", 1, 1000);
    CHECK(count_type(net, "add") == 16);
    CHECK(count_type(net, "conv") == 53);
    CHECK(count_type(net, "bn") == 53);
    CHECK(has_shape(net, 64, 112, 112) && has_shape(net, 64, 56, 56));
    CHECK(has_shape(net, 256, 56, 56) && has_shape(net, 512, 28, 28) && has_shape(net, 1024, 14, 14));
    net_free(net);

    /* resnet18: 8 sums, 3 projections: 1 + 16 + 3 convs */
    net = build("resnet18", 1, 1000);
    CHECK(count_type(net, "add") == 8);
    CHECK(count_type(net, "conv") == 20);
    CHECK(has_shape(net, 128, 28, 28) && has_shape(net, 256, 14, 14));
    net_free(net);

    /* no BN in the bias models, and alexnet's two dropouts */
    const char *nobn[] = {"trivial", "lenet", "alexnet", "overfeat", "vgg16"};
    for (int i = 0; i < 5; i++) {
        net = build(nobn[i], 1, 10);
        CHECK_MSG(count_type(net, "bn") == 0, "%s has batch norm", nobn[i]);
        net_free(net);
    }
    net = build("alexnet", 1, 10);
    CHECK(count_type(net, "dropout") == 2);
    CHECK(count_type(net, "conv") == 5 && count_type(net, "fc") == 3);
    net_free(net);
    net = build("vgg13", 1, 10);
    CHECK(count_type(net, "conv") == 10 && count_type(net, "maxpool") == 5 && count_type(net, "dropout") == 0);
    net_free(net);
}

TEST(models_layers_in_topological_order) {
    for (int m = 0; m < 15; m++) {
        Net *net = build(all_names[m], 1, 1000);
        int bad = 0, used_input = 0;
        for (int i = 0; i < net->nlayer; i++) {
            const Layer *l = &net->layer[i];
            if (net->node[l->out].producer != i) bad++;
            for (int k = 0; k < l->nin; k++) {
                int p = net->node[l->in[k]].producer;
                if (l->in[k] == net->input) used_input = 1;
                else if (p < 0 || p >= i) bad++;
            }
        }
        CHECK_MSG(bad == 0, "%s: %d out-of-order references", all_names[m], bad);
        CHECK_MSG(used_input, "%s never reads the input", all_names[m]);
        /* every node except the loss output feeds some layer (no dangling branches) */
        int dangling = 0;
        for (int nd = 0; nd < net->nnode; nd++) {
            int used = 0;
            for (int i = 0; i < net->nlayer && !used; i++)
                for (int k = 0; k < net->layer[i].nin; k++) used |= net->layer[i].in[k] == nd;
            if (!used && nd != net->layer[net->nlayer - 1].out) dangling++;
        }
        CHECK_MSG(dangling == 0, "%s: %d tensors nobody reads", all_names[m], dangling);
        net_free(net);
    }
}

TEST(models_resnet50_flops) {
    Net *net = build("resnet50", 2, 1000);
    double per_image = net_forward_flops(net) / 2;
    /* v1 with the stride on the first 1x1 conv: about 3.9 G multiply-adds per 224x224 image */
    CHECK_MSG(per_image > 7.0e9 && per_image < 8.5e9, "resnet50 forward: %.3f GFLOP per image", per_image / 1e9);
    net_free(net);
}

static void forward_backward_small(const char *name) {
    Net *net = build(name, 2, 1000);
    net_finalize(net, 42);
    Rng r;
    rng_seed(&r, 9);
    Node *in = net_node(net, net->input);
    tu_fill_uniform(in->data, shape_count(in->shape), -1, 1, &r);
    int32_t labels[2] = {3, 999};
    net->labels = labels;
    net_forward(net);
    CHECK_MSG(isfinite(net->loss) && net->loss > 0, "%s: loss %g", name, net->loss);
    Node *lg = net_node(net, net->logits);
    int finite = 1;
    for (size_t k = 0; k < shape_count(lg->shape); k++) finite &= isfinite(lg->data[k]) != 0;
    CHECK(finite);
    net_backward(net);
    double gsum = 0;
    for (size_t k = 0; k < net->params_total; k++) gsum += fabs(net->grads[k]);
    CHECK_MSG(isfinite(gsum) && gsum > 0, "%s: |grad| sum %g", name, gsum);
    net_free(net);
}

TEST(models_forward_backward_lenet) { forward_backward_small("lenet"); }
TEST(models_forward_backward_trivial) { forward_backward_small("trivial"); }
