# climnb: two commands do everything.
#   make demo   set up (first time only) and run the workflow end to end on toy data
#   make test   set up (first time only) and run the test suite
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: setup demo test lint bench clean

setup:
	@bash tools/setup.sh

demo: setup
	$(PY) -m climnb demo

test: setup
	$(PY) -m pytest $(PYTEST_ARGS)

lint: setup
	$(PY) -m ruff check climnb tests benchmarks notebooks
	$(PY) -m ruff format --check climnb tests benchmarks notebooks

bench: setup
	$(PY) benchmarks/bench_synthetic.py

clean:
	rm -rf $(VENV) build *.egg-info reports data
