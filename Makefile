# make        : install what is missing (the package, its pinned build tools) and build the gfx950 code object
# make test   : the above, then the test suite (CPU only: the emulator executes the gfx950 binary)
PYTHON ?= python3
BUILD  := build
HSACO  := $(BUILD)/fp8_mqa_logits.gfx950.hsaco
STAMP  := $(BUILD)/.installed

.PHONY: all test test-fast clean

all: $(HSACO)

# Editable install of the package plus the pinned toolchain and test tools, once per environment.
$(STAMP): pyproject.toml
	@mkdir -p $(BUILD)
	$(PYTHON) -m pip install -q -e ".[test]"
	@touch $@

$(HSACO): kernels/fp8_mqa_logits.hip build.py rawindexer/codeobject.py $(STAMP)
	$(PYTHON) build.py --out $(BUILD)

test: all
	$(PYTHON) -m pytest -q -m "not gpu" tests

test-fast: all
	$(PYTHON) -m pytest -q -m "not gpu and not slow" tests

clean:
	rm -rf $(BUILD)
