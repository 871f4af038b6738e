# decodegap: `make reproduce` rebuilds figures/ from data/ (no GPU needed); `make test` runs the CPU tests;
# `make test-fast` the fast tier of them (no notebooks, no fresh-process sweeps), both on every core (pytest-xdist;
# JOBS=0 runs them in one process);
# `make lab` opens the notebooks in JupyterLab. All create .venv on first use.
# `make measure GPU=h200` measures this machine's GPU.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
GPU ?=
JOBS ?= auto
STAMP := $(VENV)/.installed
LAB_STAMP := $(VENV)/.lab-installed

.PHONY: reproduce test test-fast test-gpu measure check lab clean-venv

# The set-up prints how long it took (the README quotes it); `reproduce` and pytest print their own times.
$(STAMP): pyproject.toml constraints.txt
	@start=$$(date +%s) && set -e && \
	$(PYTHON) -m venv $(VENV) && \
	$(PY) -m pip install --quiet --upgrade pip && \
	$(PY) -m pip install --quiet -c constraints.txt torch && \
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]' && \
	touch $(STAMP) && \
	echo "set-up of $(VENV) took $$(( $$(date +%s) - start )) s"

$(LAB_STAMP): $(STAMP)
	$(PY) -m pip install -c constraints.txt -e '.[lab]'
	touch $(LAB_STAMP)

reproduce: $(STAMP)
	$(PY) -m decodegap reproduce

test: $(STAMP)
	$(PY) -m pytest -m "not gpu" -n $(JOBS) --dist loadgroup

test-fast: $(STAMP)
	$(PY) -m pytest -m "not gpu and not notebooks and not slow" -n $(JOBS) --dist loadgroup

test-gpu: $(STAMP)
	$(PY) -m pytest -m gpu

measure: $(STAMP)
	@test -n "$(GPU)" || (echo "usage: make measure GPU=<key from data/specs/gpus.csv, e.g. h100-sxm>"; exit 2)
	$(PY) -m decodegap reproduce --measure --gpu $(GPU)

check: $(STAMP)
	$(PY) -m decodegap check

lab: $(LAB_STAMP)
	$(VENV)/bin/jupyter lab --notebook-dir=notebooks

clean-venv:
	rm -rf $(VENV)
