"""The recipes' pipelines end to end on CPU (split from tests/test_recipes.py so the two pytest workers share
them; same tiny random Llama with the real SmolLM2 tokenizer): a two-arm ablation, the proof's dry run, bad inputs
and completion files, and the SFT warm-up's wall-clock budget and over-long prompts."""
import json

import pytest
from conftest import ROOT, call_main
from test_recipes import PY, TINY_ARGS, run, run_together


@pytest.mark.slow
def test_ablate_two_arms_same_data_and_comparison(tiny_model, tmp_path):
    """Both arms train on the same data with the same seed, are exported and evaluated with the base
    model, and the comparison is written; a rerun reuses every finished step. The steps run in the ablation's
    interpreter (--in-process: one a run importing torch and TRL, not one a step); the second arm inherits nothing
    from the first there: its printed command, rerun by hand in a fresh interpreter, logs the same step (rewards,
    sampled tokens, entropy: a different seed changes them) with the same resolved options."""
    data = tmp_path / "three.jsonl"
    import synth

    data.write_text("".join(json.dumps(r) + "\n" for r in synth.generate("sort_lengths", "en", 3, 5, max_len=6)))
    out = tmp_path / "ablate"
    cmd = [PY, "recipes/ablate.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml", "--reward_granularity",
           "coarse", "fine", "--out", str(out), "--base", str(tiny_model), "--eval-data", str(data),
           "--max-new-tokens", "4",
           "--eval-backend", "hf",  # vLLM's CPU engine failed to start on this tiny random model (not investigated)
           "--in-process", "--", "--max_steps", "1", "--save_strategy", "no", *TINY_ARGS]
    res = run(cmd, timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    steps = [l[2:].split() for l in res.stdout.splitlines() if l.startswith("+ ")]
    assert len(steps) == 8  # 2 arms x (train, export), 3 evaluations, compare: each an entry point run in-process
    from recipes.steps.pipeline import entry_main

    assert all(entry_main(c, ROOT) for c in steps)
    summary = json.loads((out / "ablation.json").read_text())
    assert list(summary["models"]) == ["base", "coarse", "fine"]
    table = summary["comparisons"][str(data)]
    assert all(f"| {n} |" in table for n in ("base", "coarse", "fine"))
    cfgs = {g: json.loads((out / g / "tase_config.json").read_text()) for g in ("coarse", "fine")}
    assert (cfgs["coarse"]["tase"]["reward_granularity"] == "coarse"
            and cfgs["fine"]["tase"]["reward_granularity"] == "fine")
    for part in ("tase", "training"):  # same data and seed: only the granularity (and output folder) differ
        diff = {k for k in cfgs["coarse"][part] if cfgs["coarse"][part][k] != cfgs["fine"][part].get(k)}
        assert diff <= {"reward_granularity", "output_dir", "logging_dir", "run_name"}, diff
    ids = [[json.loads(l)["id"] for l in (out / "eval" / "data0" / n / "samples.jsonl").read_text().splitlines()]
           for n in ("base", "coarse", "fine")]
    assert ids[0] == ids[1] == ids[2] and len(ids[0]) == 3
    res = run(cmd)
    assert res.returncode == 0 and "grpo.py" not in res.stdout and "export.py" not in res.stdout  # nothing retrained
    # the fine arm trained second, after the coarse one in the same interpreter (seeds, RNG, rewards, features,
    # environment, TRL/transformers/accelerate state): its printed command alone in a fresh one gives the same arm
    fine = next(c for c in steps if c[1].endswith("grpo.py") and c[c.index("--output_dir") + 1] == str(out / "fine"))
    alone = tmp_path / "fine_alone"
    fine[fine.index("--output_dir") + 1] = str(alone)
    res = run(fine)
    assert res.returncode == 0, res.stderr[-3000:]
    timing = ("train_runtime", "train_samples_per_second", "train_steps_per_second", "step_time")

    def logged(run_dir):
        return [{k: v for k, v in json.loads(l).items() if not k.startswith(timing)}
                for l in (run_dir / "metrics.jsonl").read_text().splitlines()]

    assert logged(out / "fine") == logged(alone) and logged(alone)  # rewards, sampled tokens, entropy (seed-dependent)
    cfg = json.loads((alone / "tase_config.json").read_text())  # and the resolved options
    assert all(cfg[part] == cfgs["fine"][part] for part in ("tase", "model", "rewards"))
    diff = {k for k in cfg["training"] if cfg["training"][k] != cfgs["fine"]["training"].get(k)}
    assert diff <= {"output_dir", "logging_dir", "run_name"} and set(cfg["training"]) == set(cfgs["fine"]["training"])


PROOF = [PY, "recipes/proof.py"]
PROOF_FILES = [f"token_structure/component_count/{f}.csv" for f in ("english", "chinese", "korean")]


def test_proof_dry_run_prints_every_stage_and_runs_nothing(tmp_path, fixture_root):
    assert all((fixture_root / "tasks" / f).is_file() for f in PROOF_FILES)  # the default config's files
    out = tmp_path / "proof"
    # the measured completion files (docs/results.md)
    committed = ROOT / "docs" / "results" / "component_count_proof_cpu"

    def snapshot() -> dict:
        return {p: p.stat().st_mtime_ns for p in committed.rglob("*")} if committed.exists() else {}

    before = snapshot()
    res = run([*PROOF, "--dry-run", "--official", str(fixture_root), "--out", str(out)], timeout=60)
    assert res.returncode == 0, res.stderr[-2000:]
    assert [l.split()[1] for l in res.stdout.splitlines() if l.startswith("== ")][0] == "1/9"
    assert all(f"== {k}/9 " in res.stdout for k in range(1, 10))
    cmds = [l[2:] for l in res.stdout.splitlines() if l.startswith("+ ")]
    guard = f"--exclude official:{fixture_root}"
    sft = [c for c in cmds if "recipes/sft_warmup.py" in c]
    assert len(sft) == 1 and guard in sft[0] and "--tasks component_count --langs en zh ko --num_train_examples 384 " \
        "--synth_seed 777 --paraphrase false --learning_rate 0.0001 --logging_steps 8" in sft[0]
    grpo = [c for c in cmds if "recipes/grpo.py" in c]
    assert [c.split("--reward_funcs ")[1].split(" --")[0] for c in grpo] == [
        "accuracy_coarse format length_penalty", "accuracy_fine format length_penalty"]
    assert all(guard in c and f"--model_name_or_path {out / 'sft'}" in c for c in grpo)
    assert [c.replace("accuracy_fine", "accuracy_coarse").replace(str(out / "fine"), str(out / "coarse"))
            for c in grpo[1:]] == grpo[:1]  # the arms differ in the accuracy reward (and folder) only
    synth = [c for c in cmds if " -m synth " in c]
    assert len(synth) == 7 and "--lang all -n 300 --seed 4242" in synth[-1] and synth[-1].count("--exclude-exact") == 6
    assert sum(" -m eval run " in c for c in cmds) == 8 and sum(" -m eval compare " in c for c in cmds) == 2
    assert sum(" -m eval score " in c for c in cmds) == 12
    assert "--max-new-tokens 16" in next(c for c in cmds if " -m eval run " in c)
    assert not out.exists() and snapshot() == before


def test_proof_bad_inputs_are_one_line(tmp_path, fixture_root):
    def one_line(args, *want, subprocess: bool = False):
        if subprocess:  # the real CLI: exit code and the whole stderr of a fresh interpreter
            res = run([*PROOF, "--dry-run", *args], timeout=60)
            code, err = res.returncode, res.stderr
        else:
            code, err = call_main(["recipes/proof.py", "--dry-run", *args])
        assert code == 2 and err.startswith("error:") and err.count("\n") == 1, err
        assert all(w in err for w in want), err

    one_line(["--official", str(tmp_path / "missing")], "no such folder", subprocess=True)
    partial = tmp_path / "partial" / "tasks" / "token_structure" / "component_count"
    partial.mkdir(parents=True)
    (partial / "english.csv").write_bytes((fixture_root / "tasks" / PROOF_FILES[0]).read_bytes())
    one_line(["--official", str(tmp_path / "partial")], "no tasks/token_structure/component_count/chinese.csv")
    one_line([], "--official")
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "recipes" / "configs" / "proof_cpu.yaml").read_text()
                   .replace("  n: 300", "  n: 300\n  k: 1"))
    one_line(["--official", str(fixture_root), "--config", str(bad)], "heldout: unknown key 'k'")


def test_proof_completion_files_rescore_and_summary(tmp_path, fixture_root):
    """Stages 7-8 on evaluations faked with `eval score`: completion files in row order with the release ids,
    re-scored to the same accuracy (a mismatch is caught), and the summary's table and gains."""
    from eval.gold import gold_predictions
    from eval.runner import score_predictions
    from recipes.proof_stages import config as proof_config, report as proof_report, train as proof_train
    from recipes.steps.pipeline import Steps
    from synth import generate
    from synth.readers import load_data

    out, comp = tmp_path / "proof", tmp_path / "completions"
    proof_train.link_subset(fixture_root, PROOF_FILES, out / "official", dry_run=False)
    held = tmp_path / "heldout.jsonl"
    held.write_text("".join(json.dumps(r) + "\n" for r in generate("component_count", "all", 6, 1)))
    models = ["base", "warm-up", "coarse", "fine"]
    for dname, spec in (("official", f"official:{out / 'official'}"), ("heldout", str(held))):
        gold = list(gold_predictions(load_data(spec)))
        for k, name in enumerate(models):  # model k answers every (k+1)-th row right
            preds = tmp_path / f"{dname}_{name}.jsonl"
            preds.write_text("".join(json.dumps({"id": g["id"], "completion": g["completion"] if i % (4 - k) == 0
                                                 else "<answer>-1</answer>"}) + "\n" for i, g in enumerate(gold)))
            score_predictions(spec, preds, out / "eval" / dname / name)
    step = Steps("proof", 8, ROOT)
    two = ["base", "fine"]
    assert proof_report.completions_stage(step, out, PROOF_FILES[:1], two, comp, f"official:{out / 'official'}") == []
    lines = [json.loads(l) for l in (comp / "fine" / "component_count" / "english.jsonl").read_text().splitlines()]
    assert [l["id"] for l in lines] == [f"component_count/english/{i}" for i in range(len(lines))] and len(lines) == 6
    assert set(step.times) == {"7 completion files + re-score"}
    res = out / "eval" / "official" / "fine" / "results.json"  # a run whose accuracy the completions do not give
    r = json.loads(res.read_text())
    r["by_file"][PROOF_FILES[0]]["accuracy"] += 1
    res.write_text(json.dumps(r))
    assert proof_report.completions_stage(step, out, PROOF_FILES[:1], two, comp,
                                          "unused: re-scores are up to date") == [f"fine {PROOF_FILES[0]}"]
    r["by_file"][PROOF_FILES[0]]["accuracy"] -= 1
    res.write_text(json.dumps(r))
    cfg = proof_config.load_config(str(ROOT / "recipes" / "configs" / "proof_cpu.yaml"))
    text = proof_report.summary(out, cfg, models, 200, step, 1.0)
    assert "| model | component_count/english | component_count/chinese | component_count/korean |" in text
    assert "  GRPO fine vs warm-up " in text and "  fine vs coarse " in text and "| total |" in text


@pytest.mark.slow
def test_sft_max_train_seconds_stops_on_the_clock_and_saves(tiny_model, tmp_path):
    """The proof's more-SFT control arm: a wall-clock budget ends training long before max_steps, and the
    model is still saved; a budget <= 0 is one line and exit 2."""
    out = tmp_path / "sft"
    base = [PY, "recipes/sft_warmup.py", "--model_name_or_path", str(tiny_model), "--use_cpu", "true", "--bf16",
            "false", "--dtype", "float32", "--tasks", "sort_lengths", "--langs", "en", "--max_len", "6",
            "--num_train_examples", "64", "--per_device_train_batch_size", "2", "--max_steps", "32",
            "--lr_scheduler_type", "constant", "--report_to", "none", "--save_strategy", "no", "--paraphrase",
            "false", "--output_dir", str(out)]
    res, bad = run_together([*base, "--max_train_seconds", "0.001"],
                            [*base[:-1], str(tmp_path / "bad"), "--max_train_seconds", "0"])
    assert res.returncode == 0, res.stderr[-3000:]
    assert "max_train_seconds 0.001 reached at step 1; stopping" in res.stdout
    assert (out / "model.safetensors").is_file()
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 1
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == ["error: max_train_seconds must be > 0, got 0.0"]


def test_sft_prompts_filling_max_length_are_one_line(tiny_model, tmp_path, capsys):
    """Rows whose prompt alone fills max_length would lose their answer to truncation: TRL dropped them all and
    failed with `num_samples=0`. Now: a partial drop is counted in one line, a total one is one line naming
    max_length and exit 2, before any training."""
    from transformers import AutoTokenizer

    from recipes import sft_warmup
    from recipes.shared.config import DataArgs
    from recipes.shared.data import PromptLength, iter_records

    tok = AutoTokenizer.from_pretrained(tiny_model)
    args = DataArgs(tasks=["sort_lengths"], langs=["en"], max_len=6, num_train_examples=8, synth_seed=5,
                    paraphrase=True)
    lengths = sorted(map(PromptLength(tok, args.system_prompt), iter_records(args)))
    assert lengths[0] < lengths[-1]  # paraphrased templates: prompts of different lengths
    ds = sft_warmup.build_sft_dataset(args, tok, max_length=lengths[-1])
    dropped = sum(n >= lengths[-1] for n in lengths)
    assert len(ds) == 8 - dropped
    assert capsys.readouterr().err.strip().splitlines() == [
        f"dropped {dropped} of 8 SFT examples whose prompt fills max_length {lengths[-1]} tokens (longest "
        f"{lengths[-1]}): truncation would leave them no answer"]
    argv = ["--model_name_or_path", str(tiny_model), "--use_cpu", "true", "--bf16", "false", "--tasks",
            "sort_lengths", "--langs", "en", "--max_len", "6", "--num_train_examples", "8", "--synth_seed", "5",
            "--max_length", "8", "--report_to", "none", "--output_dir", str(tmp_path / "sft")]
    assert sft_warmup.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: max_length 8: all 8 SFT examples have prompts of 8 tokens "
                                               "or more (longest "), err
    assert not (tmp_path / "sft" / "model.safetensors").exists()
