"""Evaluation during training (recipes/features/heldout/evaluation.py, issue 50): the held-out rows guarded against the
training stream and the `exclude` benchmarks by construction, the headline numbers shared with select_checkpoint
(eval/headline.py), the option checks, and a CPU GRPO run that scores the held-out set every step, logs it to
TensorBoard and metrics.jsonl and keeps the best checkpoint (named in best_checkpoint.json) through rotation."""
from __future__ import annotations

import itertools
import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT, call_main

TINY = ["--use_cpu", "true", "--bf16", "false", "--tasks", "sort_lengths", "freq_count", "--langs", "en",
        "--max_len", "6", "--num_train_examples", "16", "--logging_steps", "1", "--seed", "0"]


def data_args(**kw):
    from recipes.shared.config import DataArgs

    return DataArgs(**{"tasks": ["sentence_length"], "langs": ["en"], "max_len": 4, "num_train_examples": 300,
                       "held_out_rows": 20, **kw})


def test_heldout_rows_are_kept_out_of_training_and_benchmarks(tmp_path):
    """sentence_length at max_len 4 repeats prompts across seeds (18 of 50 measured), so without the guard the
    training stream holds held-out prompts; with it none, and the held-out rows skip an `exclude` file's prompts."""
    from common.guard import normalize_prompt
    from recipes.features.heldout import rows as heldout
    from recipes.shared.data import iter_records

    args = data_args()
    held = heldout.records(args)
    assert len(held) == 20 and all(f"/{args.synth_seed + 1}/" in r["id"] for r in held)  # seed: synth_seed + 1
    held_prompts = {normalize_prompt(r["prompt"]) for r in held}
    assert len(held_prompts) == 20  # distinct prompts
    train = [normalize_prompt(r["prompt"]) for r in iter_records(args)]
    assert len(train) == 300 and not held_prompts & set(train)
    unguarded = [normalize_prompt(r["prompt"]) for r in iter_records(replace(args, held_out_rows=0))]
    assert held_prompts & set(unguarded)  # the guard had something to drop: this test can fail
    # a file given as train_data is guarded the same way
    f = tmp_path / "train.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in held[:3]) + "".join(
        json.dumps(r) + "\n" for r in itertools.islice(iter_records(replace(args, held_out_rows=0)), 5)))
    from_file = [normalize_prompt(r["prompt"]) for r in iter_records(replace(args, train_data=str(f)))]
    assert from_file and not held_prompts & set(from_file)
    # the exclude guard (the release, in a real run) applies to the held-out rows: exclude the first five of them
    spec = tmp_path / "bench.jsonl"
    spec.write_text("".join(json.dumps(r) + "\n" for r in held[:5]))
    again = heldout.records(replace(args, exclude=[str(spec)]))
    assert len(again) == 20 and not {normalize_prompt(r["prompt"]) for r in held[:5]} & {
        normalize_prompt(r["prompt"]) for r in again}
    with pytest.raises(ValueError, match="held_out_seed 1234 equals synth_seed"):
        data_args(held_out_seed=1234)
    with pytest.raises(ValueError, match="held_out_rows must be an integer >= 0"):
        data_args(held_out_rows=-1)


def test_headline_official_strict_loophole_share_per_task():
    """The numbers logged during training and recorded by select_checkpoint, from `eval run`'s own sample lines."""
    import synth
    from eval.headline import headline
    from eval.runner import sample_line

    sort = list(synth.generate("sort_lengths", "en", 2, 3, max_len=6))
    freq = next(synth.generate("freq_count", "en", 1, 3, max_len=6))
    every = " ".join("".join(p) for p in itertools.permutations("ABC"))
    lines = [sample_line(sort[0], f"<answer>{sort[0]['answer']}</answer>"),  # a strict pass
             sample_line(sort[1], f"<answer>{every}</answer>"),  # an official pass through a loophole
             sample_line(freq, "<answer>-1</answer>")]  # wrong
    h = headline(lines)
    assert h["task/sort_lengths/official_acc"] == 1.0 and h["task/sort_lengths/strict_acc"] == 0.5
    assert h["task/freq_count/official_acc"] == 0.0
    assert h["official_acc"] == 0.5 and h["strict_acc"] == 0.25  # macro: mean of the two tasks
    assert h["loophole_share"] == 0.5 and h["n"] == 3  # 2 official passes, 1 a loophole
    assert headline([]) == {}


def test_option_checks_are_one_line(tmp_path):
    base = ["recipes/grpo.py", "--dry-run", "--output_dir", str(tmp_path / "o"), *TINY]
    for extra, want in ((["--eval_strategy", "steps", "--eval_steps", "2"], "needs held_out_rows > 0"),
                        (["--held_out_rows", "4"], "set eval_strategy steps"),
                        (["--held_out_rows", "4", "--eval_strategy", "steps", "--metric_for_best_model", "reward"],
                         "choose a held-out accuracy"),
                        (["--held_out_rows", "4", "--synth_seed", "7", "--held_out_seed", "7"], "equals synth_seed")):
        code, err = call_main([*base, *extra])
        assert code == 2 and want in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    from recipes.features.heldout.evaluation import check

    cfg = SimpleNamespace(eval_strategy="steps", metric_for_best_model="loss", greater_is_better=False)
    check(data_args(), cfg)  # transformers' load_best_model_at_end default "loss" becomes the held-out metric
    assert cfg.metric_for_best_model == "tase/heldout/strict_acc" and cfg.greater_is_better is True
    cfg = SimpleNamespace(eval_strategy="steps", metric_for_best_model="eval_tase/heldout/official_acc")
    check(data_args(), cfg)
    assert cfg.metric_for_best_model == "tase/heldout/official_acc"
    from recipes import features  # the trainers it works with are declared (recipes/features/heldout/__init__.py)

    cfg = SimpleNamespace(eval_strategy="steps", metric_for_best_model=None, report_to=[])
    features.check(features.Run(data_args(), cfg, trainer="async"))  # async evaluates too (issue 79)
    assert cfg.metric_for_best_model == "tase/heldout/strict_acc"


def test_async_policy_generates_on_sdpa_and_trains_on_tree_attention_again(tiny_model):
    """trainer: async builds the policy on TRL's tree attention, which runs packed training rows only: `generate` on
    it fails. The held-out evaluation generates inside generation_attention (SDPA, the same weights), and the
    policy is on tree attention again after, for the next training step."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl.experimental.async_grpo")
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl.experimental.async_grpo.packing import TREE_ATTENTION, register_tree_attention

    from recipes.async_grpo.patches import use_cpu_tree_attention
    from recipes.features.heldout.evaluation import generation_attention

    register_tree_attention()
    use_cpu_tree_attention()
    model = AutoModelForCausalLM.from_pretrained(tiny_model, attn_implementation=TREE_ATTENTION)
    ids = AutoTokenizer.from_pretrained(tiny_model)(["count the words"], return_tensors="pt")
    with pytest.raises(TypeError, match="tree_kv_index"):
        model.generate(**ids, max_new_tokens=2, do_sample=False)
    with generation_attention(model):
        out = model.generate(**ids, max_new_tokens=2, do_sample=False)
        with torch.no_grad():  # the same logits as an SDPA model of the same weights
            ref = AutoModelForCausalLM.from_pretrained(tiny_model, attn_implementation="sdpa")
            assert torch.equal(out, ref.generate(**ids, max_new_tokens=2, do_sample=False))
    assert model.config._attn_implementation == TREE_ATTENTION
    assert all(m.config._attn_implementation == TREE_ATTENTION for m in model.modules() if hasattr(m, "config"))


def test_the_committed_best_checkpoint_files_read_as_the_one_shape():
    """docs/results keeps the files runs wrote (never rewritten): each reads through the one reader as written."""
    from recipes.shared.best_checkpoint import read

    found = sorted((ROOT / "docs" / "results").glob("**/best_checkpoint.json"))
    assert len(found) >= 3
    for f in found:
        rec = read(f.parent)
        assert rec == json.loads(f.read_text()) and rec["metric"] == "tase/heldout/strict_acc", f
        assert rec["value"] == max(e["value"] for e in rec["evaluations"] if e["step"] > 0) <= 1  # a 0-1 share


def test_best_record_takes_the_highest_and_the_earlier_of_equals(tmp_path):
    from recipes.features.heldout.evaluation import best_record

    m = "tase/heldout/strict_acc"
    hist = [{"step": 0, m: 0.75}, {"step": 1, "loss": 0.1}, {"step": 2, m: 0.25}, {"step": 4, m: 0.5},
            {"step": 6, m: 0.5}, {"step": 8, m: 0.0}]
    state = SimpleNamespace(log_history=hist, best_model_checkpoint=None)
    rec = best_record(str(tmp_path), SimpleNamespace(metric_for_best_model=m, load_best_model_at_end=False), state)
    assert (rec["step"], rec["value"], rec["path"]) == (4, 0.5, None)  # no checkpoint-4 folder: no path
    assert [e["step"] for e in rec["evaluations"]] == [0, 2, 4, 6, 8]  # step 0 (eval_on_start) logged, not chosen
    assert best_record(str(tmp_path), SimpleNamespace(metric_for_best_model="x", load_best_model_at_end=False),
                       state) is None


def tb_scalars(run: Path, tag: str) -> list[tuple[int, float]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (logdir,) = (run / "runs").iterdir()
    ea = EventAccumulator(str(logdir))
    ea.Reload()
    return [(e.step, e.value) for e in ea.Scalars(tag)]


@pytest.mark.slow
def test_grpo_and_sft_evaluate_held_out_rows_and_keep_the_best_checkpoint(tiny_model, tmp_path):
    """4 GRPO steps, the held-out set (4 rows, 8 tokens) scored after every step; save_steps 2 with
    save_total_limit 1: the best step's checkpoint is saved off the save grid and outlives the rotation. The SFT
    warm-up (2 steps, save_strategy best) runs beside it."""
    grpo, sft = tmp_path / "grpo", tmp_path / "sft"
    cmds = [[sys.executable, "recipes/grpo.py", "--model_name_or_path", str(tiny_model), "--output_dir", str(grpo),
             *TINY, "--dtype", "float32", "--num_generations", "2", "--per_device_train_batch_size", "4",
             "--max_completion_length", "8", "--learning_rate", "1e-3", "--gradient_checkpointing", "false",
             "--max_steps", "4", "--save_steps", "2", "--save_total_limit", "1", "--eval_strategy", "steps",
             "--eval_steps", "1", "--held_out_rows", "4", "--report_to", "tensorboard"],
            [sys.executable, "recipes/sft_warmup.py", "--model_name_or_path", str(tiny_model), "--output_dir", str(sft),
             *TINY, "--per_device_train_batch_size", "4", "--max_steps", "2", "--eval_strategy", "steps",
             "--eval_steps", "1", "--held_out_rows", "3", "--held_out_max_new_tokens", "8", "--save_strategy", "best",
             "--report_to", "none"]]
    procs = [subprocess.Popen(c, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for c in cmds]
    results = [(p.returncode, err) for p in procs for _, err in [p.communicate(timeout=600)]]
    for code, err in results:
        assert code == 0, err[-3000:]
    key = "tase/heldout/strict_acc"
    logged = [(m["step"], m[key]) for m in map(json.loads, (grpo / "metrics.jsonl").read_text().splitlines())
              if key in m]
    assert [s for s, _ in logged] == [1, 2, 3, 4]
    assert tb_scalars(grpo, "train/" + key) == logged  # TensorBoard's own reader, the same values
    row = next(m for m in map(json.loads, (grpo / "metrics.jsonl").read_text().splitlines()) if key in m)
    assert ({"tase/heldout/official_acc", "tase/heldout/loophole_share", "tase/heldout/task/sort_lengths/strict_acc",
             "tase/heldout/task/freq_count/strict_acc", "tase/heldout/seconds"} <= set(row)
            and row["tase/heldout/n"] == 4)
    best = json.loads((grpo / "best_checkpoint.json").read_text())
    top = max(v for _, v in logged)
    want = next(s for s, v in logged if v == top)  # the highest logged value, the earliest step among equals
    assert (best["metric"], best["step"], best["value"]) == (key, want, top)
    assert best["evaluations"] == [{"step": s, "value": v} for s, v in logged]
    from recipes.shared.best_checkpoint import problem

    assert problem(best) is None  # the one chosen-checkpoint shape, select_checkpoint.py's too (issue 61)
    assert (Path(best["path"]) == grpo / f"checkpoint-{want}"
            and (grpo / f"checkpoint-{want}" / "model.safetensors").is_file())
    assert sorted(p.name for p in grpo.glob("checkpoint-*")) == [f"checkpoint-{want}"]  # the rest rotated away
    state = json.loads((grpo / "trainer_state.json").read_text())
    assert state["best_global_step"] == want and state["best_metric"] == top
    assert Path(state["best_model_checkpoint"]) == grpo / f"checkpoint-{want}"
    # each evaluation's files are `eval run`'s: samples.jsonl and results.json over the held-out rows
    rows = (grpo / "heldout" / "heldout.jsonl").read_text().splitlines()
    res = json.loads((grpo / "heldout" / "step-4" / "results.json").read_text())
    assert len(rows) == 4 and res["n"] == 4 and res["strict"]["overall"] / 100 == logged[-1][1]
    # SFT: the evaluations in its metrics.jsonl, its best checkpoint named
    sft_logged = [m for m in map(json.loads, (sft / "metrics.jsonl").read_text().splitlines()) if key in m]
    assert [m["step"] for m in sft_logged] == [1, 2] and all(m["tase/heldout/n"] == 3 for m in sft_logged)
    sbest = json.loads((sft / "best_checkpoint.json").read_text())
    assert sbest["path"] and (Path(sbest["path"]) / "model.safetensors").is_file()
