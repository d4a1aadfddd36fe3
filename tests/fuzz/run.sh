#!/usr/bin/env bash
# Builds the libFuzzer target (clang, AddressSanitizer + UBSan) and runs it for SECONDS (default
# 20) from the seed corpus; exits non-zero if it finds a crash, a leak or undefined behaviour.
# Usage: tests/fuzz/run.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-20}
out=${2:-build}/fuzz
mkdir -p "$out/corpus"
command -v clang >/dev/null || { echo "fuzz: clang is not installed"; exit 77; }
cp -n tests/fuzz/corpus/* data/fixtures/tf-examples.tfrecord data/fixtures/img_420.jpg data/fixtures/img_gray.png \
      data/fixtures/img_cmyk.jpg "$out/corpus/" 2>/dev/null || true
srcs="tests/fuzz/fuzz_records.c src/io/tfrecord.c src/io/example.c src/io/jpeg.c src/io/augment.c src/ckpt.c
      src/net.c src/builder.c src/util.c src/layers/*.c src/io/proto/*.pb-c.c"
if [ ! -x "$out/fuzz_records" ] || [ -n "$(find $srcs src/*.h src/io/*.h -newer "$out/fuzz_records" 2>/dev/null)" ]; then
  clang -std=gnu11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fopenmp \
    -Isrc -Imodels -I/usr/include/x86_64-linux-gnu $srcs -o "$out/fuzz_records" \
    -lopenblas -ljpeg -lpng16 -lprotobuf-c -lz -lm -lpthread 2>&1 | grep -v "warning:" || true
fi
[ -x "$out/fuzz_records" ] || { echo "fuzz: build failed"; exit 1; }
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
"$out/fuzz_records" -max_total_time="$secs" -rss_limit_mb=2048 -max_len=65536 -timeout=10 \
  -artifact_prefix="$out/" "$out/corpus" >"$out/fuzz.log" 2>&1 || {
  tail -40 "$out/fuzz.log"; echo "fuzz: FAILED (log: $out/fuzz.log)"; exit 1; }
grep -E "^Done|#[0-9]+.*DONE" "$out/fuzz.log" | tail -1 || true
echo "fuzz: no crash in ${secs}s"
