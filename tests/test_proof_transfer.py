"""Issue 64: when RL is worth it. The proof's transfer sets (harder synth rows, a stratified slice of untrained
official files), seeds, the control's learning-rate sweep, the rejection-sampling SFT control and the lr-matched arm:
their refusals (one line, exit 2), the stratified row selection of `eval run`, synth's harder rows, and the pooled
comparison over seeds. The shipped config's whole dry run is pinned in tests/test_proof_start.py (golden text)."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from test_proof_start import FIXTURE, ROOT, commands, dry, headers, one, render

CONFIG = ROOT / "recipes" / "configs" / "proof_combine_transfer_cpu.yaml"


def test_the_transfer_config_plans_seeds_sweep_rft_lr_matched_and_transfer(tmp_path):
    text = dry(tmp_path, CONFIG)
    heads = headers(text)
    assert heads[-1] == "13/13 summary" and any(h.startswith("8/13 RFT prompts") for h in heads)
    cmds = commands(text)
    # the best arm per seed, its seed as an option; grpo and the lr-matched arm after it on seed 42 only
    for s in (42, 7, 11):
        assert (f"--save_steps 40 --seed {s} --resume_from_checkpoint true"
                in one(cmds, f"--output_dir OUT/grpo_dyn_s{s} "))
    assert "--save_steps 76 --seed 42 --resume_from_checkpoint true" in one(cmds, "--output_dir OUT/grpo_s42 ")
    lrm = one(cmds, "--output_dir OUT/grpo_lr_matched_s42 ")
    assert "--learning_rate '<5e-06 / signal share of OUT/grpo_s42/trainer_state.json>'" in lrm
    assert not [c for c in cmds if "OUT/grpo_s7 " in c or "OUT/grpo_lr_matched_s11 " in c]
    # seed 42 sweeps the control's and RFT's rates; seeds 7 and 11 train once at seed 42's choice
    for lr in ("1e-05", "2e-05", "5e-05"):
        c = one(cmds, f"--output_dir OUT/control_lr{lr}_s42 ")
        assert f"--learning_rate {lr} " in c and "--seed 42 --max_steps 329 " in c
        r = one(cmds, f"--output_dir OUT/rft_lr{lr}_s42 ")
        assert r.startswith("PY recipes/sft_warmup.py --config OUT/rft_s42_config.yaml --model_name_or_path OUT/start ")
    for s in (7, 11):
        assert "--learning_rate '<the rate chosen for rft_s42 on heldout_select.jsonl>'" in one(
            cmds, f"--output_dir OUT/rft_chosen_s{s} ")
    # RFT: the grpo arm's 1,200 completions (75 generation batches of 16) on its first 150 prompts, 8 each
    assert one(cmds, "--out OUT/data/rft_prompts_") == (
        "PY -m synth --task component_split --lang en -n 150 --seed 779 --subtask combine --exclude official:OFFICIAL "
        "--no-progress --out OUT/data/rft_prompts_component_split_en_combine.jsonl")
    assert "--num-samples 8 --temperature 1 --max-new-tokens 32 --seed 7 " in one(cmds, "--out OUT/rft_samples_s7 ")
    # transfer: harder rows guarded like the held-out sets; the untrained files sliced, stratified
    harder = one(cmds, "--out OUT/transfer_harder.jsonl")
    assert "--task component_split --lang en -n 300 --seed 4244 --subtask combine --harder" in harder
    assert harder.endswith("--exclude-exact OUT/heldout.jsonl --exclude-exact OUT/heldout_select.jsonl")
    untrained = [c for c in cmds if "--data official:OUT/transfer_official " in c]
    # base, warm-up, start; seed 42's three arms, control and RFT; seeds 7 and 11's arm, control and RFT
    assert len(untrained) == 14 and all("--limit 200 --select stratified" in c for c in untrained)
    # a sweep's model on seed 42 is the held-out best rate
    assert "--model '<best of sft_control_lr1e-05_s42, sft_control_lr2e-05_s42, sft_control_lr5e-05_s42 on " \
           "heldout_select.jsonl>' --data official:OUT/official --out OUT/eval/official/sft_control_s42 " in text
    assert "ln -s OFFICIAL/tasks/token_structure/variant_normalize/digital.csv " \
           "OUT/transfer_official/tasks/token_structure/variant_normalize/digital.csv" in text


def variant(tmp_path: Path, old: str, new: str, i: int) -> Path:
    text = CONFIG.read_text(encoding="utf-8")
    assert old in text, old
    p = tmp_path / f"bad{i}.yaml"
    p.write_text(text.replace(old, new, 1), encoding="utf-8")
    return p


BAD = {
    ("seeds: [42, 7, 11]", "seeds: [42, 42]"): "seeds must list distinct whole numbers >= 0, got [42, 42]",
    ("seeds: [42, 7, 11]", "seeds: []"): "seeds must list distinct whole numbers >= 0",
    ("seeds: [42, 7, 11]", "seeds: 42"): "seeds must be a list, got 42",
    ("{max_steps: 150, save_steps: 76}", "{max_steps: 150, save_steps: 76, seed: 3}"):
        "seeds: sets every arm's and control's seed; drop grpo arm 'grpo' options: seed",
    ("learning_rates: [1.0e-5, 2.0e-5, 5.0e-5]", "learning_rates: [2.0e-5, 0]"):
        "control: learning_rates must list distinct learning rates in (0, 1), got [2e-05, 0]",
    ("learning_rates: [1.0e-5, 2.0e-5, 5.0e-5]", "learning_rates: [fast]"): "control: learning_rates must list",
    ("    save_total_limit: 30\n", "    save_total_limit: 30\n    learning_rate: 1.0e-5\n"):
        "control: learning_rates sweeps the control's rate; drop control: options: learning_rate",
    ("select:\n  n: 300", "nothing:\n  n: 300"): "unknown key 'nothing'",
    ("rft: true ", "rft: sometimes "): "control: rft must be a bool, got 'sometimes'",
    ("lr_matched: grpo ", "lr_matched: nope "):
        "grpo: lr_matched must name one of the arms (grpo, grpo_dyn), got 'nope'",
    ("lr_matched: grpo ", "lr_matched: grpo_dyn "): "grpo: lr_matched: grpo_dyn samples dynamically; name an arm",
    ("{max_steps: 80, dynamic_sampling: true, save_steps: 40}", "{max_steps: 80, save_steps: 40}"):
        "grpo: lr_matched: no arm has dynamic_sampling true: there is no effective learning rate to match",
    ("harder: {n: 300, seed: 4244}", "harder: {n: 0, seed: 4244}"): "transfer: harder: n must be at least 1, got 0",
    ("harder: {n: 300, seed: 4244}", "harder: {n: 300}"): "transfer: harder: missing key 'seed'",
    ("  rows: 200\n", "  rows: 0\n"): "transfer: rows must be at least 1, got 0",
    ("    - token_structure/component_split/en_split.csv\n",
     "    - token_structure/component_split/en_combine.csv\n"):
        "transfer: files are the files the models did not train on; token_structure/component_split/en_combine.csv",
    ("    - token_structure/component_split/en_split.csv\n", "    - en_split.csv\n"):
        "transfer: files must list official files as <group>/<task>/<file>.csv",
    ("    - token_structure/component_split/en_split.csv\n",
     "    - token_structure/component_split/nosuch.csv\n"): "no tasks/token_structure/component_split/nosuch.csv "
                                                           "(transfer: files must be in the release)",
}


def test_bad_transfer_seed_sweep_rft_and_lr_matched_values_are_one_line(tmp_path):
    cases = {variant(tmp_path, old, new, i): want for i, ((old, new), want) in enumerate(BAD.items())}
    text = CONFIG.read_text(encoding="utf-8")
    # no select: with a sweep; harder rows of a task without them; RFT on data of two streams
    sel = text[text.index("select:\n"):text.index("heldout:\n")]
    p = tmp_path / "nosel.yaml"
    p.write_text(text.replace(sel, ""), encoding="utf-8")
    cases[p] = "control: learning_rates needs select: (the held-out selection chooses among the rates and steps)"
    p = tmp_path / "zh.yaml"
    p.write_text(text.replace("heldout:\n  task: component_split\n  lang: en", "heldout:\n  task: component_split\n"
                              "  lang: zh"), encoding="utf-8")
    cases[p] = "transfer: harder: component_split/zh/combine has no harder rows"
    p = tmp_path / "two.yaml"
    p.write_text(text.replace("    subtasks: [combine]\n    synth_seed: 779", "    subtasks: [combine, split]\n"
                              "    synth_seed: 779"), encoding="utf-8")
    cases[p] = "control: rft samples the GRPO arms' first prompts as one synth stream"
    for cfg, want in cases.items():
        code, out, err = render(cfg, FIXTURE, tmp_path / "out")
        assert code == 2 and err.count("\n") == 1 and want in err and not out.strip(), (cfg.name, want, err, out[-300:])
    assert not (tmp_path / "out").exists()


def test_stratified_limit_sees_every_diff_kind_where_the_stride_does_not():
    """diff_tokens cycles through its kinds (the release: unchanged, add, delete, modify; the fixture's sample:
    unchanged, delete): every 2nd row (spread) misses kinds; stratified takes every kind in proportion, in file
    order; a file of one kind is the spread selection itself."""
    from eval.data import load_official
    from eval.runner import select

    rows = [r for r in load_official(FIXTURE) if r["task"] == "diff_tokens" and r["lang"] == "en"]
    kinds = Counter(r["variation"] for r in rows)
    assert len(kinds) >= 2
    half = len(rows) // 2
    assert len({r["variation"] for r in select(rows, half, "spread")}) < len(kinds)
    strat = select(rows, half, "stratified")
    got = Counter(r["variation"] for r in strat)
    assert len(strat) == half and set(got) == set(kinds)
    assert all(abs(got[k] - half * kinds[k] / len(rows)) < 1 for k in kinds)
    assert [r["id"] for r in strat] == sorted((r["id"] for r in strat), key=lambda i: int(i.rsplit("/", 1)[1]))
    combine = [r for r in load_official(FIXTURE) if r["subtask"] == "combine" and r["lang"] == "en"]
    assert select(combine, 3, "stratified") == select(combine, 3, "spread")


def test_harder_rows_are_beyond_the_official_range_and_the_plain_ones_unchanged():
    import synth
    from synth.core import SynthError

    rows = list(synth.generate("component_split", "en", 30, 5, "combine", harder=True))
    assert all(5 <= len(r["meta"]["parts"]) <= 6 and len(r["answer"]) >= 12 for r in rows), rows[0]
    digits = list(synth.generate("variant_normalize", "ko", 30, 5, "digital", harder=True))
    assert all(14 <= len(r["answer"]) <= 24 for r in digits)
    plain = list(synth.generate("component_split", "en", 200, 5, "combine"))
    assert max(len(r["meta"]["parts"]) for r in plain) == 4
    with pytest.raises(SynthError, match="component_split/zh/combine has no harder rows"):
        next(synth.generate("component_split", "zh", 1, 5, "combine", harder=True))


def test_rft_records_keep_the_strict_correct_samples_and_sft_trains_on_them(tmp_path):
    """The RFT data: each strict-correct sample as its prompt's record with `completion`; sft_warmup's dataset takes
    that completion instead of the gold answer's turn; no strict-correct sample: an empty file."""
    from recipes.proof_stages.train import rft_records
    from recipes.sft_warmup import build_sft_dataset
    from recipes.shared.config import DataArgs

    recs = list(__import__("synth").generate("component_split", "en", 2, 3, "combine"))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    samples = tmp_path / "samples.jsonl"
    lines = [{"id": recs[0]["id"], "completion": "right <answer>x</answer>", "strict": True},
             {"id": recs[0]["id"], "completion": "wrong", "strict": False},
             {"id": recs[1]["id"], "completion": "also right", "strict": True}]
    samples.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    dest = tmp_path / "rft.jsonl"
    assert rft_records(samples, prompts, dest, False) == 2
    ds = build_sft_dataset(DataArgs(train_data=str(dest), num_train_examples=10))
    assert [r["completion"][0]["content"] for r in ds] == ["right <answer>x</answer>", "also right"]
    samples.write_text(json.dumps(lines[1]) + "\n", encoding="utf-8")
    assert rft_records(samples, prompts, tmp_path / "none.jsonl", False) == 0  # written empty: rft_empty
    assert (tmp_path / "none.jsonl").read_text(encoding="utf-8") == ""


def test_pooled_gain_averages_the_seeds_and_widens_with_their_spread(tmp_path):
    """Two seeds of the same paired rows: the pooled delta is the mean of the seeds' deltas; a seed pair that
    disagrees widens the interval past zero where each seed alone is beyond it."""
    from recipes.proof_stages.report import pooled_gain

    def write(name: str, correct: list[int]) -> None:
        d = tmp_path / name
        d.mkdir()
        rows = [{"id": f"component_split/en_combine/{i}", "task": "component_split", "subtask": "combine",
                 "lang": "en", "file": "token_structure/component_split/en_combine.csv", "coarse": float(c),
                 "valid": True} for i, c in enumerate(correct)]
        (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        acc = 100 * sum(correct) / len(correct)
        (d / "results.json").write_text(json.dumps({"overall": acc, "by_task": {}, "by_lang": {}, "micro": acc,
                                                    "n": len(rows)}), encoding="utf-8")

    n = 200
    write("base", [0] * n)
    write("a", [1] * 60 + [0] * (n - 60))   # +30
    write("b", [1] * 20 + [0] * (n - 20))   # +10
    write("c", [0] * n)                     # 0
    g = pooled_gain(tmp_path, [("base", "a"), ("base", "b")], 1000)
    assert g["seeds"] == [30.0, 10.0] and g["delta"] == 20.0 and g["beyond"] == "gain"
    wide = pooled_gain(tmp_path, [("base", "a"), ("base", "c")], 1000)
    assert wide["delta"] == 15.0 and wide["lo"] <= 0.5 and wide["hi"] >= 29


def test_the_pooled_table_puts_grpo_against_the_best_sft_and_rft_over_the_finished_seeds(tmp_path):
    """The transfer config with two seeds finished: a row for the arm trained on every seed (grpo_dyn; grpo ran on
    seed 42 only), the SFT control and RFT; each cell the pooled gain over the start with its interval, on every
    transfer set; the KL column says it is not measured."""
    import dataclasses

    from recipes.proof_stages.config import load_config
    from recipes.proof_stages.report import pooled_table

    def write(dname: str, name: str, correct: int) -> None:
        d = tmp_path / "eval" / dname / name
        d.mkdir(parents=True)
        rows = [{"id": f"component_split/en_combine/{i}", "task": "component_split", "subtask": "combine",
                 "lang": "en", "file": "token_structure/component_split/en_combine.csv", "coarse": float(i < correct),
                 "valid": True} for i in range(100)]
        (d / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        (d / "results.json").write_text(json.dumps({"overall": correct, "by_task": {}, "by_lang": {}, "micro": correct,
                                                    "n": 100}), encoding="utf-8")

    cfg = dataclasses.replace(load_config(str(CONFIG)), seeds=[42, 7])
    models = ["base", "warm-up", "start", "grpo_s42", "grpo_dyn_s42", "grpo_lr_matched_s42", "sft_control_s42",
              "rft_s42", "grpo_dyn_s7", "sft_control_s7", "rft_s7"]
    for dname in ("official", "harder", "untrained"):
        write(dname, "start", 20)
        for s, extra in ((42, 10), (7, 20)):
            write(dname, f"grpo_dyn_s{s}", 20 + extra)
            write(dname, f"sft_control_s{s}", 20 + extra // 2)
            write(dname, f"rft_s{s}", 20)
    lines = pooled_table(tmp_path, cfg, models, 200)
    assert lines[3].startswith("| method | in distribution | harder rows | untrained files (retention) | KL from")
    rows = {line.split(" | ")[0][2:]: line.split(" | ")[1:] for line in lines[5:]}
    assert list(rows) == ["GRPO grpo_dyn", "best SFT (control)", "RFT"]
    assert all(c.startswith("+15.00 [") for c in rows["GRPO grpo_dyn"][:3]) and rows["RFT"][0].startswith("+0.00 ")
    assert rows["best SFT (control)"][1].startswith("+7.50 [") and rows["RFT"][3] == "not measured |"


TINY = """\
out: runs/unused
files:
  - token_structure/component_split/en_combine.csv
sft:
  config: recipes/configs/sft_smollm2_cpu.yaml
  options:
    model_name_or_path: {model}
    tasks: [component_split]
    langs: [en]
    subtasks: [combine]
    num_train_examples: 8
    synth_seed: 777
    paraphrase: false
    max_steps: 2
    per_device_train_batch_size: 4
    save_strategy: "no"
    report_to: none
grpo:
  config: recipes/configs/grpo_combine_cpu.yaml
  arms: [fine]
  reward_funcs: [format]
  options:
    cpu_bf16: "false"
    subtasks: [combine]
    synth_seed: 778
    num_train_examples: 8
    max_steps: 2
    num_generations: 2
    per_device_train_batch_size: 2
    max_completion_length: 8
    save_steps: 1
    report_to: none
control:
  steps: 2
  learning_rates: [1.0e-4, 5.0e-4]
  rft: true
  sweep_once: [control]
  options:
    per_device_train_batch_size: 2
    save_strategy: steps
    save_steps: 1
seeds: [1, 2]
delete_checkpoints: true
transfer:
  harder: {{n: 3, seed: 98}}
  files:
    - token_structure/component_split/en_split.csv
    - token_awareness/diff_tokens/english.csv
  rows: 3
select:
  n: 3
  seed: 99
heldout:
  task: component_split
  lang: en
  subtask: combine
  n: 3
  seed: 97
eval:
  backend: hf
  max_new_tokens: 8
  dtype: float32
compare:
  n_boot: 200
"""


def run_tiny(cfg: Path, out: Path) -> tuple[subprocess.CompletedProcess, float]:
    """The tiny proof into `out`, in one process (`--in-process`), as `make proof` runs it; its result and seconds."""
    t = time.time()
    res = subprocess.run([sys.executable, "recipes/proof.py", "--config", str(cfg), "--official", str(FIXTURE),
                          "--out", str(out), "--in-process"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    return res, time.time() - t


@pytest.fixture(scope="module")
def tiny_proof(tmp_path_factory, small_vocab_model) -> tuple[Path, Path, subprocess.CompletedProcess, float]:
    """One uninterrupted tiny proof (TINY): its config, OUT, result and seconds."""
    where = tmp_path_factory.mktemp("tiny_proof")
    cfg = where / "tiny.yaml"
    cfg.write_text(TINY.format(model=small_vocab_model), encoding="utf-8")
    res, took = run_tiny(cfg, where / "out")
    return cfg, where / "out", res, took


@pytest.mark.slow
def test_a_tiny_proof_with_transfer_seeds_rft_and_a_sweep_runs_end_to_end(tmp_path, tiny_proof):
    """The whole proof on a 2-layer random Llama: two seeds of one GRPO arm, a 2-rate control sweep chosen on held-out
    rows on the first seed (sweep_once) and the second at its chosen rate, the RFT control (a random model samples
    nothing strict-correct: it is the warm-up, said so), harder rows and a stratified slice of two untrained files;
    seed by seed, each seed's manifest (float32) and summary; every completion file re-scores exactly and the
    summary has the per-seed, pooled and transfer parts. Real recipes and CLIs, as `make proof` runs them, in one
    proof process (`--in-process`: each of its ~90 steps a fresh interpreter importing torch and TRL took 47 min on
    a loaded 2-core machine); one step is run again as the subprocess `make proof` spawns, and writes the same
    bytes."""
    import shlex

    cfg, out, res, took = tiny_proof
    assert res.returncode == 0, (res.stdout[-3000:], res.stderr[-3000:])
    summary = (out / "summary.md").read_text(encoding="utf-8")
    for part in ("GRPO fine_s1 vs control_s1", "GRPO fine_s2 vs rft_s2", "pooled over seeds on official",
                 "GRPO fine vs control", "transfer, accuracy %", "retention (vs warm-up)", "gains on harder",
                 "gains on untrained", "the learning-rate sweep", "sft_control_s1: lr ",
                 "sft_control_s2: lr ", "(chosen for sft_control_s1)", "| s2 9 evaluate on untrained |",
                 "KL from warm-up (nats/token)", "RL against SFT pooled over 2 seed(s) (1, 2)",
                 "| s1 9 KL from start |"):
        assert part in summary, (part, summary)
    assert "no sample is strict-correct: rft_s1 is" in res.stdout
    pooled = summary[summary.index("RL against SFT pooled"):].splitlines()
    assert pooled[4].startswith("| GRPO fine | ") and pooled[5].startswith("| best SFT (control) | ")
    assert pooled[6].startswith("| RFT | +0.00 [+0.00, +0.00] | ") and "not measured" not in "".join(pooled[4:7])
    # seed-major: every step of seed 1 before any of seed 2; the shared evaluations before either
    text = res.stdout
    assert text.index("== 4/12 evaluate base on official") < text.index("#### seed 1 of 2") \
        < text.index("GRPO fine_s1") < text.index("checkpoint selection for fine_s1") \
        < text.index("summary over 1 finished seed(s): 1") < text.index("#### seed 2 of 2") < text.index("GRPO fine_s2")
    # the second seed's control at the rate the first seed's selection chose, one run
    assert (out / "control_chosen_s2" / "proof_trained.json").is_file() and not (out / "control_lr0.0001_s2").exists()
    for s in (1, 2):
        m = json.loads((out / f"manifest_s{s}.json").read_text(encoding="utf-8"))
        assert m["complete"] and m["precision"] == "float32" and m["threads"] >= 1 and "torch" in m["versions"]
        assert m["models"] == [f"fine_s{s}", f"sft_control_s{s}", f"rft_s{s}"] and m["wall_time_total"] > 0
        own = (out / f"summary_s{s}.md").read_text(encoding="utf-8")
        assert f"| fine_s{s} |" in own and f"fine_s{3 - s}" not in own and "pooled over seeds" in own
        assert not list((out / f"fine_s{s}").glob("checkpoint-*"))  # delete_checkpoints, once selected and evaluated
    # the untrained slice: 3 rows per file, both diff kinds of the sample
    rows = [json.loads(x) for x in (out / "eval" / "untrained" / "base" / "samples.jsonl").read_text().splitlines()]
    kinds = {r["id"]: r["variation"] for r in __import__("eval.data").data.load_official(FIXTURE)}
    assert len(rows) == 6 and {kinds[r["id"]] for r in rows if r["task"] == "diff_tokens"} == {"unchanged", "delete"}
    assert "MISMATCH" not in res.stdout and len(list((out / "completions").glob("*/*/*.jsonl"))) == 8
    # the harder rows' step as a subprocess, its printed command to another --out: the same file
    (cmd,) = [shlex.split(x[2:]) for x in res.stdout.splitlines()
              if x.startswith("+ ") and "--out " + str(out / "transfer_harder.jsonl") in x]
    cmd[cmd.index("--out") + 1] = str(tmp_path / "again.jsonl")
    again = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "again.jsonl").read_bytes() == (out / "transfer_harder.jsonl").read_bytes() != b""
    print(f"tiny proof: {took:.0f} s")


def comparable(out: Path, name: str) -> str:
    """A summary as two proofs into different folders, or interrupted differently, must agree on it: OUT for the
    folder, without the wall-time table (what each invocation spent)."""
    from recipes.proof_stages.report import WALL_TITLE

    text = (out / name).read_text(encoding="utf-8")
    return text[:text.index(WALL_TITLE)].replace(str(out), "OUT")


# where the tiny proof is killed (kill -9, the whole proof process), one run after the other, each resuming the last:
# inside the warm-up, inside a control run of the first seed, inside its selection, and once the first seed finished
KILLS = (r"^== 2/12 SFT warm-up", r"^== 6/12 more-SFT control control_lr0.0005_s1 ",
         r"^== 8/12 checkpoint selection for sft_control_lr0.0001_s1 ", r"^#### seed 2 of 2")


@pytest.mark.slow
def test_a_tiny_proof_killed_four_times_resumes_to_the_uninterrupted_summary(tmp_path, tiny_proof):
    """kill -9 of the tiny proof at four points (KILLS), each run resuming the one before, then a run to the end: the
    kill after the first seed leaves that seed's manifest, completion files and summaries complete, and the end
    gives the uninterrupted proof's summaries, line for line but the wall times; the wall-time table adds up every
    invocation's steps."""
    import re

    cfg, out0, res0, _ = tiny_proof
    assert res0.returncode == 0, res0.stderr[-2000:]
    out = tmp_path / "out"
    for pattern in KILLS:
        proc = subprocess.Popen([sys.executable, "recipes/proof.py", "--config", str(cfg), "--official", str(FIXTURE),
                                 "--out", str(out), "--in-process"], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if re.search(pattern, line):
                proc.kill()
                break
        proc.wait(timeout=120)
        proc.stdout.close()
        assert proc.returncode == -9, (pattern, "".join(seen)[-3000:])
    # killed once the first seed finished: its manifest, completion files and summaries are whole
    m = json.loads((out / "manifest_s1.json").read_text(encoding="utf-8"))
    assert m["complete"] and not (out / "manifest_s2.json").exists()
    assert comparable(out, "summary_s1.md") == comparable(out0, "summary_s1.md")
    assert len(list((out / "completions").glob("*/*/*.jsonl"))) == 5  # base, warm-up and seed 1's three models
    res, _ = run_tiny(cfg, out)
    assert res.returncode == 0, (res.stdout[-3000:], res.stderr[-3000:])
    assert "says this seed finished" in res.stdout  # seed 1 is not run again
    for name in ("summary.md", "summary_s1.md", "summary_s2.md"):
        assert comparable(out, name) == comparable(out0, name), name
    times = json.loads((out / "wall_times.json").read_text(encoding="utf-8"))
    assert times["2 SFT warm-up"] > 0 and times["s1 5 GRPO fine_s1"] > 0 and times["s2 5 GRPO fine_s2"] > 0
