# make        : install what is missing (the package, its pinned build tools) and build the code objects
# make test   : the above plus the test-only extras, then the test suite (CPU only: the emulator
#               executes the gfx950 binary; GPU tests are marked and deselected)
PYTHON ?= python3
BUILD  := build
HSACO  := $(BUILD)/fp8_mqa_logits.gfx950.hsaco
HSACO942 := $(BUILD)/fp8_mqa_logits.gfx942.hsaco

.PHONY: all install install-test test test-fast clean

all: $(HSACO) $(HSACO942)

# Checked every time (cheap), installed only when something is missing from *this* Python.
install:
	@$(PYTHON) -c "import importlib.metadata as m; m.version('rawindexer'); import ziglang, pytest" 2>/dev/null \
	  || $(PYTHON) -m pip install -q -e ".[test]"

# Test-only extras: torch/JAX CPU builds for the DLPack tests, Triton for independent gfx950 code.
install-test: install
	@$(PYTHON) -c "import torch, jax, triton" 2>/dev/null || $(PYTHON) -m pip install -q -e ".[test,interop]"

$(HSACO): kernels/fp8_mqa_logits.hip kernels/target.h build.py rawindexer/codeobject.py | install
	$(PYTHON) build.py --out $(BUILD)

test: all install-test
	$(PYTHON) -m pytest -q -m "not gpu" tests

test-fast: all install-test
	$(PYTHON) -m pytest -q -m "not gpu and not slow" tests

clean:
	rm -rf $(BUILD)

# ---- sm_90a (Hopper) CUDA twin ------------------------------------------------------------------------
# Built only where nvcc is on PATH; without it `make` builds gfx950 alone and still succeeds. The cubin
# waits for the gfx950 rule (order-only) because both merge their target into build/manifest.json.
NVCC  := $(shell command -v nvcc 2>/dev/null)
CUBIN := $(BUILD)/fp8_mqa_logits.sm90a.cubin
ifneq ($(NVCC),)
all: $(CUBIN)
endif

$(CUBIN): kernels/fp8_mqa_logits_sm90.cu build.py | $(HSACO)
	$(PYTHON) build.py --out $(BUILD) --target sm_90a

# ---- fp8_paged_mqa_logits (decode): its own code object, merged into the manifest after the prefill one --
PAGED_HSACO := $(BUILD)/fp8_paged_mqa_logits.gfx950.hsaco
all: $(PAGED_HSACO)

$(PAGED_HSACO): kernels/fp8_paged_mqa_logits.hip kernels/target.h rawindexer/paged_kernels.py build.py rawindexer/codeobject.py | $(HSACO)
	$(PYTHON) build.py --out $(BUILD) --op fp8_paged_mqa_logits

PAGED_CUBIN := $(BUILD)/fp8_paged_mqa_logits.sm90a.cubin
ifneq ($(NVCC),)
all: $(PAGED_CUBIN)
endif

$(PAGED_CUBIN): kernels/fp8_paged_mqa_logits_sm90.cu rawindexer/paged_kernels.py build.py | $(PAGED_HSACO)
	$(PYTHON) build.py --out $(BUILD) --op fp8_paged_mqa_logits --target sm_90a

# ---- gfx942 (MI300X / MI325X): the same source; waits for the gfx950 code objects (order-only) since all merge
# into manifest.json
$(HSACO942): kernels/fp8_mqa_logits.hip kernels/target.h build.py rawindexer/codeobject.py | $(HSACO) $(PAGED_HSACO)
	$(PYTHON) build.py --out $(BUILD) --target gfx942

PAGED_HSACO942 := $(BUILD)/fp8_paged_mqa_logits.gfx942.hsaco
all: $(PAGED_HSACO942)

$(PAGED_HSACO942): kernels/fp8_paged_mqa_logits.hip kernels/target.h rawindexer/paged_kernels.py build.py rawindexer/codeobject.py | $(HSACO942)
	$(PYTHON) build.py --out $(BUILD) --op fp8_paged_mqa_logits --target gfx942

# ---- hip stand-in (tests only) ---------------------------------------------------------------------------
# A C stand-in for libamdhip64.so that runs launches on the gfx950 emulator, so the real hip-python wheel
# drives the hip backend in CI (tests/hip_standin/). Built with the ziglang clang; also builds a small
# code object for another target (gfx942) for the "no binary for this GPU" test.
STANDIN_DIR := $(BUILD)/hip_standin
STANDIN_SO  := $(STANDIN_DIR)/libamdhip64.so
STANDIN_942 := $(STANDIN_DIR)/other_target.gfx942.hsaco

.PHONY: hip-standin
hip-standin: $(STANDIN_SO) $(STANDIN_942)

$(STANDIN_SO): tests/hip_standin/hip_standin.c | install
	@mkdir -p $(STANDIN_DIR)
	$(PYTHON) -m ziglang cc -shared -fPIC -O2 -Wall -Wextra -Wl,-soname,libamdhip64.so -o $@ $<

$(STANDIN_942): tests/hip_standin/other_target.hip | $(HSACO)
	@mkdir -p $(STANDIN_DIR)
	RAWINDEXER_FORCE_ZIGLANG=1 $(PYTHON) -c "import build; build.toolchain()"  # the lld shim in build/toolchain
	PATH="$(CURDIR)/$(BUILD)/toolchain:$$PATH" $(PYTHON) -m ziglang clang -x hip --offload-arch=gfx942 \
	  --offload-device-only --no-gpu-bundle-output -nogpulib -nogpuinc -O2 -o $@ $<
