"""Drop-in for TRL's own CLI (issue 50): `python -m synth --format conversational` writes rows whose `prompt` is the
conversation the recipes train on, and `trl grpo --dataset_name DIR --reward_funcs rewards.trl.accuracy_fine ...`
trains on them with our rewards loaded by import path, the prompts carrying the official system prompt."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, call_main, tree_env

from common.prompts import SYSTEM_PROMPT

TRL = str(Path(sys.executable).parent / "trl")  # TRL's console script: `#!<this python>`, then trl.cli's main


def synth_rows(out: Path, fmt: str) -> list[dict]:
    """`python -m synth` (its main, in this process) writing 4 sort_lengths rows in format `fmt` to `out`."""
    code, err = call_main(["-m", "synth", "--task", "sort_lengths", "--lang", "en", "-n", "4", "--max-len", "5",
                           "--seed", "3", "--format", fmt, "--out", str(out), "--no-progress"])
    assert code == 0, err
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_conversational_rows_are_the_recipes_rows(tmp_path):
    from recipes.shared.data import to_row

    records = synth_rows(tmp_path / "records.jsonl", "records")
    rows = synth_rows(tmp_path / "train.jsonl", "conversational")
    assert rows == [to_row(r, SYSTEM_PROMPT) for r in records]  # one definition: synth.rows.conversational_row
    assert rows[0]["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert rows[0]["prompt"][1] == {"role": "user", "content": records[0]["prompt"]}
    assert {"type", "question", "answer", "variation"} <= set(rows[0])


@pytest.mark.slow  # one `trl grpo` step: TRL's CLI and its training process (~28 CPU-s when both start fresh)
def test_trl_grpo_cli_trains_on_synth_conversational_output(tiny_model, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    rows = synth_rows(data / "train.jsonl", "conversational")
    log = tmp_path / "prompts.jsonl"
    res = subprocess.run(
        # the console script run by its own interpreter, as its shebang runs it: the warm interpreter forks it, and
        # the training process TRL's CLI then launches (accelerate's launcher, `python trl/scripts/grpo.py`)
        [sys.executable, TRL, "grpo", "--model_name_or_path", str(tiny_model), "--dataset_name", str(data),
         "--reward_funcs", "rewards.trl.accuracy_fine", "rewards.trl.format_reward",
         "tests.user_rewards.record_prompts", "--output_dir", str(tmp_path / "out"), "--max_steps", "1",
         "--per_device_train_batch_size", "2", "--num_generations", "2", "--max_completion_length", "6",
         "--use_cpu", "true", "--bf16", "false", "--dtype", "float32", "--report_to", "none", "--save_strategy", "no",
         "--logging_steps", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env=tree_env(TASE_PROMPT_LOG=str(log)))
    assert res.returncode == 0, res.stderr[-3000:]
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(seen) == 2  # one step: 1 prompt x 2 generations
    assert all(p[0] == {"role": "system", "content": SYSTEM_PROMPT} and p[1]["role"] == "user" for p in seen)
    assert {p[1]["content"] for p in seen} <= {r["question"] for r in rows}
    assert ("'rewards/accuracy_fine/mean'" in res.stdout + res.stderr
            and "'rewards/format/mean'" in res.stdout + res.stderr)
