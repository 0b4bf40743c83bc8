# The two README commands: `make demo` and `make test`. Everything else is for developers.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LOGDIR ?= logs
PORT ?= 6006

.PHONY: demo test bench install install-test clean

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[test]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed
install-test: $(VENV)/.installed-test

demo: $(VENV)/.installed
	$(PY) -m board.port_check --port $(PORT) --choose-with "make demo PORT=<n>"
	$(PY) -m instrumentation.demo --logdir $(LOGDIR)
	$(PY) -m board --logdir $(LOGDIR) --port $(PORT)

test: $(VENV)/.installed-test
	$(PY) -m pytest

bench: $(VENV)/.installed-test
	$(PY) bench/engine_step.py --threads 1
	$(PY) bench/writer.py
	$(PY) bench/board_ingest.py --skip-python-loader
	$(PY) bench/watch_overhead.py
	$(PY) bench/profiler_overhead.py
	$(PY) bench/memory_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache
