"""Issue 81's untrue texts, each checked against the numbers it describes: the SFT warm-up's closing line counts the
examples its steps trained on, not the size of the set (it said 256 after 4 steps of 8 rows). The demo's GRPO line
and gain lines are in tests/test_demo_summary.py, the ablation footer in tests/test_ablate_grid.py."""
from __future__ import annotations

import pytest

from recipes.sft_warmup import trained_rows


def test_trained_rows_counts_what_the_steps_took():
    assert trained_rows(4, 256, 8, 1) == "4 steps, 32 examples of a set of 256"  # max_steps ended the epoch early
    assert trained_rows(8, 64, 8, 1) == "8 steps, 64 examples"
    assert trained_rows(16, 64, 8, 1) == "16 steps, 2 epochs of 64 examples"
    assert trained_rows(10, 64, 8, 1) == "10 steps, 80 examples of a set of 64 (1 epoch and part of another)"
    assert trained_rows(3, 20, 8, 1) == "3 steps, 20 examples"  # the epoch's last batch holds 4
    assert trained_rows(1, 20, 4, 2, processes=2) == "1 step, 16 examples of a set of 20"  # 2 x 4 rows, twice
    assert trained_rows(2, 20, 4, 2, processes=2) == "2 steps, 20 examples"


@pytest.mark.slow
def test_sft_warmup_says_how_many_examples_it_trained_on(tiny_model, tmp_path, capsys):
    """4 steps of 8 rows from the demo's 64 (fewer once rows without a writable gold answer are skipped): the
    closing line says 32 examples and the set's size, as trainer_state.json counts the steps and their batch."""
    import json
    import re

    from conftest import ROOT

    from recipes import sft_warmup

    out = tmp_path / "sft"
    code = sft_warmup.main(["--config", str(ROOT / "recipes" / "configs" / "sft_smollm2_cpu.yaml"),
                            "--model_name_or_path", str(tiny_model), "--output_dir", str(out), "--max_steps", "4",
                            "--report_to", "none", "--num_train_examples", "64"])
    assert code == 0
    said = [x for x in capsys.readouterr().out.splitlines() if x.startswith("saved to ")]
    m = re.fullmatch(re.escape(f"saved to {out} (4 steps, 32 examples of a set of ") + r"(\d+)\)", said[0])
    assert len(said) == 1 and m and 32 < int(m[1]) <= 64, said  # it said "(64 examples)" before
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 4 and state["train_batch_size"] == 8
