"""Test session set-up: every cache the project (and the libraries it drives) writes points into one
temporary folder for the session, so no test depends on what an earlier run left on the machine."""
import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest


def code_strings(tree):
    """Every string constant of a parsed module that is not a docstring (the source tests read code, not prose)."""
    import ast

    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]

ROOT = Path(__file__).resolve().parents[1]
# in the repository (tests/fixtures/README.md), so the tests pass in a clone in any folder
FIXTURES = ROOT / "tests" / "fixtures" / "tase_official_sample"
VERDICTS = ROOT / "tests" / "fixtures" / "official_verdicts.jsonl"

CACHE_PREFIX = "tase-test-cache-"
OWNER = "owner.pid"


def sweep_stale_caches(tmp: Path) -> list[Path]:
    """Remove the session caches (~260 MB each) of test runs whose process is gone: a run killed by a signal
    never reaches pytest_unconfigure, and 122 such folders once filled the disk. A folder whose owner still
    runs, or that names no owner (made by an older conftest, or being set up), is kept."""
    removed = []
    for d in tmp.glob(CACHE_PREFIX + "*"):
        try:
            pid = int((d / OWNER).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        try:
            os.kill(pid, 0)
            continue  # still running (or the pid was reused: keeping a folder is the safe mistake)
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        removed.append(d)
    return removed


def _term_to_interrupt(signum, frame):
    """SIGTERM (`timeout`, a CI cancel) ends the run as Ctrl-C does, so pytest still unconfigures and the session
    cache is removed."""
    raise KeyboardInterrupt(f"signal {signum}")


sweep_stale_caches(Path(tempfile.gettempdir()))
if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
    signal.signal(signal.SIGTERM, _term_to_interrupt)

# Set before any test module imports transformers, datasets or vLLM (they read these at import), and
# inherited by every CLI the tests start in a subprocess.
_SESSION_CACHE = Path(tempfile.mkdtemp(prefix=CACHE_PREFIX))
(_SESSION_CACHE / OWNER).write_text(str(os.getpid()), encoding="utf-8")
for var, sub in {
    "TASE_CACHE": "tase",  # converted default model and other project caches
    "HF_HOME": "hf",  # hub, datasets and tokenizers caches
    "XDG_CACHE_HOME": "xdg",  # ~/.cache for everything else that honours it (vLLM, torch, matplotlib)
    "VLLM_CACHE_ROOT": "vllm",
    "TORCHINDUCTOR_CACHE_DIR": "inductor",
    "TRITON_CACHE_DIR": "triton",
    "MPLCONFIGDIR": "mpl",
}.items():
    os.environ[var] = str(_SESSION_CACHE / sub)
os.environ["HF_HUB_OFFLINE"] = "1"  # no model hub here: a test that reaches for it fails fast
# The tests train and generate in their own processes (xdist workers) and in CLIs they start: OpenMP threads that
# spin while waiting collapse when two workers share 2 cores (bench/grpo_step.py's GRPO step: 29.5 s spinning,
# 9.3 s passive, beside one other busy process). The entry points set this (common/process.apply); the test
# process is not one, so it sets it here, before anything imports torch (an explicit setting still wins).
TORCH_BEFORE_CONFTEST = "torch" in sys.modules
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def stub_hub_snapshot(hub: Path, repo_id: str, config: dict) -> Path:
    """A model's entry in a Hugging Face hub cache as `hf download` leaves it (refs/main -> snapshots/<rev>/), holding
    config.json and a whole safetensors file of no tensors: what a dry run reads of a hub id (common/models.
    hub_snapshot, then the folder checks a real start makes; no weights to load)."""
    import json

    repo = hub / ("models--" + repo_id.replace("/", "--"))
    rev = "0" * 40
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(rev, encoding="utf-8")
    (repo / "snapshots" / rev).mkdir(parents=True, exist_ok=True)
    (repo / "snapshots" / rev / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (repo / "snapshots" / rev / "model.safetensors").write_bytes((2).to_bytes(8, "little") + b"{}")
    return repo / "snapshots" / rev


# the paper's recipes (recipes/configs/grpo_qwen14b*.yaml) name Qwen/Qwen2.5-14B-Instruct by hub id; their dry runs
# (tests/test_recipes.py, the launchers' tests) read it from the session's hub cache, as on a machine that downloaded it
# (its config.json fields that set the size: the dry run's memory estimate reads them as from a real download)
stub_hub_snapshot(_SESSION_CACHE / "hf" / "hub", "Qwen/Qwen2.5-14B-Instruct",
                  __import__("recipes.grpo_core.model_shapes").grpo_core.model_shapes.known_config(
                      "Qwen/Qwen2.5-14B-Instruct"))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


# `make test` runs two pytest-xdist workers with --dist loadfile: each test file is one unit on one worker (its
# module fixtures start once). The files whose tests run many processes at once (vLLM engines of the default model
# and of the tiny random Llama, the SLURM plan's cluster, ZeRO-3's four ranks) are one unit together, handed out first:
# one worker runs them one after the other while the other worker takes the single-process files. Overlapping on
# 2 cores, they slowed each other far more than their share (ZeRO-3: 134 s in the suite, 21 s alone beside a busy
# core), and two default-model engines at once had taken the machine's memory to 18 GB of 24. xdist's own
# `loadgroup` cannot say this here: it renames items' `_nodeid`, which pytest 9 no longer reads.
ONE_WORKER = {"test_vllm.py", "test_slurm.py", "test_zero3_cpu.py", "test_async_grpo.py", "test_eval_api.py",
              "test_vllm_orphans.py", "test_quiet_vllm.py"}


# What each file took, in test-seconds (setup + call + teardown of its tests, from the junit report of `bash .ci/run`
# in a fresh clone on the 2-core AVX2 EPYC, 2026-12-07 17:52 (a niced background job beside it), less the merged async
# runs' and the GGUF tokenizer's measured savings; the files over 5 s): units are handed out longest first, the
# classic schedule for two machines. Ordered by slow marks instead, the files without one (test_prefill 32 s,
# test_quiet_output 40 s) came last and one worker ran the last 22 s of that run alone. A file not listed counts
# 10 s per slow mark. A stale table costs balance, never a test. test_quiet_vllm and test_vllm_orphans: the fresh clone
# of 59666b2 (2026-12-08), after `eval run` on CPU kept vLLM's engine in its own process.
MEASURED_SECONDS = {
    "test_docs_commands.py": 320, "test_async_grpo.py": 257, "test_vllm.py": 214, "test_slurm.py": 184,
    "test_proof_transfer.py": 133, "test_cpu_speed.py": 119, "test_export_gguf.py": 75, "test_eval_api.py": 109,
    "test_recipes.py": 96, "test_quiet_vllm.py": 36, "test_steps_in_process.py": 71, "test_quiet_output.py": 67,
    "test_eval.py": 64, "test_synth_realtext.py": 54, "test_zero3_cpu.py": 47, "test_deterministic_grpo.py": 37,
    "test_resume_generation_batch.py": 46, "test_prefill.py": 46, "test_run_disk.py": 39, "test_bad_inputs.py": 37,
    "test_nothing_ignored_issue80.py": 36, "test_lm_eval.py": 36, "test_tracking.py": 32, "test_trl_grpo.py": 29,
    "test_recipes_pipelines.py": 28, "test_vllm_orphans.py": 16, "test_nothing_silent_issue36.py": 24,
    "test_synth_structural.py": 23, "test_rewards_loopholes.py": 20, "test_guidance.py": 20,
    "test_gpu_memory_table.py": 20, "test_eval_models.py": 20, "test_dynamic_sampling.py": 19,
    "test_synth_awareness.py": 18, "test_rewards_props.py": 17, "test_eval_passk.py": 17,
    "test_nothing_lost_issue62.py": 15, "test_force_guard.py": 15, "test_layers.py": 14, "test_launch_argv.py": 13,
    "test_curriculum.py": 13, "test_tokstats.py": 11, "test_proof_control.py": 11, "test_features.py": 11,
    "test_nothing_lost.py": 10, "test_heldout_eval.py": 10, "test_async_guard.py": 10, "test_proof_select.py": 9,
    "test_presets.py": 7, "test_exits.py": 7, "test_eval_subset.py": 7, "test_true_words.py": 6,
    "test_proof_digital.py": 6, "test_option_reach.py": 6, "test_nothing_lost_issue51a.py": 6,
    "test_no_orphan_steps.py": 6, "test_gpu_smoke.py": 6,
}


def expected_seconds(file: str) -> float:
    """The scheduler's estimate of how long a test file takes: its measured seconds, else 10 s per slow mark."""
    name = Path(file).name
    return MEASURED_SECONDS[name] if name in MEASURED_SECONDS else 10 * slow_marks(file)


@functools.cache
def slow_marks(file: str) -> int:
    """How many `pytest.mark.slow` a test file holds (read from its source on the xdist controller, which collects
    nothing itself): the scheduler's estimate of how long the file takes."""
    try:
        return (ROOT / file).read_text(encoding="utf-8").count("pytest.mark.slow")
    except OSError:
        return 0


@pytest.hookimpl(optionalhook=True)  # xdist's hook: `-p no:xdist` runs still load this file
def pytest_xdist_make_scheduler(config, log):
    """loadfile's scheduler with the many-process files as one scope (ONE_WORKER), the longest units handed out first
    (by MEASURED_SECONDS; the hook is pytest-xdist's, called on the controller). xdist orders
    units by their number of tests, which put the single-test minutes-long files (SLURM plan, ZeRO-3) last, on one
    worker while the other idled; longest first is the classic schedule for two machines."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class ManyProcessFilesTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            file = nodeid.split("::", 1)[0]
            return "many-process files" if Path(file).name in ONE_WORKER else file

        def _assign_work_unit(self, node) -> None:
            def longest_first(item) -> tuple[float, int]:
                files = {nodeid.split("::", 1)[0] for nodeid in item[1]}
                return -sum(expected_seconds(f) for f in files), -len(item[1])

            for scope, _ in sorted(self.workqueue.items(), key=longest_first):  # stable: ties keep xdist's order
                self.workqueue.move_to_end(scope)
            super()._assign_work_unit(node)

    return ManyProcessFilesTogether(config, log)


def pytest_unconfigure(config):
    shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture(scope="session")
def fixture_root() -> Path:
    assert FIXTURES.is_dir(), f"official sample fixtures not found at {FIXTURES}"
    return FIXTURES


@pytest.fixture(scope="session")
def default_model() -> Path:
    """SmolLM2-135M-Instruct: make install's read-only copy in the venv (.venv/tase_models), else converted once
    per session into the session cache; subprocesses that say `--model default` find the same folder."""
    from common.models import resolve_model

    return resolve_model("default")


def tree_env(**extra: str) -> dict[str, str]:
    """The environment for a run a test starts: this process's, read now, with this tree's packages importable and
    `extra` set. Read at call time, not at a test module's import: the libraries the worker imports later set
    variables of their own (KMP_*, PYTORCH_NVML_BASED_CUDA_CHECK), and a run whose environment lacks them is exec'd
    fresh instead of forked warm (tests/warm_python.py drifted)."""
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def run_module(args: list[str], **kw):
    """Run `python -m ...` in a subprocess from the repo root (real CLI, real exit code)."""
    import subprocess

    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, **kw)


SHELLCHECK = ROOT / ".cache" / "shellcheck" / "usr" / "bin" / "shellcheck"  # make install unpacks Debian's here


def find_shellcheck() -> str | None:
    """The ShellCheck the launcher and gpu_smoke tests run: make install's (.cache/shellcheck), else one on PATH."""
    return str(SHELLCHECK) if os.access(SHELLCHECK, os.X_OK) else shutil.which("shellcheck")


def run_shellcheck(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """ShellCheck on `args` (find_shellcheck's), or the test skipped where none is installed: the one body of the
    launcher, gpu_smoke and gpu_proof lint tests."""
    shellcheck = find_shellcheck()
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (make install fetches it into .cache/shellcheck)")
    return subprocess.run([shellcheck, *args], cwd=cwd, capture_output=True, text=True, timeout=120)


from vllm_fixtures import vllm_env, vllm_llm, vllm_sampling_backend  # noqa: E402,F401  (the session's vLLM engines)

# --- tiny random Llamas (issue 39): written once per session, not once per module that uses them ---------------------

def write_tiny_llama(out: Path, tokenizer_from: Path, hidden: int, heads: int, kv_heads: int) -> Path:
    """A 2-layer random Llama (seed 0, float32) with the tokenizer of `tokenizer_from`, saved at `out`."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tokenizer_from)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=2048,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(out)
    tok.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, default_model) -> Path:
    """Hidden 64, 4 heads of 16, SmolLM2's tokenizer: the recipes' wiring runs (tests/test_recipes.py,
    tests/test_bad_inputs.py) and the ZeRO-3 comparison (tests/test_zero3_cpu.py), fast on 2 cores."""
    return write_tiny_llama(tmp_path_factory.mktemp("tiny"), default_model, hidden=64, heads=4, kv_heads=2)


@pytest.fixture(scope="session")
def tiny64(tmp_path_factory, default_model) -> Path:
    """A 2-layer random Llama with head_dim 64 (vLLM's CPU attention has no kernel for smaller heads), SmolLM2's
    tokenizer: the SLURM plan's trainers and vLLM server (tests/test_slurm.py) and the async GRPO steps with their
    in-process engine (tests/test_async_grpo.py), and test_vllm's seeded-sampling engine: they check wiring, not
    learning."""
    return write_tiny_llama(tmp_path_factory.mktemp("tiny64"), default_model, hidden=128, heads=2, kv_heads=1)


SMALL_VOCAB = 2048  # SmolLM2's special tokens, byte alphabet and first 1,796 merges (ids 0-2047, in merge order)


@pytest.fixture(scope="session")
def small_vocab_model(tmp_path_factory, default_model) -> Path:
    """The 2-layer random Llama (hidden 64, write_tiny_llama above) with SmolLM2's tokenizer cut to its
    first SMALL_VOCAB ids: the same byte-level BPE, special tokens and chat template, so every text still encodes
    (longer), but a step loads it in ~0.05 s instead of ~1 s (49,152 tokens and 48,900 merges of JSON). The tiny
    proof loads a tokenizer in each of its ~60 model steps, which was about half its time; and transformers reads a
    GGUF of this vocabulary in ~0.5 s instead of ~7 s per read (tests/test_export_gguf.py)."""
    tok = tmp_path_factory.mktemp("small_vocab_tokenizer")
    for f in Path(default_model).iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            (tok / f.name).write_bytes(f.read_bytes())
    t = json.loads((tok / "tokenizer.json").read_text(encoding="utf-8"))
    vocab, merges = t["model"]["vocab"], [m if isinstance(m, list) else m.split(" ") for m in t["model"]["merges"]]
    first = vocab["".join(merges[0])]  # the id of the first merge's token: merges add ids in order from there
    t["model"]["vocab"] = {k: i for k, i in vocab.items() if i < SMALL_VOCAB}
    t["model"]["merges"] = merges[:SMALL_VOCAB - first]
    assert [vocab["".join(m)] for m in t["model"]["merges"]] == list(range(first, SMALL_VOCAB))
    assert all(a["id"] < first for a in t["added_tokens"]) and len(t["model"]["vocab"]) == SMALL_VOCAB
    (tok / "tokenizer.json").write_text(json.dumps(t, ensure_ascii=False), encoding="utf-8")
    return write_tiny_llama(tmp_path_factory.mktemp("tiny_small_vocab"), tok, hidden=64, heads=4, kv_heads=2)


# --- a CLI's main(argv) in-process (issue 39): bad-input cases without a fresh interpreter each ----------------------

def entry_point(argv: list[str]) -> tuple[str, list[str]]:
    """The module whose `main(argv)` a `python ARGV` command line runs, and its arguments (`-m eval ...`,
    `recipes/x.py ...`)."""
    if argv[0] == "-m":
        return f"{argv[1]}.__main__", argv[2:]
    return f"recipes.{Path(argv[0]).stem}", argv[1:]


def call_main(argv: list[str]) -> tuple[int, str]:
    """`python ARGV` in this process, for a case the CLI refuses early: its exit code and stderr as the CLI would give
    them (an uncaught exception is exit 1 with its traceback), from the repo root; the environment (entry points set
    process settings in it) and the working folder are restored. Not for a command that takes a lock held until
    its process ends (recipes/shared/run_dir.hold_output_dir): that one needs a subprocess."""
    import contextlib
    import importlib
    import io
    import traceback

    module, args = entry_point(argv)
    env, cwd, err = dict(os.environ), os.getcwd(), io.StringIO()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                code = importlib.import_module(module).main(args)
            except SystemExit as e:
                code = e.code
            except Exception:  # noqa: BLE001 - what the interpreter would print
                code = 1
                traceback.print_exc()
    finally:
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
    if isinstance(code, str):  # sys.exit("message"): printed to stderr, exit 1
        err.write(code + "\n")
        code = 1
    return code or 0, err.getvalue()


# --- the warm interpreter (tests/warm_python.py): the tests' `python ...` CLI runs forked from one process that has
# imported torch, transformers and TRL once, instead of each importing them again ----------------------------------

import warm_python  # noqa: E402

WARM = os.environ.get("TASE_TEST_WARM", "1") != "0"  # TASE_TEST_WARM=0: every CLI run in a fresh interpreter


class WarmServer:
    """The warm server of this test process (xdist worker): started at the first command forked warm
    (warm_python.ENSURE_SERVER), with the process's environment then. When that environment has changed since in a
    variable read at import (warm_python.SAFE_ENV: vLLM imported in-process sets a dozen), every run would be exec'd
    fresh, so the server is started again with the new one (`current`)."""

    def __init__(self) -> None:
        self.proc = None
        self.where = Path(tempfile.mkdtemp(prefix="tase-warm-"))  # short: a Unix socket's path has at most 107 bytes
        self.starts = 0

    def current(self) -> None:
        if self.proc is not None and self.proc.poll() is None and not warm_python.drifted(dict(os.environ)):
            return
        import subprocess

        if self.proc is not None:
            warm_python._log({"restart": self.starts, "drift": warm_python.drifted(dict(os.environ))[:8],
                              "test": os.environ.get("PYTEST_CURRENT_TEST", "")[:120]})
        self.stop()
        self.starts += 1
        sock = self.where / f"s{self.starts}"
        os.environ[warm_python.SOCKET_ENV] = str(sock)
        warm_python.SERVER_ENV = dict(os.environ)
        self.proc = warm_python._RealPopen([sys.executable, str(ROOT / "tests" / "warm_python.py"), str(sock)],
                                           cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.strip() == "ready", f"the warm interpreter did not start: {line!r}, exit {self.proc.poll()}"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc.stdout.close()
            self.proc = None


@pytest.fixture(scope="session")
def warm_server():
    server = WarmServer()
    try:
        yield server
    finally:
        server.stop()
        os.environ.pop(warm_python.SOCKET_ENV, None)
        warm_python.SERVER_ENV = None
        shutil.rmtree(server.where, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def _warm_session(request):
    """For the whole session, `subprocess.Popen`/`run` fork `python SCRIPT`/`python -m MODULE` from the warm server
    (warm_python.WarmPopen), the runs of module- and session-scoped fixtures included (set up before any
    function-scoped fixture: a module's trained checkpoint, four preset runs); the server starts at the first
    command it forks. Not in the tests and modules marked `fresh_python` (`_fresh_module`, `_warm_cli_runs`)."""
    if not WARM:
        yield
        return
    warm_python.ENSURE_SERVER = request.getfixturevalue("warm_server").current
    warm_python.install_client(always=True)
    try:
        yield
    finally:
        warm_python.uninstall_client()
        warm_python.ENSURE_SERVER = None


@pytest.fixture(scope="module", autouse=True)
def _fresh_module(request):
    """A module marked `fresh_python` execs every run, its module-scoped fixtures' runs too."""
    if not WARM or not request.node.get_closest_marker("fresh_python"):
        yield
        return
    warm_python.uninstall_client()
    try:
        yield
    finally:
        warm_python.install_client(always=True)


@pytest.fixture(autouse=True)
def _warm_cli_runs(request):
    """Tests marked `fresh_python` exec their runs: those that check what a fresh interpreter does once (warnings at
    import, what a process imports) and those whose runs start vLLM."""
    if not WARM or not request.node.get_closest_marker("fresh_python"):
        yield
        return
    installed = subprocess.Popen is warm_python.WarmPopen
    warm_python.uninstall_client()
    try:
        yield
    finally:
        if installed:
            warm_python.install_client(always=True)
