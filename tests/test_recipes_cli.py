"""The recipes' command line (issue 40): read once by TRL's parser (recipes/shared/parser.py), abbreviations refused,
GRPO's checks in its config's __post_init__ and one validate() for dry and real runs, and library code that
raises TaseError where it finds a problem: only entry points (a recipe's `main`) print the line and exit 2
(tests/test_exits.py scans the source for anything else that ends the process)."""
from __future__ import annotations

import pytest
from conftest import ROOT, call_main

CPU = ["--use_cpu", "true", "--bf16", "false", "--dry-run"]


@pytest.mark.parametrize("script,argv,option", [
    ("recipes/grpo.py", ["--learning_rat", "1e-5"], "--learning_rat"),
    ("recipes/grpo.py", ["--num_gen", "4"], "--num_gen"),
    ("recipes/sft_warmup.py", ["--config", "recipes/configs/sft_smollm2_cpu.yaml", "--learning_rat", "nan"],
     "--learning_rat"),
])
def test_an_abbreviated_option_is_refused_not_read_as_the_full_one(script, argv, option, tmp_path):
    """argparse's allow_abbrev took `--learning_rat` as `--learning_rate`: a misspelling must be an error."""
    extra = CPU if script.endswith("grpo.py") else []
    code, err = call_main([script, *argv, *extra, "--output_dir", str(tmp_path / "o")])
    assert code == 2 and err.count("\n") == 1 and err.startswith("error: "), err[-2000:]
    assert option in err and "Traceback" not in err
    assert not (tmp_path / "o").exists()


def test_full_option_names_and_their_dash_spelling_still_parse():
    from recipes.grpo_core.args import parse

    tase, cfg, _ = parse(["--config", str(ROOT / "recipes/configs/grpo_smollm2_cpu.yaml"), "--learning-rate", "3e-6",
                          "--reward_granularity=coarse", "--dry-run"])
    assert cfg.learning_rate == 3e-6 and tase.reward_granularity == "coarse" and tase.dry_run


def test_grpo_config_checks_ranges_in_post_init_and_keeps_trl_s_options():
    """The config class is TRL's with a __post_init__ that checks what GRPOConfig divides by: no options of its
    own (the same --help), importable by name (the Trainer pickles it into training_args.bin)."""
    import dataclasses
    import pickle

    from trl import GRPOConfig

    from recipes.grpo_core import args as grpo_args

    cls = grpo_args.TaseGRPOConfig
    assert issubclass(cls, GRPOConfig) and cls is grpo_args.config_types("sync")[1]
    assert [f.name for f in dataclasses.fields(cls)] == [f.name for f in dataclasses.fields(GRPOConfig)]
    with pytest.raises(ValueError, match=r"^num_generations must be >= 2 \(GRPO compares completions of one "
                                         r"prompt\), got 0$"):
        cls(output_dir="o", use_cpu=True, num_generations=0)
    cfg = cls(output_dir="o", use_cpu=True, num_generations=2, per_device_train_batch_size=2)
    assert type(pickle.loads(pickle.dumps(cfg))) is cls


def test_library_functions_raise_tase_error_and_main_prints_it(tmp_path, capsys):
    """Callable and recoverable in-process: the same problem is a TaseError from the library function and one
    line with exit 2 from the recipe's main."""
    from common.errors import TaseError
    from recipes.grpo import main
    from recipes.shared import run_dir
    from recipes.shared.parser import parse_config, read_yaml

    (tmp_path / "f").write_text("a file\n")
    with pytest.raises(TaseError, match="is a file, not a folder"):
        run_dir.check_output_dir(str(tmp_path / "f"))
    with pytest.raises(TaseError, match="cannot read"):
        read_yaml(tmp_path / "missing.yaml")
    from recipes.shared.config import DataArgs

    with pytest.raises(TaseError, match="--config needs a file"):
        parse_config((DataArgs,), ["--config"])
    assert main([*CPU, "--output_dir", str(tmp_path / "f")]) == 2  # returned: only the script's __main__ block exits
    assert capsys.readouterr().err == f"error: output_dir {tmp_path / 'f'} is a file, not a folder\n"
