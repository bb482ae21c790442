# climnb: two commands do everything.
#   make demo   set up (first time only) and run the workflow end to end on toy data
#   make test   set up (first time only) and run the test suite
VENV ?= .venv
PY := $(VENV)/bin/python
# The venv first on PATH, so that mpirun/horovodrun children and notebook kernels use it.
export PATH := $(abspath $(VENV))/bin:$(PATH)
export IPP_NONINTERACTIVE := 1
export TF_CPP_MIN_LOG_LEVEL ?= 2

.PHONY: setup demo test lint bench clean

setup:
	@bash tools/setup.sh

demo: setup
	$(PY) -m climnb demo

test: setup
	$(PY) -m ruff check --quiet climnb tests benchmarks notebooks
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check climnb tests benchmarks notebooks
	$(PY) -m ruff format --check climnb tests benchmarks notebooks

bench: setup
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info reports data
