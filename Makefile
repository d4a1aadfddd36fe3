# nvcnn Makefile.
#   make            builds ./nvcnn and ./nvcnn-mkrecords (objects in $(BUILD)/)
#   make run        installs missing packages, builds, trains the embedded default
#   make test       installs missing packages, builds, runs every test
#   make data       converts Debian's dataset-fashion-mnist into data/fashion-mnist/
# Switches: CUDA=0 / CUDA=1, MPI=0 / MPI=1, DNNL=0 / DNNL=1 (default: detected), BUILD=dir, DEBUG=1,
#           ARCH=sm_90 (the GPU architectures: see the CUDA section), CUDA_UNITY=0 / 1 (the .cu files as one
#           nvcc translation unit; default 1 on up to 4 CPUs: see LIB_OBJ),
#           GPU_EMU=1 (the emulated CUDA device, a test instrument: see below and docs/gpu-emulation.md).

# GPU_EMU=1 builds everything again in a folder of its own (build-emu, or build-emu-debug with
# DEBUG=1) with the GPU backend's .cu files compiled as host C++ and linked against the emulated
# CUDA runtime, cuDNN, cuBLAS and NCCL of tests/emu/ instead of NVIDIA's libraries. Its programs
# stay in that folder ($(BUILD)/nvcnn, ...); $(BUILD)/root is a view of the repository whose ./nvcnn
# is the emulated one, where the emulated tests run. The nvcnn at the top is never emulated.
# Parallel by default, on every core (make -j1 builds one file at a time). Only the top-level make
# sets it: the recursive ones (make data, make test) share its job slots.
ifeq ($(MAKELEVEL)$(filter -j%,$(MAKEFLAGS)),0)
  MAKEFLAGS += -j$(shell nproc 2>/dev/null || echo 2)
endif

ifeq ($(GPU_EMU),1)
  BUILD ?= $(if $(filter 1,$(DEBUG)),build-emu-debug,build-emu)
  CUDA := 1
  BINDIR := $(BUILD)/
endif
BUILD ?= build
BINDIR ?=
comma := ,
CC ?= gcc
NVCC ?= $(firstword $(wildcard /usr/local/cuda/bin/nvcc) $(shell command -v nvcc 2>/dev/null))
CUDA_HOME ?= /usr/local/cuda

# ---- detection -------------------------------------------------------------------------------
find_header = $(firstword $(wildcard $(addsuffix /$(1),$(CUDA_HOME)/include /usr/include /usr/include/x86_64-linux-gnu $(CPPFLAGS:-I%=%))))
ifeq ($(origin CUDA),undefined)
  ifneq ($(and $(NVCC),$(call find_header,cudnn.h),$(call find_header,nccl.h)),)
    CUDA := 1
  else
    CUDA := 0
  endif
endif
MPICC_SHOW := $(shell mpicc --showme:compile 2>/dev/null)
ifeq ($(origin MPI),undefined)
  ifneq ($(MPICC_SHOW),)
    MPI := 1
  else
    MPI := 0
  endif
endif

# oneDNN (the fast CPU layers, src/onednn/): the 2.x C API (Debian 12's libdnnl-dev 2.6). Another
# major version builds the reference CPU layers only, with a note; DNNL=0 leaves oneDNN out.
DNNL_H := $(call find_header,oneapi/dnnl/dnnl_version.h)
DNNL_MAJOR := $(if $(DNNL_H),$(shell sed -n 's/^\#define DNNL_VERSION_MAJOR //p' $(DNNL_H)))
ifeq ($(origin DNNL),undefined)
  ifeq ($(DNNL_MAJOR),2)
    DNNL := 1
  else
    DNNL := 0
    ifneq ($(DNNL_MAJOR),)
      $(info note: oneDNN $(DNNL_MAJOR).x found ($(DNNL_H)): nvcnn's oneDNN layers use the 2.x C API; building the reference CPU layers only)
    endif
  endif
endif
ifeq ($(DNNL),1)
  ifneq ($(DNNL_MAJOR),2)
    $(error DNNL=1: nvcnn's oneDNN layers need oneDNN 2.x (dnnl_version.h: $(or $(DNNL_H),not found)); install libdnnl-dev 2.x or build with DNNL=0)
  endif
endif

OPT ?= -O2
ifeq ($(DEBUG),1)
  OPT := -O0 -g -fsanitize=address,undefined
  LDFLAGS += -fsanitize=address,undefined
endif

CFLAGS_BASE := -std=gnu11 $(OPT) -g -Wall -Wextra -fopenmp -march=x86-64-v2 -pthread
CPPFLAGS += -Isrc -Imodels -I$(BUILD)/gen -I/usr/include/x86_64-linux-gnu
# OpenBLAS built on OpenMP shares the OpenMP thread pool of the layers' loops; the pthread build's
# own threads would compete with it for the cores.
BLAS_DIR ?= $(firstword $(wildcard /usr/lib/x86_64-linux-gnu/openblas-openmp))
LDLIBS := $(if $(BLAS_DIR),-L$(BLAS_DIR) -Wl$(comma)-rpath$(comma)$(BLAS_DIR)) -lopenblas -ljpeg -lpng16 -lprotobuf-c -lz -lm -lpthread
ifneq ($(wildcard .deps/usr/lib/x86_64-linux-gnu/libprotobuf-c.a),)
  # the GPU host has no protobuf-c: scripts in shared/gpu-host put Debian's into .deps/
  CPPFLAGS += -I.deps/usr/include
  LDLIBS := $(subst -lprotobuf-c,.deps/usr/lib/x86_64-linux-gnu/libprotobuf-c.a,$(LDLIBS))
endif

ifeq ($(MPI),1)
  CPPFLAGS += -DNVCNN_MPI $(MPICC_SHOW)
  LDLIBS += $(shell mpicc --showme:link 2>/dev/null)
endif

ifeq ($(DNNL),1)
  CPPFLAGS += -DNVCNN_DNNL
  LDLIBS += -ldnnl
endif

CU_SRC :=
EMU_OBJ :=
ifeq ($(CUDA),1)
  CUDA_INC := $(sort $(dir $(call find_header,cuda_runtime.h) $(call find_header,cudnn.h) $(call find_header,nccl.h)))
  CPPFLAGS += -DNVCNN_CUDA $(addprefix -I,$(CUDA_INC))
  CU_SRC := $(wildcard src/cuda/*.cu)
endif
ifeq ($(GPU_EMU),1)
  ifeq ($(and $(call find_header,cuda_runtime.h),$(call find_header,cudnn.h),$(call find_header,cublas_v2.h),$(call find_header,nccl.h)),)
    $(error GPU_EMU=1 compiles the GPU backend against the CUDA toolkit's own headers: cuda_runtime.h, cudnn.h, cublas_v2.h and nccl.h are needed (looked in $(CUDA_HOME)/include and /usr/include))
  endif
  # the emulated device: the toolkit's headers, tests/emu/ instead of NVIDIA's libraries
  CXX ?= g++
  CPPFLAGS += -DNVCNN_GPU_EMU
  EMU_CXXFLAGS := -std=c++17 $(OPT) -g -Wall -Wextra -Wno-unknown-pragmas -fno-strict-aliasing -fopenmp -march=x86-64-v2 -pthread
  EMU_OBJ := $(patsubst %.cc,$(BUILD)/%.o,$(wildcard tests/emu/*.cc))
  # the emulator's self-test kernels (tests/test_emu.c calls them)
  EMU_TEST_OBJ := $(patsubst %.cu,$(BUILD)/%.cu.o,$(wildcard tests/emu/*.cu))
  LDLIBS += -lstdc++ -lrt
else ifeq ($(CUDA),1)
  CUDA_LIBDIRS := $(CUDA_HOME)/lib64 /usr/lib/x86_64-linux-gnu
  LDLIBS += $(addprefix -L,$(CUDA_LIBDIRS)) $(addprefix -Wl$(comma)-rpath$(comma),$(CUDA_LIBDIRS)) \
            -lcudnn -lnccl -lcudart_static -ldl -lrt -lstdc++
  # ARCH: the GPUs to build machine code for: sm_90 (H100, H200; the default), sm_80 (A100),
  # sm_89 (L40S), sm_100 (B200), or several (ARCH="sm_80 sm_90"). The PTX of the last one is
  # embedded as well, so that GPUs newer than all of them still run the binary (the driver
  # compiles that PTX when the program starts).
  ARCH ?= sm_90
  BAD_ARCH := $(shell printf '%s\n' $(ARCH) | grep -Ev '^sm_[0-9]{2,3}[af]?$$')
  ifneq ($(BAD_ARCH)$(if $(strip $(ARCH)),,x),)
    $(error ARCH="$(ARCH)": want one or more of sm_80, sm_89, sm_90, sm_90a, sm_100...)
  endif
  PTX_ARCH := $(patsubst sm_%,compute_%,$(lastword $(ARCH)))
  NVCC_ARCH := $(foreach a,$(ARCH),-gencode=arch=$(patsubst sm_%,compute_%,$(a)),code=$(a)) \
               -gencode=arch=$(PTX_ARCH),code=$(PTX_ARCH)
  # -lineinfo: kernel source lines in compute-sanitizer's and the profilers' reports (no cost
  # in speed)
  NVCCFLAGS ?= -O3 -std=c++17 -lineinfo $(NVCC_ARCH) -Xcompiler -Wall,-Wextra,-fPIC
endif
# ---- sources ---------------------------------------------------------------------------------
PROTO := $(wildcard data/*.proto)
PROTO_C := $(wildcard src/io/proto/*.pb-c.c)
LIB_SRC := $(filter-out src/main.c,$(wildcard src/*.c)) $(wildcard src/layers/*.c) $(wildcard src/onednn/*.c) \
           $(wildcard src/io/*.c) $(PROTO_C) $(wildcard models/*.c)
# EMU_C_FROM=dir (GPU_EMU=1 only): take the library's C objects from the normal build in dir
# instead of compiling them again (no C file of the library depends on GPU_EMU: only src/cuda/
# and the tests do); make test does this.
C_OBJ_DIR := $(if $(and $(filter 1,$(GPU_EMU)),$(EMU_C_FROM)),$(EMU_C_FROM),$(BUILD))
# CUDA_UNITY=1: the GPU backend's .cu files compiled by nvcc (by g++ with GPU_EMU=1) as one
# translation unit that includes them all. nvcc spends about 2 s of its own on every file (the CUDA
# headers read for the host and the device, its front end): on 2 cores the 18 files took 57 CPU
# seconds one by one and take 22 as one. On many cores the files compiled side by side finish
# sooner, and a change to one file recompiles only that one: the default is 1 on machines of up to
# 4 CPUs, 0 on larger ones (the same for `make` and `make test`, which share the objects).
CUDA_UNITY ?= $(if $(filter-out 1 2 3 4,$(shell nproc 2>/dev/null || echo 2)),0,1)
CU_UNITY_OBJ := $(BUILD)/src/cuda/unity.cu.o
CU_OBJ := $(if $(and $(filter 1,$(CUDA_UNITY)),$(CU_SRC)),$(CU_UNITY_OBJ),$(CU_SRC:%.cu=$(BUILD)/%.cu.o))
LIB_OBJ := $(LIB_SRC:%.c=$(C_OBJ_DIR)/%.o) $(CU_OBJ) $(EMU_OBJ)
TEST_SRC := $(wildcard tests/*.c)
# Programs that tests launch under mpirun: tests/mpi/X.c -> $(BUILD)/tests/mpi/X
MPI_TEST_SRC := $(wildcard tests/mpi/*.c)
MPI_TEST_BIN := $(MPI_TEST_SRC:%.c=$(BUILD)/%)
# The runner's own test program: tests that fail on purpose (tests/selftest/), with the runner
SELFTEST_BIN := $(BUILD)/tests/selftest/harness_cases
# TEST_FILES="tests/a.c tests/b.c": a run_tests of those test files only (make test builds the
# sanitizers' one with the files of the tests it runs: gpu_parity_clean_under_sanitizers)
TEST_SUPPORT_SRC := tests/harness.c tests/testutil.c tests/scenario.c
TEST_FILES ?= $(filter-out $(TEST_SUPPORT_SRC),$(TEST_SRC))
TEST_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(TEST_SUPPORT_SRC) $(TEST_FILES))
TOOL_SRC := $(wildcard src/tools/*.c)

BIN := $(BINDIR)nvcnn $(if $(wildcard src/tools/mkrecords.c),$(BINDIR)nvcnn-mkrecords)

.PHONY: all run test check data deps deps-system deps-python clean bench-cpu emu FORCE
all: $(BIN)

$(BUILD)/%.o: %.c $(BUILD)/cc.flags
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(CFLAGS_BASE) $(CFLAGS) -MMD -MP -c $< -o $@

# the C and C++ objects are rebuilt when their flags change: what the Makefile found installed
# (MPI, oneDNN, CUDA: a `make` before the packages were installed built objects without them,
# which the next `make` kept beside objects built with them), DEBUG, CFLAGS
# (`make cc-flags` prints what the stamp holds for this command line). A file's own flags below
# are `private`, so that they stay out of the stamp (a prerequisite inherits a target's variables)
CC_FLAGS_TEXT = $(CC) $(CXX) $(CPPFLAGS) $(CFLAGS_BASE) $(CFLAGS) $(EMU_CXXFLAGS)
$(BUILD)/cc.flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(CC_FLAGS_TEXT)' | cmp -s - $@ || echo '$(CC_FLAGS_TEXT)' > $@
.PHONY: cc-flags
cc-flags:
	@echo '$(CC_FLAGS_TEXT)'

# the per-pixel image loops are hot in the decode workers: let the compiler unroll them
$(BUILD)/src/io/augment.o: private CFLAGS_BASE += -O3
# the add's AVX-512 loops round as its plain ones and the reference's do: no fused multiply-adds
# (GCC; clang builds its OpenMP loops of target("avx512f") functions without AVX-512: plain ones)
$(BUILD)/src/onednn/add.o: private CFLAGS_BASE += -ffp-contract=off

# the CUDA objects are rebuilt when the nvcc flags change (make ARCH=sm_80 after a default build)
$(BUILD)/nvcc.flags: FORCE
	@mkdir -p $(BUILD)
	@echo '$(NVCC) $(NVCCFLAGS)' | cmp -s - $@ || echo '$(NVCC) $(NVCCFLAGS)' > $@

ifeq ($(GPU_EMU),1)
# The kernels' __shared__ arrays are static locals (tests/emu/device.h). GCC puts those of
# templates in a section per variable (.bss._ZZ...), and -fdata-sections those of other
# functions too; renamed emu_shared, they end up in one section of the program that the emulator
# refills with its poison pattern before each block.
# (Under DEBUG=1, AddressSanitizer's redzones between globals would break that section into pieces:
# --param asan-globals=0 leaves them out for these objects.) Outside DEBUG=1 the kernels carry line
# tables only (-g1: file, line and function in a backtrace, no variables), which halves their time
# to compile at -O2; EMU_KERNEL_G=-g gives a debugger their variables.
EMU_KERNEL_G ?= -g1
emu_cu = $(CXX) -x c++ $(CPPFLAGS) -I. -Itests $(EMU_CXXFLAGS) $(if $(filter 1,$(DEBUG)),--param asan-globals=0,$(EMU_KERNEL_G)) -fdata-sections -MMD -MP -MF $(@:.o=.d) -MT $@ -c $(1) -o $@.tmp && \
  objcopy $$(readelf -SW $@.tmp | sed -n 's/.*\] \(\.bss\._ZZ[^ ]*\) .*/--rename-section \1=emu_shared/p') $@.tmp $@ && rm -f $@.tmp
$(BUILD)/%.cu.o: %.cu $(BUILD)/cc.flags
	@mkdir -p $(dir $@)
	$(call emu_cu,$<)
# (CUDA_UNITY=1) the file that includes every .cu, then its object: 20 CPU seconds against about 30
# a file at a time (the sanitizers' build: 33 against about 45)
$(CU_UNITY_OBJ): $(CU_SRC) $(BUILD)/cc.flags
	@mkdir -p $(dir $@)
	@printf '#include "%s"\n' $(CU_SRC) > $(@:.o=)
	$(call emu_cu,$(@:.o=))

# the emulator's maths loops want vectorising: -O3. Under DEBUG=1 the sanitizers are there for the
# GPU backend's kernels (at -O0) and the rest of nvcnn: the emulator is compiled at -O2 without
# them (instrumented, its runtime, cuDNN, cuBLAS and NCCL took four times as long to compile, 45 of
# the sanitizer build's 190 CPU seconds), except the kernel runner, whose fibers must tell
# AddressSanitizer of every stack switch. The instrumented code's checks hold all the same: the
# kernels and nvcnn's host code are instrumented, and the sanitizer runtime intercepts the
# emulator's malloc, memcpy and memset like anyone's.
EMU_SAN_OBJ := $(BUILD)/tests/emu/kernel.o
$(BUILD)/tests/emu/%.o: tests/emu/%.cc $(BUILD)/cc.flags
	@mkdir -p $(dir $@)
	$(CXX) $(CPPFLAGS) $(if $(filter 1,$(DEBUG)),$(if $(filter $@,$(EMU_SAN_OBJ)),$(EMU_CXXFLAGS),$(filter-out -O0 -fsanitize=%,$(EMU_CXXFLAGS))) -O2,$(EMU_CXXFLAGS) -O3) -MMD -MP -c $< -o $@

# the repository as the emulated tests see it: ./nvcnn and ./nvcnn-mkrecords are the emulated ones
EMU_ROOT := $(BUILD)/root
$(EMU_ROOT):
	@mkdir -p $@
	@for f in data scripts tests docs models src README.md Makefile; do ln -sfn ../../$$f $@/$$f; done
	@ln -sfn ../nvcnn $@/nvcnn && ln -sfn ../nvcnn-mkrecords $@/nvcnn-mkrecords
else
$(BUILD)/%.cu.o: %.cu $(BUILD)/nvcc.flags
	@mkdir -p $(dir $@)
	$(NVCC) $(filter -I% -D%,$(CPPFLAGS)) $(NVCCFLAGS) -c $< -o $@
# (CUDA_UNITY=1) the file that includes every .cu, then its object
$(CU_UNITY_OBJ): $(CU_SRC) $(wildcard src/cuda/*.h src/*.h src/layers/*.h) $(BUILD)/nvcc.flags
	@mkdir -p $(dir $@)
	@printf '#include "%s"\n' $(CU_SRC) > $(@:.o=)
	$(NVCC) -I. $(filter -I% -D%,$(CPPFLAGS)) $(NVCCFLAGS) -c $(@:.o=) -o $@
endif

$(BUILD)/libnvcnn.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BINDIR)nvcnn: $(BUILD)/src/main.o $(BUILD)/libnvcnn.a
	$(CC) $(CFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BINDIR)nvcnn-mkrecords: $(BUILD)/src/tools/mkrecords.o $(BUILD)/libnvcnn.a
	$(CC) $(CFLAGS_BASE) $(LDFLAGS) -o $@ $^ $(LDLIBS)

RUN_TESTS_OBJ := $(TEST_OBJ) $(if $(filter tests/test_emu.c,$(TEST_FILES)),$(EMU_TEST_OBJ))
# relinked when the list of test files changes (TEST_FILES)
$(BUILD)/tests.list: FORCE
	@mkdir -p $(BUILD)
	@echo '$(RUN_TESTS_OBJ)' | cmp -s - $@ || echo '$(RUN_TESTS_OBJ)' > $@
$(BUILD)/run_tests: $(RUN_TESTS_OBJ) $(BUILD)/libnvcnn.a $(BUILD)/tests.list
	$(CC) $(CFLAGS_BASE) $(LDFLAGS) -o $@ $(filter-out %.list,$^) $(LDLIBS)

$(BUILD)/tests/mpi/%: tests/mpi/%.c $(BUILD)/libnvcnn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS_BASE) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/libnvcnn.a $(LDLIBS)

$(SELFTEST_BIN): tests/selftest/harness_cases.c tests/harness.c tests/harness.h $(BUILD)/libnvcnn.a
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itests $(CFLAGS_BASE) $(CFLAGS) $(LDFLAGS) -o $@ tests/selftest/harness_cases.c tests/harness.c $(BUILD)/libnvcnn.a $(LDLIBS)

deps: deps-system deps-python
# the Debian packages (what the builds and the data need), then the tests' Python packages
deps-system:
	@bash scripts/install-deps.sh system
deps-python: deps-system
	@bash scripts/install-deps.sh python

# Regenerates the committed protobuf-c sources (needs protoc-c).
proto:
	@mkdir -p src/io/proto
	protoc-c --proto_path=data --c_out=src/io/proto $(notdir $(PROTO))

data: deps-system
	@$(MAKE) --no-print-directory all
	@bash scripts/make-data.sh

run: data
	@bash scripts/run-default.sh

# Where the CUDA toolkit's headers are, make test also builds the emulated device (EMU_BUILD, and
# EMU_DEBUG_BUILD under the sanitizers) and the runner hands every test that finds no GPU to it
# (tests/harness.c). The three builds are targets of their own so that the sanitizers' build,
# which needs nothing of the others, shares the job slots with them instead of waiting for them;
# so do the data's conversion and the tests' Python packages (pip's download). The runner runs as many tests at once as there are
# CPUs (NVCNN_TEST_JOBS=N or make test TESTS=--jobs=N to choose).
EMU_BUILD ?= build-emu
EMU_DEBUG_BUILD ?= build-emu-debug
# the files of the tests that gpu_parity_clean_under_sanitizers runs (tests/test_gpu.c)
SANITIZER_TEST_FILES := tests/test_gpu.c tests/test_onednn.c tests/test_pool.c
.PHONY: test-build test-emu test-emu-debug test-data
test-build: deps-system
	@$(MAKE) --no-print-directory all $(BUILD)/run_tests $(MPI_TEST_BIN) $(SELFTEST_BIN)
# the data's conversion (one core, about 15 s) beside the emulated build's compiles
test-data: test-build
	@bash scripts/make-data.sh
test-emu: test-build
	@$(MAKE) --no-print-directory GPU_EMU=1 BUILD=$(EMU_BUILD) EMU_C_FROM=$(BUILD) emu
test-emu-debug: deps-system
	@$(MAKE) --no-print-directory GPU_EMU=1 DEBUG=1 BUILD=$(EMU_DEBUG_BUILD) TEST_FILES="$(SANITIZER_TEST_FILES)" \
	  $(EMU_DEBUG_BUILD)/run_tests $(EMU_DEBUG_BUILD)/root
ifeq ($(CUDA)$(GPU_EMU),1)
test: test-build test-emu test-emu-debug deps-python test-data
	@NVCNN_BUILD=$(BUILD) NVCNN_EMU=$(EMU_BUILD) NVCNN_EMU_DEBUG=$(abspath $(EMU_DEBUG_BUILD)) $(BUILD)/run_tests $(TESTS)
else
test: test-build deps-python test-data
	@NVCNN_BUILD=$(BUILD) $(BUILD)/run_tests $(TESTS)
endif

# make GPU_EMU=1 emu: the emulated build's programs, tests and its view of the repository
emu: all $(BUILD)/run_tests $(MPI_TEST_BIN) $(SELFTEST_BIN) $(if $(EMU_ROOT),$(EMU_ROOT))

check: test

# the CPU bf16 tests on an emulated AVX-512 CPU (scripts/avx512_guest.sh: Bochs's Skylake-X), for
# machines whose CPU has no bf16 for oneDNN (make test checks the refusal there); 5 to 10 minutes
BF16_TESTS ?= onednn_bf16_layers_match_fp32_reference onednn_bf16_training_steps_match_fp32_reference \
	cli_bf16_on_cpu_names_the_instruction_set
.PHONY: test-bf16-emulated
test-bf16-emulated: test-build
	@bash scripts/avx512_guest.sh --timeout 3000 --file $(CURDIR)/nvcnn --cwd $(CURDIR) --env NVCNN_BUILD=$(BUILD) -- \
	  $(CURDIR)/$(BUILD)/run_tests $(BF16_TESTS)

bench-cpu: all
	@bash scripts/bench_cpu.sh

clean:
	rm -rf $(BUILD) $(EMU_BUILD) $(EMU_DEBUG_BUILD) nvcnn nvcnn-mkrecords

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/src/main.d $(CU_SRC:%.cu=$(BUILD)/%.cu.d) $(EMU_TEST_OBJ:.o=.d)
