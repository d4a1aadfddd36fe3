/* test_models.c: the model zoo (nvcnn.py 1.6's twenty models). Every registered model builds with
 * the parameter count of its reference definition, the expected feature shapes and module
 * structure, and a layer summary that names settings, inputs and sections; the registry answers
 * lookups and learning rates. Every model's reduced variant (small input, few channels, the same
 * model code) has whole-model gradients that match finite differences and takes two CPU training
 * steps. Full-size nets are built without net_finalize, so building even the big models
 * allocates nothing large. */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "layers/priv.h"
#include "models.h"
#include "reduced.h"
#include "testutil.h"
#include "train.h"

/* nvcnn.py 1.6's twenty model keys */
#define NMODELS 20
static const char *const all_names[NMODELS] = {
    "trivial",   "lenet",     "alexnet",   "overfeat",   "googlenet",  "vgg11",      "vgg13",
    "vgg16",     "vgg19",     "resnet18",  "resnet34",   "resnet50",   "resnet101",  "resnet152",
    "resnext50", "resnext101", "resnext152", "inception3", "inception4", "inception-resnet2"};

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
    CHECK(n == NMODELS);
    CHECK(model_find("resnet51") == NULL);
    CHECK(model_find("") == NULL);
    CHECK(model_find("ResNet50") == NULL);
    const char *names = model_names();
    for (int i = 0; i < NMODELS; i++) {
        const ModelInfo *m = model_find(all_names[i]);
        CHECK_MSG(m != NULL, "model %s not registered", all_names[i]);
        if (!m) continue;
        CHECK(strcmp(m->name, all_names[i]) == 0);
        CHECK(m->build != NULL);
        CHECK_MSG(strstr(names, all_names[i]) != NULL, "%s missing from \"%s\"", all_names[i], names);
    }
    /* every registered model is one of the known twenty, and names are unique */
    for (int i = 0; i < n; i++) {
        int known = 0;
        for (int j = 0; j < NMODELS; j++) known += strcmp(list[i].name, all_names[j]) == 0;
        CHECK_MSG(known == 1, "unexpected model %s", list[i].name);
        CHECK(model_find(list[i].name) == &list[i]);
    }
}

TEST(models_image_sizes_and_default_lr) {
    CHECK(model_find("alexnet")->image_size == 227);
    CHECK(model_find("overfeat")->image_size == 231);
    CHECK(model_find("inception3")->image_size == 299);
    CHECK(model_find("inception4")->image_size == 299);
    CHECK(model_find("inception-resnet2")->image_size == 299);
    CHECK(model_find("resnext50")->image_size == 224 && model_find("resnext152")->image_size == 224);
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
    /* nvcnn: resnext 0.1, inception4 and inception-resnet2 0.045, whatever the batch */
    CHECK_NEAR(model_default_lr(model_find("resnext50"), 256), 0.1, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("resnext101"), 1024), 0.1, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("inception4"), 64), 0.045, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("inception-resnet2"), 512), 0.045, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("lenet"), 32), 0.001, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("overfeat"), 32), 0.001, 1e-12);
    CHECK_NEAR(model_default_lr(model_find("trivial"), 32), 0.001, 1e-12);
}

TEST(models_parameter_counts) {
    /* With 1000 classes. Reference values: torchvision for resnet, alexnet and vgg (BN gamma and
     * beta are parameters, moving statistics are not); the GoogLeNet paper's network with biases
     * and no auxiliary heads; Keras's InceptionV3 (trainable beta) plus one gamma per BN channel,
     * which is also a count of nvcnn.py 1.6's inception3 layer list; trivial, lenet and overfeat
     * from their layer sizes. resnext, inception4 and inception-resnet2: counts of nvcnn.py 1.6's
     * layer lists made independently of this code (convolution weights, batch-norm gamma and beta,
     * the classifier's weights and biases). They are far from the papers' networks: nvcnn's ResNeXt
     * keeps 32 branches of width 4 in every stage (torchvision's resnext50_32x4d: 25.0 M), and its
     * Inception-ResNet-v2 takes Reduction-B's widths from Facebook's Torch implementation and has
     * no 1536-channel 1x1 convolution before pooling (Keras's InceptionResNetV2: 55.9 M). */
    static const struct {
        const char *name;
        size_t params;
    } ref[NMODELS] = {
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
        {"resnext50", 8559912},
        {"resnext101", 13138216},
        {"resnext152", 17188136},
        {"inception3", 23834568},
        {"inception4", 42679816},
        {"inception-resnet2", 31574440},
    };
    for (int i = 0; i < NMODELS; i++) {
        Net *net = build(ref[i].name, 2, 1000);
        CHECK_MSG(net != NULL, "%s not registered", ref[i].name);
        if (!net) continue;
        CHECK_MSG(net_num_params(net) == ref[i].params, "%s: %zu parameters, expected %zu", ref[i].name,
                  net_num_params(net), ref[i].params);
        CHECK(!net->finalized && net->params == NULL);
        net_free(net);
    }
}

/* --image_size: the fully convolutional models are those that end in a global average pool (the
 * zoo's resnet*, resnext*, googlenet and inception*, as nvcnn.py's); they keep their parameter
 * counts at any size, and their smallest size is where the first window stops fitting: 75 for
 * Inception v3 and Inception-ResNet v2, the minimum Keras's InceptionV3 and InceptionResNetV2
 * document. */
TEST(models_image_size_smallest_and_fully_convolutional) {
    int n;
    const ModelInfo *m = model_list(&n);
    for (int i = 0; i < n; i++) {
        const char *name = m[i].name;
        const int want_fc = strncmp(name, "resnet", 6) == 0 || strncmp(name, "resnext", 7) == 0 ||
                            strcmp(name, "googlenet") == 0 || strncmp(name, "inception", 9) == 0;
        CHECK_MSG(model_fully_convolutional(&m[i]) == want_fc, "%s", name);
        const int lo = model_min_image_size(&m[i]);
        Net *at = model_build_reduced(&m[i], 2, 10, lo, 1, ACT_RELU);
        CHECK_MSG(!at->shape_error[0], "%s at its smallest %d: %s", name, lo, at->shape_error);
        if (want_fc) {
            Net *full = model_build_net(&m[i], 2, 10);
            CHECK_MSG(net_num_params(at) == net_num_params(full), "%s: %zu parameters at %d, %zu at %d", name, net_num_params(at),
                      lo, net_num_params(full), m[i].image_size);
            net_free(full);
        }
        net_free(at);
        if (lo > 1) {
            Net *below = model_build_reduced(&m[i], 2, 10, lo - 1, 1, ACT_RELU);
            CHECK_MSG(below->shape_error[0] && strstr(below->shape_error, "does not fit"), "%s at %d builds", name, lo - 1);
            net_free(below);
        }
    }
    CHECK(model_min_image_size(model_find("inception3")) == 75 && model_min_image_size(model_find("inception-resnet2")) == 75);
    /* the sizes the emulated GPU tests reduce alexnet and overfeat to are their smallest */
    CHECK(model_min_image_size(model_find("alexnet")) == 67 && model_min_image_size(model_find("overfeat")) == 71);
}

TEST(models_logits_shape_and_loss_last) {
    for (int i = 0; i < NMODELS; i++) {
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
        {"trivial", 3, 224, 224},   {"resnext50", 2048, 7, 7},  {"resnext101", 2048, 7, 7},
        {"resnext152", 2048, 7, 7}, {"inception4", 1536, 8, 8}, {"inception-resnet2", 2048, 8, 8},
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

    /* resnext50: per block a 1x1 to 32 x 4 channels (the branches' first convolutions as one), a
     * 3x3 with 32 groups, a 1x1 back to the block's channels; 4 projection shortcuts */
    net = build("resnext50", 1, 1000);
    CHECK(count_type(net, "add") == 16 && count_type(net, "concat") == 0);
    CHECK(count_type(net, "conv") == 1 + 16 * 3 + 4 && count_type(net, "bn") == 53);
    /* nvcnn's activations: stem, 3 per block, 4 shortcuts, 1 per sum */
    CHECK(count_type(net, "relu") == 1 + 16 * 3 + 4 + 16);
    int grouped = 0, branch_fans = 0;
    for (int i = 0; i < net->nlayer; i++) {
        const Layer *l = &net->layer[i];
        if (strcmp(l->ops->type, "conv") != 0) continue;
        const Conv *c = l->priv;
        if (c->groups > 1) {
            grouped++;
            CHECK(c->groups == 32 && c->cin == 128 && c->cout == 128 && c->kh == 3 && c->kw == 3);
            CHECK(net->param[l->param0].count == 128 * 4 * 9); /* 32 groups of 4 -> 4 */
        }
        /* the fused first 1x1s of the branches keep one branch's initialisation */
        if (c->cout == 128 && c->kh == 1) branch_fans += net->param[l->param0].fan_out == 4;
    }
    CHECK(grouped == 16 && branch_fans == 16);
    CHECK(has_shape(net, 128, 56, 56) && has_shape(net, 256, 56, 56) && has_shape(net, 128, 28, 28));
    CHECK(has_shape(net, 512, 28, 28) && has_shape(net, 1024, 14, 14) && has_shape(net, 128, 7, 7));
    net_free(net);
    net = build("resnext152", 1, 1000);
    CHECK(count_type(net, "add") == 50 && count_type(net, "conv") == 1 + 50 * 3 + 4);
    net_free(net);

    /* inception4: stem (3 concats, 11 convs), 4 A, Reduction-A, 7 B, Reduction-B, 3 C */
    net = build("inception4", 1, 1000);
    CHECK(count_type(net, "concat") == 3 + 4 + 1 + 7 + 1 + 3);
    CHECK(count_type(net, "conv") == 11 + 4 * 7 + 4 + 7 * 10 + 6 + 3 * 10);
    CHECK(count_type(net, "bn") == count_type(net, "conv") && count_type(net, "dropout") == 1);
    CHECK(has_shape(net, 64, 147, 147) && has_shape(net, 160, 73, 73) && has_shape(net, 192, 71, 71));
    CHECK(has_shape(net, 384, 35, 35) && has_shape(net, 1024, 17, 17) && has_shape(net, 1536, 8, 8));
    net_free(net);

    /* inception-resnet2: 5 A, Reduction-A, 10 B, Reduction-B, 5 C; every sum scales its branch by 0.2 */
    net = build("inception-resnet2", 1, 1000);
    CHECK(count_type(net, "add") == 20 && count_type(net, "dropout") == 1);
    CHECK(count_type(net, "concat") == 3 + 5 + 1 + 10 + 1 + 5);
    CHECK(count_type(net, "conv") == 11 + 5 * 7 + 4 + 10 * 5 + 7 + 5 * 5);
    int scaled = 0;
    for (int i = 0; i < net->nlayer; i++)
        if (strcmp(net->layer[i].ops->type, "add") == 0) {
            const AddPriv *a = net->layer[i].priv;
            scaled += a->ca == 1.0f && a->cb == 0.2f;
        }
    CHECK(scaled == 20);
    CHECK(has_shape(net, 384, 35, 35) && has_shape(net, 1152, 17, 17) && has_shape(net, 2048, 8, 8));
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
    for (int m = 0; m < NMODELS; m++) {
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

/* ---- Reduced variants: the same model code on a small input with few channels (reduced.h) ---- */

static double loss_at(Net *net, uint64_t seed) {
    rng_seed(&net->rng, seed); /* the same dropout masks at every evaluation */
    net_forward(net);
    return net->loss;
}

/* A max pool whose forward replays the choices (argmax) of the forward before: the net becomes
 * the smooth function of the piece it sits on, whose derivative backward computes (a max pool is
 * not differentiable where its choice changes, and finite differences would cross such kinks). */
static void maxpool_replay_forward(Layer *l, Net *net) {
    const Pool *p = l->priv;
    const Node *in = net_node(net, l->in[0]);
    float *y = net_node(net, l->out)->data;
    const size_t ihw = (size_t)p->h * p->w, ohw = (size_t)p->oh * p->ow;
    for (size_t pl = 0; pl < (size_t)in->shape.n * p->c; pl++)
        for (size_t k = 0; k < ohw; k++) y[pl * ohw + k] = in->data[pl * ihw + (size_t)p->argmax[pl * ohw + k]];
}

static LayerOps maxpool_replay_ops;

static void freeze_max_pools(Net *net) {
    for (int i = 0; i < net->nlayer; i++) {
        Layer *l = &net->layer[i];
        if (strcmp(l->ops->type, "maxpool") != 0) continue;
        maxpool_replay_ops = *l->ops;
        maxpool_replay_ops.forward = maxpool_replay_forward;
        l->ops = &maxpool_replay_ops;
    }
}

/* Central differences of the whole net's loss along the analytic gradient g of one tensor w (the
 * input or a parameter), d = g / max|g|: (L(w + h d) - L(w - h d)) / 2h against g . d. Along the
 * gradient the loss changes the most, well above float rounding; a gradient that is wrong in
 * scale or sign, or misses a branch's share, changes g . d at first order. The step aims at a
 * loss change of 1e-3 (float rounding of the loss is about 1e-6), within 1e-4 and 1e-2 of the
 * tensor's RMS (1 for a zero tensor): smaller steps drown in rounding, larger ones in curvature
 * (measured over the twenty models under five OpenBLAS core types). Returns the relative
 * difference. */
static double fd_along_gradient(Net *net, float *w, const float *g, size_t n, uint64_t seed) {
    float *w0 = xmalloc(n * sizeof *w0);
    memcpy(w0, w, n * sizeof *w0);
    double an = 0, gmax = 0, ss = 0;
    for (size_t i = 0; i < n; i++) {
        gmax = fmax(gmax, fabs(g[i]));
        ss += (double)w[i] * w[i];
    }
    if (gmax == 0) gmax = 1;
    for (size_t i = 0; i < n; i++) an += (double)g[i] * (g[i] / gmax);
    double scale = ss > 0 ? sqrt(ss / (double)n) : 1, h = 1e-3 / (2 * fabs(an) + 1e-30);
    h = fmin(fmax(h, 1e-4 * scale), 1e-2 * scale);
    for (size_t i = 0; i < n; i++) w[i] = (float)(w0[i] + h * (g[i] / gmax));
    double lp = loss_at(net, seed);
    for (size_t i = 0; i < n; i++) w[i] = (float)(w0[i] - h * (g[i] / gmax));
    double lm = loss_at(net, seed);
    memcpy(w, w0, n * sizeof *w0);
    free(w0);
    double num = (lp - lm) / (2 * h);
    return fabs(an - num) / fmax(fmax(fabs(an), fabs(num)), 1e-4);
}

static int count_type(const Net *net, const char *type);

/* The input and up to 25 parameter tensors spread over the depth (the first and the last
 * included). The ReLUs become ELUs (nb->activation), smooth enough for central differences; max
 * pools replay their choices. Batch-norm nets run in inference mode, where batch norm is an
 * affine map of the running statistics: with batch statistics on batches of 2, these narrow
 * nets' curvature at initialisation is too large for a step size that float rounding allows. The batch-statistics gradient is
 * test_bn.c's. Nets without batch norm run in training mode, with fixed dropout masks. */
static double reduced_gradcheck(const Reduced *rd, int *checked) {
    Net *net = model_build_reduced(model_find(rd->name), 2, 10, rd->size, rd->div, ACT_ELU);
    net_finalize(net, 5);
    net->training = count_type(net, "bn") == 0;
    Node *in = net_node(net, net->input);
    const size_t nin = shape_count(in->shape);
    in->grad = xcalloc(nin, sizeof(float));
    Rng r;
    rng_seed(&r, 17);
    tu_fill_uniform(in->data, nin, -1, 1, &r);
    int32_t labels[2] = {3, 8};
    net->labels = labels;
    const uint64_t seed = 99;
    loss_at(net, seed);
    net_backward(net);
    freeze_max_pools(net);
    float *grads = xmalloc(net->params_total * sizeof(float)), *gin = xmalloc(nin * sizeof(float));
    memcpy(grads, net->grads, net->params_total * sizeof(float));
    memcpy(gin, in->grad, nin * sizeof(float));
    double worst = fd_along_gradient(net, in->data, gin, nin, seed);
    CHECK_MSG(worst < 3e-2, "%s: input: relative difference %.3g", rd->name, worst);
    *checked = 1;
    const int want = 25, np = net->nparam;
    for (int k = 0; k < want && k < np; k++) {
        int p = np <= want ? k : (int)((long)k * (np - 1) / (want - 1));
        const Param *pp = &net->param[p];
        double e = fd_along_gradient(net, net->params + pp->off, grads + pp->off, pp->count, seed);
        CHECK_MSG(e < 3e-2, "%s: %s: relative difference %.3g", rd->name, pp->name, e);
        worst = fmax(worst, e);
        ++*checked;
    }
    free(grads);
    free(gin);
    net_free(net);
    return worst;
}

TEST(models_reduced_gradients_match_finite_differences) {
    int threads = omp_get_max_threads();
    omp_set_num_threads(1); /* as models_reduced_train_two_steps_cpu */
    double worst = 0;
    for (int i = 0; i < REDUCED_COUNT; i++) {
        int checked;
        double e = reduced_gradcheck(&reduced[i], &checked);
        printf("    %-18s %2d tensors, max relative difference %.2e\n", reduced[i].name, checked, e);
        worst = fmax(worst, e);
    }
    printf("    whole-model finite differences: max relative difference %.2e\n", worst);
    omp_set_num_threads(threads);
}

/* Two training steps of each reduced variant as the trainer runs them (ReLU, batch norm with batch
 * statistics, dropout, Nesterov momentum, weight decay): the first step's loss is the model's
 * cross-entropy plus the weight decay term, the losses and every parameter stay finite, the
 * parameters and the batch-norm moving averages move. Nets without batch norm must also have a
 * lower cross-entropy on the batch afterwards (same dropout masks). Nets with it need not: with
 * batch statistics on a batch of 4, these narrow nets' gradients are large at initialisation
 * (reduced resnet152's largest: about 1e3), so that a step of 1e-3 can leave the region where the
 * loss falls along the gradient. */
static void reduced_train(const Reduced *rd) {
    const int B = 4;
    const double lr = 1e-3, wd = 1e-4;
    Net *net = model_build_reduced(model_find(rd->name), B, 10, rd->size, rd->div, ACT_RELU);
    net_finalize(net, 3);
    const int has_bn = count_type(net, "bn") > 0;
    Rng r;
    rng_seed(&r, 21);
    Node *in = net_node(net, net->input);
    tu_fill_uniform(in->data, shape_count(in->shape), -1, 1, &r);
    int32_t labels[B];
    labels_synthetic(labels, B, 10, &r);
    net->labels = labels;
    double before = loss_at(net, 7), l2w = 0;
    for (size_t i = 0; i < net->params_total; i++) l2w += 0.5 * (double)net->params[i] * net->params[i];
    float *w0 = xmalloc(net->params_total * sizeof(float)), *s0 = xmalloc((net->state_total + 1) * sizeof(float));
    memcpy(w0, net->params, net->params_total * sizeof(float));
    memcpy(s0, net->state, net->state_total * sizeof(float));
    Dist d = {0, 1, 0, 1, 0};
    TrainerConfig tc;
    memset(&tc, 0, sizeof tc);
    tc.opt.momentum = 0.9;
    tc.opt.nesterov = 1;
    tc.opt.weight_decay = wd;
    tc.loss_scale = 1;
    Trainer t;
    trainer_init(&t, net, &d, &tc, NULL);
    rng_seed(&net->rng, 7); /* the first step draws the masks `before` had */
    double l1 = trainer_step(&t, labels, lr), l2 = trainer_step(&t, labels, lr);
    double after = loss_at(net, 7);
    CHECK_MSG(fabs(l1 - (before + wd * l2w)) <= 1e-6 * l1, "%s: first step's loss %.9g, the model's %.9g + %.9g", rd->name, l1,
              before, wd * l2w);
    size_t moved = 0, finite = 0, state_moved = 0;
    for (size_t i = 0; i < net->params_total; i++) {
        moved += net->params[i] != w0[i];
        finite += isfinite(net->params[i]) != 0;
    }
    for (size_t i = 0; i < net->state_total; i++) state_moved += net->state[i] != s0[i];
    CHECK_MSG(isfinite(l2) && isfinite(after) && l2 != l1 && finite == net->params_total,
              "%s: losses %g, %g, %g; %zu of %zu parameters finite", rd->name, l1, l2, after, finite, net->params_total);
    CHECK_MSG(moved > net->params_total / 2, "%s: %zu of %zu parameters moved", rd->name, moved, net->params_total);
    CHECK_MSG(!has_bn || state_moved > net->state_total / 2, "%s: %zu of %zu moving statistics moved", rd->name, state_moved,
              net->state_total);
    CHECK_MSG(has_bn || after < before, "%s: cross-entropy %.5f before, %.5f after two steps", rd->name, before, after);
    CHECK(t.skipped_steps == 0);
    printf("    %-18s loss %.4f, %.4f; cross-entropy on the batch %.4f -> %.4f\n", rd->name, l1, l2, before, after);
    trainer_free(&t);
    free(w0);
    free(s0);
    net_free(net);
}

/* The reduced nets are small: one thread runs them fastest, and spares the test the OpenMP
 * barriers of thousands of tiny parallel regions on a loaded machine. */
TEST(models_reduced_train_two_steps_cpu) {
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    for (int i = 0; i < REDUCED_COUNT; i++) reduced_train(&reduced[i]);
    omp_set_num_threads(threads);
}

/* The layer summary (--print_layers) as a reader checks it against a paper: one line per layer
 * with its settings and, where it does not read the line above, its inputs; the model's sections
 * as headings. */
static char *summary_of(const Net *net) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    net_print_summary(net, f);
    fclose(f);
    return buf;
}

static int count_lines(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)); p += strlen(needle)) n++;
    return n;
}

TEST(models_print_layers_shows_settings_inputs_and_sections) {
    for (int m = 0; m < NMODELS; m++) {
        Net *net = build(all_names[m], 1, 1000);
        char *s = summary_of(net);
        int layers = count_lines(s, "GFLOPs"), headings = count_lines(s, "\n  -- ") + (strncmp(s, "  -- ", 5) == 0);
        CHECK_MSG(layers == net->nlayer, "%s: %d lines for %d layers", all_names[m], layers, net->nlayer);
        int sections = 0;
        for (int i = 0; i < net->nlayer; i++) sections += net->layer[i].section != NULL;
        CHECK_MSG(headings == sections && sections >= 1, "%s: %d headings, %d sections", all_names[m], headings, sections);
        /* every multi-input layer names its inputs: "<- a, b" */
        for (int i = 0; i < net->nlayer; i++) {
            const Layer *l = &net->layer[i];
            if (l->nin < 2) continue;
            char want[128];
            snprintf(want, sizeof want, "<- %s, %s", net->layer[net->node[l->in[0]].producer].name,
                     net->layer[net->node[l->in[1]].producer].name);
            CHECK_MSG(strstr(s, want) != NULL, "%s: %s: no \"%s\"", all_names[m], l->name, want);
        }
        free(s);
        net_free(net);
    }
    Net *net = build("resnext50", 1, 1000);
    char *s = summary_of(net);
    CHECK(count_lines(s, "3x3 SAME g32 ") == 16);
    CHECK(strstr(s, "-- conv5 block 3/3: 32 branches of width 4 (1x1, 3x3) -> 1x1 2048, + shortcut\n") != NULL);
    CHECK(strstr(s, "-- conv3 block 1/4: 32 branches of width 4 (1x1/2, 3x3) -> 1x1 512, + shortcut\n") != NULL);
    free(s);
    net_free(net);
    net = build("inception4", 1, 1000);
    s = summary_of(net);
    CHECK(strstr(s, "-- Reduction-A (k=192, l=224, m=256, n=384)\n") && strstr(s, "-- Inception-C 3/3 (8x8x1536)\n"));
    CHECK(count_lines(s, "-- Inception-B ") == 7 && count_lines(s, " 1x7 SAME ") == 7 * 3 + 2);
    CHECK(strstr(s, "keep 0.8") != NULL);
    free(s);
    net_free(net);
    net = build("inception-resnet2", 1, 1000);
    s = summary_of(net);
    CHECK(count_lines(s, " 1 a + 0.2 b ") == 20);
    CHECK(strstr(s, "-- Reduction-A (k=256, l=256, m=384, n=384)\n") != NULL);
    free(s);
    net_free(net);
}
