# climnb: two commands do everything.
#   make demo   set up (first time only) and run the workflow end to end on toy data
#   make test   set up (first time only) and run the test suite
VENV ?= .venv
PY := $(VENV)/bin/python
# The venv first on PATH, so that mpirun/horovodrun children and notebook kernels use it.
export PATH := $(abspath $(VENV))/bin:$(PATH)
export IPP_NONINTERACTIVE := 1
export TF_CPP_MIN_LOG_LEVEL ?= 2
# Python's default, bytecode written: where PYTHONDONTWRITEBYTECODE is set (some CI images),
# each of the suite's few hundred Python processes (engines, MPI ranks, kernels, the CLI)
# compiles climnb again (~0.3 s of CPU each) and pytest rewrites every test module per worker.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup demo test test-quick lint bench clean

# The suite runs on 2 workers, each test module on one of them (module fixtures stay shared).
PYTEST_ARGS ?= -n 2 --dist loadfile
QUICK := not slow and not browser and not slurm and not notebook and not horovod and not mpi

setup:
	@bash tools/setup.sh

demo: setup
	$(PY) -m climnb demo

test: setup
	$(PY) -m ruff check --quiet climnb tests benchmarks notebooks
	$(PY) -m pytest $(PYTEST_ARGS)

# The inner loop: everything but the real services (MPI, Horovod, Slurm, notebooks, browser).
test-quick: setup
	$(PY) -m ruff check --quiet climnb tests benchmarks notebooks
	$(PY) -m pytest $(PYTEST_ARGS) -m "$(QUICK)"

lint: setup
	$(PY) -m ruff check climnb tests benchmarks notebooks
	$(PY) -m ruff format --check climnb tests benchmarks notebooks

bench: setup
	@for b in benchmarks/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build *.egg-info reports data
