#!/usr/bin/env bash
# scripts/mutate_gpu.sh [OUTDIR]: shows that the GPU tests, run on the emulated CUDA device, catch
# bugs. It copies the working tree to OUTDIR/tree (default /tmp/nvcnn-mutants), builds the
# emulated device there (make GPU_EMU=1), checks that the GPU tests pass on the unchanged code,
# then plants one defect at a time in the GPU backend (exact text replacements, each of which must
# match once), rebuilds, and runs the GPU tests in a fixed order until one fails. The table it prints
# (and writes to OUTDIR/mutants.md): each defect, the file, and the first test that caught it,
# "NOT CAUGHT", or "does not build" (a defect that must be rewritten: the compiler is not a test).
# Exit status: 0 when every defect was caught, 1 otherwise, 2 when the unchanged code does not
# build, fails a test, or passes none for one of the names (a name that matches no test, or tests
# that all skip, would count every defect as caught by nothing).
#   MUTANTS="name1 name2" runs some of them; TESTS="..." changes the tests (substrings, in order).
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-/tmp/nvcnn-mutants}
jobs=${JOBS:-$(nproc)}
tree="$out/tree"
mkdir -p "$out"
rm -rf "$tree"
mkdir -p "$tree"
# the working tree as it is (uncommitted changes included), without builds or data
tar -C . --exclude='./build*' --exclude=./.git --exclude=./data/fashion-mnist --exclude=./nvcnn --exclude=./nvcnn-mkrecords -cf - . |
  tar -C "$tree" -xf -
[ -d data/fashion-mnist ] && ln -s "$PWD/data/fashion-mnist" "$tree/data/fashion-mnist"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# The GPU tests, cheapest first: each mutant stops at the first that fails.
TESTS=${TESTS:-"gpu_conv_matches_cpu gpu_conv_finds gpu_bn_pool_reshape gpu_activations gpu_grouped gpu_tf32_fp16_bf16 gpu_dropout
gpu_nhwc_parameters gpu_nhwc_padding gpu_fused_block gpu_fusion_add gpu_layers_match_cpu_in_the_other_layout
gpu_staged gpu_deterministic gpu_padded gpu_parameters_out gpu_larc_is gpu_bias_gradient gpu_training_steps_match_cpu gpu_larc_steps
gpu_fp16_dynamic gpu_step_ gpu_graph_ dist_gpu_ranks dist_gpu_nvcnn gpu_multi_stream_tests gpu_layers_match_cpu_with gpu_every_model_trains_fp32
gpu_every_model_trains_fp16 gpu_every_model_trains_bf16"}

# name|file|text|replacement[|text|replacement ...]   (\n in a text or replacement: a newline); no '|' in either
read -r -d '' DEFECTS <<'EOF'
find_too_few|src/cuda/conv.cu|CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(g->dnn, in, p->w, p->cd[dir], p->y, CONVALGO_MAX, &got, r));|CUDNN_CHECK(cudnnFindConvolutionForwardAlgorithm(g->dnn, in, p->w, p->cd[dir], p->y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &got, r));
index_off_by_one|src/cuda/concat.cu|j = s * chw_out + off + r;|j = s * chw_out + off + r + 1;
missing_stream_wait|src/cuda/transfer.cu|    CUDA_CHECK(cudaStreamWaitEvent(g->s, g->staged[slot], 0));\n|
missing_copy_wait|src/cuda/transfer.cu|    CUDA_CHECK(cudaStreamWaitEvent(g->xs, g->consumed[slot], 0));\n|
missing_nccl_wait|src/cuda/allreduce.cu|    CUDA_CHECK(cudaStreamWaitEvent(g->s, g->ev_done, 0));|
arena_overlap|src/cuda/gpunet.cu|        off += align256(shape_count(net->node[i].shape) * g->esize);|        off += i == 2 ? 0 : align256(shape_count(net->node[i].shape) * g->esize);
descriptor_dimension|src/cuda/conv.cu|c->cout, c->cin / c->groups, c->kh, c->kw)|c->cout, c->cin / c->groups, c->kw, c->kh)
descriptor_stride|src/cuda/conv.cu|padded ? 0 : c->pl, c->sh, c->sw, 1, 1|padded ? 0 : c->pl, c->sh, c->sh, 1, 1
beta_one|src/cuda/conv.cu|(cudnnConvolutionFwdAlgo_t)p->algo[CONV_FWD], g->ws, g->ws_bytes, &zero,|(cudnnConvolutionFwdAlgo_t)p->algo[CONV_FWD], g->ws, g->ws_bytes, &one,
half_cast|src/cuda/transfer.cu|static void host_to_storage(const GpuNet *g, const float *src, void *dst, size_t n) {\n    if (g->prec == PREC_FP16)|static void host_to_storage(const GpuNet *g, const float *src, void *dst, size_t n) {\n    if (g->prec != PREC_FP32)
bf16_from_float|src/cuda/gpunet_internal.h|return __float2bfloat16_rn(v); }|return __float2bfloat16_rn(v * 1.01f); }
missing_grad_memset|src/cuda/gpunet.cu|    CUDA_CHECK(cudaMemsetAsync(g->grads, 0, g->P * sizeof(float), g->s));\n|
nccl_count|src/cuda/allreduce.cu|g->bhi[g->next] - g->blo[g->next], ncclFloat|g->bhi[g->next] - g->blo[g->next] - 1, ncclFloat
not_unscaled|src/cuda/optim.cu|    return use_state && st->scale != 1.0f ? (float)(1.0 / (double)st->scale) : 1.0f;|    return use_state && st->scale != 1.0f ? 1.0f : 1.0f;
bias_channel|src/cuda/bias.cu|        int ch = (int)(plane % c);|        int ch = (int)(plane % c) % (c > 1 ? c - 1 : 1);
syncthreads_missing|src/cuda/gpunet_internal.h|    for (int j = 0; j < N; j++) sh[j][threadIdx.x] = v[j];\n    __syncthreads();|    for (int j = 0; j < N; j++) sh[j][threadIdx.x] = v[j];
xent_broadcast_unsynced|src/cuda/softmax_xent.cu|    if (threadIdx.x == 0) bcast = m;\n    __syncthreads();|    if (threadIdx.x == 0) bcast = m;
dxpad_reserved|src/cuda/conv.cu|*scratch = (l->in[0] == net->input ? 1 : 2) *|*scratch = 2 *
bias_grid_y|src/cuda/bias.cu|const int ch = blockIdx.x, s = blockIdx.y, S = gridDim.y;|const int ch = blockIdx.y, s = blockIdx.x, S = gridDim.x;|dim3((unsigned)c, (unsigned)S)|dim3((unsigned)S, (unsigned)c)
layout_unchecked|src/cuda/gpunet.cu|        if (l->nparam > 0 && l->param0 != next)\n            die(|        if (0)\n            die(
larc_per_tensor|src/cuda/optim.cu|            LAUNCH(k_larc_norms, (unsigned)g->larc_nchunk, GPU_THREADS, 0, g->s, st, use_state, chunks, g->params, g->grads,\n                   (float)c->weight_decay, g->larc_part);\n            LAUNCH(k_larc_factors, (unsigned)((n->nparam + GPU_THREADS - 1) / GPU_THREADS), GPU_THREADS, 0, g->s, st, use_state,\n                   g->larc_first, n->nparam, g->larc_part, g->larc_factor, c->larc_eta, c->larc_scale);\n            LAUNCH(k_larc_sgd<T>, (unsigned)g->larc_nchunk, GPU_THREADS, 0, g->s, st, use_state, chunks, g->params, g->grads, g->velocity,\n                   wh, g->larc_factor, (float)c->momentum, c->nesterov);|            for (int t = 0, k0 = 0; t < n->nparam; t++) {\n                const int nc = (int)((n->param[t].count + LARC_CHUNK - 1) / LARC_CHUNK);\n                LAUNCH(k_larc_norms, (unsigned)nc, GPU_THREADS, 0, g->s, st, use_state, chunks + k0, g->params, g->grads, (float)c->weight_decay, g->larc_part + 2 * k0);\n                LAUNCH(k_larc_factors, 1, GPU_THREADS, 0, g->s, st, use_state, g->larc_first + t, 1, g->larc_part, g->larc_factor + t, c->larc_eta, c->larc_scale);\n                LAUNCH(k_larc_sgd<T>, (unsigned)nc, GPU_THREADS, 0, g->s, st, use_state, chunks + k0, g->params, g->grads, g->velocity, wh, g->larc_factor, (float)c->momentum, c->nesterov);\n                k0 += nc;\n            }
nondet_accepted|src/cuda/conv.cu|convalgo_order(found, dir, c->kh, c->kw, g->prec, g->deterministic, limit, idx, &over)|convalgo_order(found, dir, c->kh, c->kw, g->prec, 0, limit, idx, &over)
bn_biased_running_var|src/cuda/bn.cu|factor * (float)(m > 1 ? var * m / (m - 1) : var)|factor * (float)var
fp16_unscale_10pc|src/cuda/optim.cu|    return use_state && st->scale != 1.0f ? (float)(1.0 / (double)st->scale) : 1.0f;|    return use_state && st->scale != 1.0f ? (float)(1.1 / (double)st->scale) : 1.0f;
fp32_takes_tensor_ops|src/convalgo.c|        return math == CONVALGO_MATH_FMA; /* DEFAULT|        return 1; /* DEFAULT|int convalgo_desc_math(int precision, int math) { return precision == PREC_FP32 ? CONVALGO_MATH_FMA : math; }|int convalgo_desc_math(int precision, int math) { (void)precision; return math; }
fp32_inaccurate_winograd|src/convalgo.c|    return algo != nonfused;|    return nonfused >= 0;
bias_vec_lane_dropped|src/cuda/bias.cu|            for (int j = 0; j < L; j++) sum += sh[|            for (int j = 1; j < L; j++) sum += sh[
bias_fwd_nhwc_shifted|src/cuda/bias.cu|plane = hw == 1 ? i : i / hw|plane = hw == 1 ? i + 1 : i / hw
pool_at_pixel_shifted|src/cuda/pool.cu|        a.pix = (int)(i % hw);|        a.pix = (int)((i + 1) % hw);
bn_walk_channel_shifted|src/cuda/gpunet_internal.h|            ch = (int)(q % (unsigned)c);|            ch = (int)((q + 1) % (unsigned)c);
pad_at_row_shifted|src/cuda/conv.cu|    a.yy = (int)(rw % (I)h);|    a.yy = (int)((rw + 1) % (I)h);
concat_vec_off_by_one|src/cuda/concat.cu|        const size_t j = (size_t)s * chw_out + off + r;|        const size_t j = (size_t)s * chw_out + off + r + (s > 0);
pad_vec_edge|src/cuda/conv.cu|        if (sy >= 0 && sy < h && sx >= 0 && sx < w)\n            gpu_load16(a, x,|        if (sy >= 0 && sy < h && sx >= 0 && sx <= w)\n            gpu_load16(a, x,
unpad_vec_shifted|src/cuda/conv.cu|            gpu_load16(a, dxp, (((size_t)img * hp + py) * wp + px) * G + gv);|            gpu_load16(a, dxp, (((size_t)img * hp + py) * wp + px - (px > 0)) * G + gv);
deterministic_by_find|src/cuda/conv.cu|    const int h = g->deterministic;|    const int h = 0;
nccl_before_backward|src/cuda/gpunet.cu|        enter(NULL, -1, NULL);\n        if (l->nparam > 0 && g->comm) gpu_allreduce_ready(g, g->poff[l->param0], g->lev[i]);\n|        enter(NULL, -1, NULL);\n|        g->impl[i]->backward(g, l, i);\n|        if (l->nparam > 0 && g->comm) gpu_allreduce_ready(g, g->poff[l->param0], g->lev[i]);\n        g->impl[i]->backward(g, l, i);\n
nccl_no_wait|src/cuda/allreduce.cu|    CUDA_CHECK(cudaStreamWaitEvent(g->cs, ready, 0));\n|
read_before_write|src/cuda/act.cu|dx[i] = from_f<T>(acc ? to_f(dx[i]) + d : d);|dx[i] = from_f<T>(to_f(dx[i]) * (float)acc + d);|        if (acc) gpu_load16(o, dx, v);|        gpu_load16(o, dx, v);|            o[k] = from_f<T>(acc ? to_f(o[k]) + d : d);|            o[k] = from_f<T>(to_f(o[k]) * (float)acc + d);
skip_ignored|src/cuda/optim.cu|__global__ void k_sgd(const StepState *st, int use_state, float *w, float *gr, float *v, T *wh, size_t n, float m, int nest, float wd) {\n    if (use_state && st->bad) return;|__global__ void k_sgd(const StepState *st, int use_state, float *w, float *gr, float *v, T *wh, size_t n, float m, int nest, float wd) {
graph_stale_lr|src/cuda/gpunet.cu|    gpu_step_lr(g, lr);\n    CUDA_CHECK(cudaGraphLaunch(g->graph, g->s));|    if (!g->graph) gpu_step_lr(g, lr);\n    CUDA_CHECK(cudaGraphLaunch(g->graph, g->s));
loss_read_late|src/cuda/optim.cu|const int slot = (int)(q % GPUNET_RESULTS);|const int slot = (int)((q + GPUNET_RESULTS - 1) % GPUNET_RESULTS);
scale_growth_1000|src/cuda/optim.cu|if (dynamic && st->good % 2000 == 0|if (dynamic && st->good % 1000 == 0
bn_vec_row_dropped|src/cuda/bn.cu|        for (int r = 0; r < R; r++) sum += (double)sh[(2 * r + which) * CT + cl];|        for (int r = 1; r < R; r++) sum += (double)sh[(2 * r + which) * CT + cl];
bn_vec_channels_by_block|src/cuda/bn.cu|    const int ch0 = (int)(t0 % (size_t)G) * V;\n    float mu[V], is[V], ga[V], be[V];|    const int ch0 = (int)(blockIdx.x % (size_t)G) * V;\n    float mu[V], is[V], ga[V], be[V];
bn_vec_mean_dy_dropped|src/cuda/bn.cu|        ma[k] = means[2 * (ch0 + k)];|        ma[k] = 0;
bn_vec_grid_not_whole_pixels|src/cuda/bn.cu|    return (unsigned)((b + q - 1) / q * q);|    return (unsigned)b;
pool_vec_routes_to_neighbour|src/cuda/pool.cu|                        if (a[k] == self) s[k] += to_f(g[k]);|                        if (a[k] == self + 1) s[k] += to_f(g[k]);
misaligned_vector|src/cuda/bias.cu|    size_t head = ((16 - ((uintptr_t)x & 15)) & 15) / sizeof(T);|    size_t head = 0;
padding_not_zero|src/cuda/conv.cu|dst[i] = ch < c ? src[(size_t)r * c + ch] : from_f<T>(0.0f);|dst[i] = ch < c ? src[(size_t)r * c + ch] : src[(size_t)r * c];
fused_drops_shortcut_grad|src/cuda/bn.cu|    if (dzv) *dzv = from_f<T>(acc_z ? to_f(*dzv) + d : d);|    if (dzv) *dzv = from_f<T>(acc_z ? to_f(*dzv) : 0.0f);
bn_tile_row_dropped|src/cuda/bn.cu|        for (int k = 0; k < BN_TR; k++) {|        for (int k = 1; k < BN_TR; k++) {
bn_nchw_walk_wraps_late|src/cuda/bn.cu|        if (px >= hw) {|        if (px > hw) {
bn_nhwc_channel_stride|src/cuda/bn.cu|    for (unsigned r = r0 + ty; r < rend; r += BN_TR) t.add((size_t)r * c + chc, a, b);|    for (unsigned r = r0 + ty; r < rend; r += BN_TR) t.add((size_t)r * BN_TC + chc, a, b);
nhwc_filter_not_permuted|src/cuda/transfer.cu|        host_layout(w, t, s, to_krsc);|        memcpy(t, w, count * sizeof(float));
EOF

selected=${MUTANTS:-$(cut -d'|' -f1 <<<"$DEFECTS" | tr '\n' ' ')}

build() { (cd "$tree" && make --no-print-directory -j"$jobs" GPU_EMU=1 emu >"$out/build.log" 2>&1); }

# the runner's summary line for the tests named $1 ("N passed, N failed, N skipped", or what came instead)
summary() {
  (cd "$tree/build-emu/root" && NVCNN_BUILD="$tree/build-emu" timeout -k 5 900 ../run_tests "$1" </dev/null 2>&1) |
    tee -a "$out/run.log" | tail -n 1
}

# runs the tests in order; prints the first that fails, or nothing
first_failure() {
  local t
  for t in $TESTS; do
    if ! grep -q ' 0 failed' <<<"$(summary "$t")"; then
      echo "$t"
      return
    fi
  done
}

# the unchanged code: every name must select tests that pass, none failing; prints what is wrong
baseline() {
  local t line
  for t in $TESTS; do
    line=$(summary "$t")
    if ! [[ "$line" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed,\ ([0-9]+)\ skipped$ ]]; then
      echo "$t: the runner ended with '$line'"
    elif [ "${BASH_REMATCH[2]}" != 0 ]; then
      echo "$t fails"
    elif [ "${BASH_REMATCH[1]}" = 0 ]; then
      echo "$t: no test passed ($line: a name that matches no test, or tests that skip)"
    elif [ "${BASH_REMATCH[3]}" != 0 ]; then
      echo "mutate_gpu: note: $t: $line" >&2
    fi
  done
}

# in FILE, replace each TEXT with its REPL (pairs separated by |, \n for newlines), each exactly once
plant() {
  python3 - "$tree/$1" "$2" <<'PY'
import sys
path, pairs = sys.argv[1], sys.argv[2].replace('\\n', '\n').split('|')
if len(pairs) % 2:
    sys.exit(f"{path}: a text without its replacement")
s = open(path).read()
for old, new in zip(pairs[0::2], pairs[1::2]):
    n = s.count(old)
    if n != 1:
        sys.exit(f"{path}: the text to replace occurs {n} times")
    s = s.replace(old, new)
open(path, 'w').write(s)
PY
}

echo "mutate_gpu: building the emulated device in $tree"
if ! build; then echo "mutate_gpu: the unchanged tree does not build (see $out/build.log)" >&2; exit 2; fi
: >"$out/run.log"
base=$(baseline)
if [ -n "$base" ]; then
  echo "mutate_gpu: the unchanged code (see $out/run.log):" >&2
  echo "$base" | sed 's/^/  /' >&2
  exit 2
fi

table="| defect | file | caught by |
| --- | --- | --- |"
missed=0
# the defects come on fd 3: the tests (mpirun) would read stdin
# (the whole line read as it is: read's field splitting drops a trailing empty replacement)
while IFS= read -r -u 3 line; do
  name=${line%%|*} rest=${line#*|}
  file=${rest%%|*} edits=${rest#*|}
  [[ " $selected " == *" $name "* ]] || continue
  cp "$tree/$file" "$out/saved"
  if ! plant "$file" "$edits"; then
    row="| $name | $file | the defect did not apply (the code changed?) |"
    missed=1
  elif ! build; then
    row="| $name | $file | does not build (see $out/build-$name.log; not a test's catch: rewrite the defect) |"
    missed=1
    cp "$out/build.log" "$out/build-$name.log"
  else
    t=$(first_failure)
    if [ -n "$t" ]; then row="| $name | $file | $t |"; else row="| $name | $file | NOT CAUGHT |"; missed=1; fi
  fi
  cp "$out/saved" "$tree/$file"
  echo "$row"
  table+=$'\n'"$row"
done 3<<<"$DEFECTS"
build
echo "$table" >"$out/mutants.md"
echo "mutate_gpu: table in $out/mutants.md"
exit $missed
