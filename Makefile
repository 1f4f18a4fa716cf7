# Two commands do all the set-up on a fresh machine:
#   make demo   set up, scaffold projects/rmsnorm if needed, open the workbench on it when stdin and
#               stdout are a terminal (without a GPU the app runs the Triton interpreter and says so),
#               else verify it headless
#   make test   set up and run the test suite (GPU tests skip without CUDA)
# An extra, not a third set-up command:
#   make test-fast  set up and run the fast lane: the tests not marked `slow` (about 3.5 minutes on 2 cores)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# torch is installed only when the interpreter has none (GPU machines bring their own build).
TORCH  ?= torch==2.13.0
DEMO   ?= projects/rmsnorm
# A GPU machine's torch and triton live in the system site; a bare machine gets them from pip.
VENV_FLAGS ?= --system-site-packages

.PHONY: setup demo test test-fast clean

$(BIN)/workbench: pyproject.toml plugins/ncu/pyproject.toml plugins/sanitizer/pyproject.toml plugins/ray/pyproject.toml \
		plugins/mcp/pyproject.toml
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -c "import triton" 2>/dev/null || $(BIN)/python -m pip install -q triton numpy
	$(BIN)/python -m pip install -q -e ".[test]" -e plugins/ncu -e plugins/sanitizer -e plugins/mcp
	@# workbench-ray brings ray[client] (a wheel of ~80 MB); a machine that cannot reach one keeps every local feature.
	$(BIN)/python -m pip install -q --retries 2 --timeout 30 -e plugins/ray || echo "workbench-ray not installed (ray could not be installed): --cluster is unavailable"
	touch $(BIN)/workbench

setup: $(BIN)/workbench

demo: setup
	@test -f $(DEMO)/kernel.py || $(BIN)/workbench new $(notdir $(DEMO)) --dir $(dir $(DEMO))
	@if [ -t 0 ] && [ -t 1 ]; then \
		$(BIN)/workbench watch $(DEMO); \
	else \
		echo "no terminal: verifying $(DEMO) headless"; \
		$(BIN)/workbench verify $(DEMO); \
	fi

# Two test processes (pytest-xdist): most tests wait on worker processes of their own, so two halve the wall
# time on a 2-core machine. The GPU tests share one of them (conftest.py groups them), one at a time.
PYTEST := $(BIN)/python -m pytest -q -n 2 --dist loadgroup --durations=15

test: setup
	$(PYTEST)

test-fast: setup
	$(PYTEST) -m "not slow"

clean:
	rm -rf $(VENV) build *.egg-info
