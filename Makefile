# make        : install what is missing (the package, its pinned build tools) and build both targets'
#               kernels into rawindexer/_kernels (package data); intermediates go to build/
# make test   : the above plus the test-only extras, then the test suite (CPU only: the emulator
#               executes the gfx950 binary; GPU tests are marked and deselected)
# make wheel  : the above, then dist/rawindexer-<version>-py3-none-any.whl carrying both targets
PYTHON  ?= python3
BUILD   := build
KERNELS := rawindexer/_kernels
HSACO   := $(KERNELS)/fp8_mqa_logits.gfx950.hsaco
CUBIN   := $(KERNELS)/fp8_mqa_logits.sm90a.cubin
DIST    := dist
PAGED_HSACO := $(KERNELS)/fp8_paged_mqa_logits.gfx950.hsaco
PAGED_CUBIN := $(KERNELS)/fp8_paged_mqa_logits.sm90a.cubin
HSACO942 := $(KERNELS)/fp8_mqa_logits.gfx942.hsaco
PAGED_HSACO942 := $(KERNELS)/fp8_paged_mqa_logits.gfx942.hsaco

.PHONY: all install install-test test test-fast wheel clean

all: $(HSACO) $(CUBIN) $(PAGED_HSACO) $(PAGED_CUBIN) $(HSACO942) $(PAGED_HSACO942)

# Checked every time (cheap), installed only when something is missing from *this* Python. The sm_90a
# toolkit (nvcc from PyPI) is installed by build.py itself, and only where no nvcc is on PATH.
install:
	@$(PYTHON) -c "import importlib.metadata as m; m.version('rawindexer'); import ziglang, pytest" 2>/dev/null \
	  || $(PYTHON) -m pip install -q -e ".[build,test]"

# Test-only extras: torch/JAX CPU builds for the DLPack tests, Triton for independent gfx950 code.
install-test: install
	@$(PYTHON) -c "import torch, jax, triton, hip" 2>/dev/null || $(PYTHON) -m pip install -q -e ".[test,interop]"

# gfx950: hipcc where ROCm is installed, else clang from the pinned ziglang package.
$(HSACO): kernels/fp8_mqa_logits.hip $(wildcard kernels/gfx/*.h) kernels/target.h build.py rawindexer/registry.py rawindexer/codeobject.py | install
	$(PYTHON) build.py --out $(BUILD) --kernels $(KERNELS)

# sm_90a: nvcc on PATH, else the pinned NVIDIA PyPI toolkit (RAWINDEXER_FORCE_PYPI_NVCC=1 forces it).
# Waits for the gfx950 rule (order-only) because both merge their target into manifest.json.
$(CUBIN): kernels/fp8_mqa_logits_sm90.cu $(wildcard kernels/sm90/*.cuh) build.py rawindexer/registry.py | $(HSACO)
	$(PYTHON) build.py --out $(BUILD) --kernels $(KERNELS) --target sm_90a

# fp8_paged_mqa_logits (decode): its own code objects, merged into the manifest after the prefill ones.
$(PAGED_HSACO): kernels/fp8_paged_mqa_logits.hip kernels/target.h rawindexer/paged_kernels.py build.py rawindexer/codeobject.py | $(CUBIN)
	$(PYTHON) build.py --out $(BUILD) --kernels $(KERNELS) --op fp8_paged_mqa_logits

$(PAGED_CUBIN): kernels/fp8_paged_mqa_logits_sm90.cu $(wildcard kernels/sm90/*.cuh) rawindexer/paged_kernels.py build.py | $(PAGED_HSACO)
	$(PYTHON) build.py --out $(BUILD) --kernels $(KERNELS) --op fp8_paged_mqa_logits --target sm_90a

# gfx942 (MI300X / MI325X): the same sources through kernels/target.h, after the others (order-only: all
# merge into manifest.json).
$(HSACO942): kernels/fp8_mqa_logits.hip $(wildcard kernels/gfx/*.h) kernels/target.h build.py rawindexer/codeobject.py | $(PAGED_CUBIN)
	$(PYTHON) build.py --out $(BUILD) --kernels $(KERNELS) --target gfx942

$(PAGED_HSACO942): kernels/fp8_paged_mqa_logits.hip kernels/target.h rawindexer/paged_kernels.py build.py rawindexer/codeobject.py | $(HSACO942)
	$(PYTHON) build.py --out $(BUILD) --kernels $(KERNELS) --op fp8_paged_mqa_logits --target gfx942

test: all install-test
	$(PYTHON) -m pytest -q -m "not gpu" tests

test-fast: all install-test
	$(PYTHON) -m pytest -q -m "not gpu and not slow" tests

# One pure-Python wheel (the kernels are data, not extension modules). setuptools stages the wheel
# under build/ too: cleared first so a removed file cannot linger in the next wheel.
wheel: all
	rm -rf $(BUILD)/lib $(BUILD)/bdist.* $(DIST)/rawindexer-*.whl
	$(PYTHON) -m pip wheel -q --no-deps -w $(DIST) .
	@ls $(DIST)/rawindexer-*-py3-none-any.whl

clean:
	rm -rf $(BUILD) $(KERNELS) $(DIST)

# ---- the C launcher of the CUDA backend's hot path ---------------------------------------------------------
# One foreign call per launch (rawindexer/backends/csrc/cuda_launch.c); no libcuda link (the driver's entry points
# are handed over at run time), so it builds anywhere with the ziglang clang and CI tests it against a fake driver.
# Shipped beside the code objects (x86_64 build: elsewhere the backend falls back to plain ctypes). -mcpu=baseline: the build travels to other hosts.
LAUNCHER := $(KERNELS)/libri_cuda_launch.so
all: $(LAUNCHER)

$(LAUNCHER): rawindexer/backends/csrc/cuda_launch.c | install
	@mkdir -p $(KERNELS)
	$(PYTHON) -m ziglang cc -shared -fPIC -O2 -mcpu=baseline -Wall -Wextra -o $@ $<

# The same launcher as a CPython extension (stable ABI, 3.10+): called without ctypes, about a microsecond less per
# launch. Needs Python.h; where the headers are missing it is skipped (said once) and the backend keeps the
# ctypes-called launcher above.
LAUNCHER_EXT := $(KERNELS)/_ri_cuda_launch.abi3.so
PY_INCLUDE := $(shell $(PYTHON) -c "import sysconfig; print(sysconfig.get_paths()['include'])" 2>/dev/null)
all: $(LAUNCHER_EXT)

$(LAUNCHER_EXT): rawindexer/backends/csrc/cuda_launch_ext.c rawindexer/backends/csrc/cuda_launch.c | install
	@mkdir -p $(KERNELS)
	@if [ -f "$(PY_INCLUDE)/Python.h" ]; then \
	  echo "$(PYTHON) -m ziglang cc ... -o $@ $<"; \
	  $(PYTHON) -m ziglang cc -shared -fPIC -O2 -mcpu=baseline -Wall -Wextra -I"$(PY_INCLUDE)" -o $@ $<; \
	else echo "note: no Python.h under '$(PY_INCLUDE)': the CUDA launcher's extension is skipped (ctypes route kept)"; fi

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
