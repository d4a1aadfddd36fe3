#!/usr/bin/env python3
"""PyTorch peer of nvcnn's synthetic-data training benchmark: trains a torchvision model on random
inputs and labels made once on the device (as nvcnn does without --data_dir), 1000 classes, SGD
(momentum 0.9, Nesterov as nvcnn's default, weight decay 1e-4), cross-entropy loss, eager mode.

Usage: scripts/bench_gpu_peer.py --model resnet50 --batch 256 --precision fp16
                                 [--steps 50] [--warmup 10] [--device cuda] [--compile]
--compile: the model through torch.compile (default mode); its compilation happens in the warm-up
steps and is not timed (the final line then says compile_s=S, the warm-up's seconds).
Models: resnet18/34/50/101/152, alexnet, googlenet, vgg16 (224x224), inception_v3 (299x299),
lenet (nvcnn's: 3x28x28, conv 5x5x32 and 5x5x64 SAME each with relu and 2x2 max pool, fc 512 + relu).
Precision: fp32 (no TF32 anywhere), tf32, fp16 (autocast + channels_last + GradScaler),
bf16 (autocast + channels_last). On --device cpu, fp16 and bf16 both autocast to bfloat16.
--memory_format: auto (channels_last for fp16/bf16 on CUDA, else NCHW), nchw or channels_last.
Prints one final line:
  peer: model=M batch=B precision=P images_per_sec=X.X peak_mem_gib=Y.YY
Used by scripts/bench_gpu.sh and scripts/bench_cpu.sh (--device cpu --threads N).
Needs: pip install torch torchvision (not needed by make test).
"""
import argparse
import contextlib
import sys
import time

# nvcnn's names of the zoo's models that torchvision has with the same parameters (inception_v3 also
# under its own name). Not resnext*: nvcnn's (nvcnn.py's) 8.6 M parameters are not torchvision's
# resnext50_32x4d's 25.0 M.
MODELS = ("resnet18", "resnet34", "resnet50", "resnet101", "resnet152",
          "alexnet", "googlenet", "vgg11", "vgg13", "vgg16", "vgg19", "inception3", "inception_v3", "lenet")
PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
NUM_CLASSES = 1000


def die(msg):
    print("bench_gpu_peer.py: " + msg, file=sys.stderr)
    sys.exit(2)


def parse_args():
    p = argparse.ArgumentParser(description="PyTorch peer of nvcnn's synthetic training benchmark")
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, required=True)
    p.add_argument("--precision", default="fp32")
    p.add_argument("--steps", type=int, default=50, help="timed steps")
    p.add_argument("--warmup", type=int, default=10, help="untimed steps before them")
    p.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    p.add_argument("--threads", type=int, default=0, help="CPU threads (torch.set_num_threads); 0: torch's default")
    p.add_argument("--memory_format", default="auto", choices=("auto", "nchw", "channels_last"),
                   help="auto: channels_last for fp16/bf16 on CUDA, NCHW otherwise")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (compiled during the warm-up)")
    a = p.parse_args()
    if a.model not in MODELS:
        die("unknown model '%s' (one of: %s)" % (a.model, ", ".join(MODELS)))
    if a.precision not in PRECISIONS:
        die("unknown precision '%s' (one of: %s)" % (a.precision, ", ".join(PRECISIONS)))
    if a.batch < 1 or a.steps < 1 or a.warmup < 0:
        die("--batch and --steps must be >= 1, --warmup >= 0")
    if a.compile and a.warmup < 1:
        die("--compile needs --warmup of 1 or more (the compilation runs in the warm-up, untimed)")
    return a


def build_model(name):
    import torchvision.models as tvm
    if name == "lenet":
        import torch.nn as nn
        return nn.Sequential(
            nn.Conv2d(3, 32, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(64 * 7 * 7, 512), nn.ReLU(), nn.Linear(512, NUM_CLASSES)), 28
    if name == "googlenet":
        return tvm.googlenet(weights=None, num_classes=NUM_CLASSES, aux_logits=False, init_weights=True), 224
    if name in ("inception3", "inception_v3"):
        return tvm.inception_v3(weights=None, num_classes=NUM_CLASSES, aux_logits=False, init_weights=True), 299
    return getattr(tvm, name)(weights=None, num_classes=NUM_CLASSES), 224


def default_lr(name, batch):
    """nvcnn's per-model default learning rates (they do not change the speed; kept for likeness)."""
    if name.startswith("resnet"):
        return 0.1 * batch / 256
    if name.startswith("vgg"):
        return 0.02
    return {"alexnet": 0.03, "googlenet": 0.04, "inception3": 0.2, "inception_v3": 0.2, "lenet": 0.001}[name]


def main():
    a = parse_args()
    import torch

    if a.threads > 0:
        torch.set_num_threads(a.threads)

    try:
        dev = torch.device(a.device)
    except (RuntimeError, ValueError) as e:
        die("bad --device '%s': %s" % (a.device, e))
    cuda = dev.type == "cuda"
    if cuda and not torch.cuda.is_available():
        die("--device %s but torch sees no CUDA device (torch %s)" % (a.device, torch.__version__))
    if dev.type not in ("cuda", "cpu"):
        die("--device must be cuda, cuda:N or cpu")
    if cuda:
        # "cuda" names no index: torch.cuda.set_device and friends want one (the current device)
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        torch.cuda.set_device(dev)
        torch.backends.cudnn.benchmark = True
        if a.precision in ("fp32", "tf32"):
            tf32 = a.precision == "tf32"
            torch.backends.cuda.matmul.allow_tf32 = tf32
            torch.backends.cudnn.allow_tf32 = tf32

    half = a.precision in ("fp16", "bf16")
    if not half:
        amp_dtype = None
    elif cuda and a.precision == "fp16":
        amp_dtype = torch.float16
    else:
        amp_dtype = torch.bfloat16  # bf16 anywhere; fp16 on cpu too
    channels_last = (half and cuda) if a.memory_format == "auto" else a.memory_format == "channels_last"
    use_scaler = cuda and a.precision == "fp16"

    model, size = build_model(a.model)
    model = model.to(dev)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    model.train()
    fwd = torch.compile(model) if a.compile else model
    opt = torch.optim.SGD(model.parameters(), lr=default_lr(a.model, a.batch), momentum=0.9,
                          nesterov=True, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    if use_scaler:
        try:
            scaler = torch.amp.GradScaler("cuda")
        except (AttributeError, TypeError):  # torch < 2.3
            scaler = torch.cuda.amp.GradScaler()
    else:
        scaler = None

    x = torch.randn(a.batch, 3, size, size, device=dev)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, NUM_CLASSES, (a.batch,), device=dev)

    def autocast():
        if amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=dev.type, dtype=amp_dtype)

    def step():
        opt.zero_grad(set_to_none=True)
        with autocast():
            loss = loss_fn(fwd(x), y)
        if scaler is not None:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
        else:
            loss.backward()
            opt.step()

    def sync():
        if cuda:
            torch.cuda.synchronize(dev)

    if cuda:
        sync()
        torch.cuda.reset_peak_memory_stats(dev)
    tw = time.perf_counter()
    for _ in range(a.warmup):
        step()
    sync()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        step()
    sync()
    elapsed = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated(dev) / 2**30 if cuda else 0.0
    print("peer: model=%s batch=%d precision=%s memory_format=%s images_per_sec=%.1f peak_mem_gib=%.2f%s"
          % (a.model, a.batch, a.precision, "channels_last" if channels_last else "nchw",
             a.batch * a.steps / elapsed, peak, " compile_s=%.1f" % (t0 - tw) if a.compile else ""))


if __name__ == "__main__":
    main()
