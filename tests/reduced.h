/* reduced.h: every model of the zoo as a variant that is cheap to run in tests: a small input
 * (the smallest that keeps the model's last feature map at 1x1 or 2x2) and the body's channel
 * counts divided by 16 (lenet 8; ResNeXt keeps 4-channel branches and has 2 of them instead of 32).
 * model_build_reduced(model_find(name), batch, classes, size, div, act) builds one. */
#ifndef NVCNN_TESTS_REDUCED_H
#define NVCNN_TESTS_REDUCED_H

typedef struct Reduced {
    const char *name;
    int size, div;
} Reduced;

#define REDUCED_COUNT 20
static const Reduced reduced[REDUCED_COUNT] = {
    {"trivial", 16, 1},     {"lenet", 28, 8},       {"alexnet", 67, 16},     {"overfeat", 71, 16},
    {"googlenet", 64, 16},  {"vgg11", 32, 16},      {"vgg13", 32, 16},       {"vgg16", 32, 16},
    {"vgg19", 32, 16},      {"resnet18", 64, 16},   {"resnet34", 64, 16},    {"resnet50", 64, 16},
    {"resnet101", 64, 16},  {"resnet152", 64, 16},  {"resnext50", 64, 16},   {"resnext101", 64, 16},
    {"resnext152", 64, 16}, {"inception3", 107, 16}, {"inception4", 107, 16}, {"inception-resnet2", 107, 16},
};

#endif
