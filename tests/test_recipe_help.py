"""The recipes' --help (issue 81): a short usage line, then the options by section (ours: data, rewards, run, each
feature's; then TRL's and transformers' own), as `python -m eval --help` reads; argparse's usage line of every
option (235 lines before the first option, 1,574 in all) is gone. recipes/shared/parser.py keeps its own list of the
options it adds (no private argparse attribute)."""
from __future__ import annotations

import re

import pytest


def _help(capsys, main) -> list[str]:
    with pytest.raises(SystemExit) as e:
        main(["--help"])
    assert e.value.code in (0, None)
    return capsys.readouterr().out.splitlines()


def _titles(lines: list[str]) -> list[str]:
    """The section titles: a line after a blank one, ending in ':', whose next line is an option."""
    return [x[:-1] for i, x in enumerate(lines[1:-1], 1)
            if not lines[i - 1] and x.endswith(":") and lines[i + 1].startswith("  --")]


def test_grpo_help_opens_with_options_by_section(capsys):
    from recipes import grpo

    lines = _help(capsys, grpo.main)
    assert lines[0] == "usage: python recipes/grpo.py [--config FILE.yaml] [--OPTION VALUE ...]"
    assert not [x for x in lines[1:] if x.startswith("usage:") or x.startswith("       [--")]
    head = lines[:30]
    assert "data:" in head and sum(x.startswith("  --") for x in head) >= 10  # head -30 shows options
    assert head[head.index("data:") + 1].startswith("  --train_data VALUE ")
    titles = _titles(lines)
    assert titles[:3] == ["data", "rewards", "run"]
    assert "feature dynamic_sampling" in titles and "feature cpu_speed" in titles
    assert titles[-3:] == ["TRL's GRPOConfig", "transformers' TrainingArguments", "TRL's ModelConfig"]
    text = "\n".join(lines)
    # every option the parser knows is listed once, in one section; booleans with their --no_ form
    import dataclasses

    from recipes.grpo_core.args import config_types
    from recipes.shared.config import TaseArgs

    names = [f.name for t in config_types("sync") for f in dataclasses.fields(t)]
    listed = re.findall(r"^  --(\w+)", text, flags=re.M)
    assert sorted(listed) == sorted(set(names)), set(names) ^ set(listed)
    assert "  --format_reward [true|false], --no_format_reward" in text
    assert re.search(r"^  --trainer \{sync,async\} +sync: TRL's GRPOTrainer", text, flags=re.M)
    assert re.search(r"^  --format_weight FLOAT +weight of the format reward \(default: 0.2\)$", text, flags=re.M)
    assert {"dynamic_sampling", "reward_granularity"} <= {f.name for f in dataclasses.fields(TaseArgs)}
    assert max(len(x) for x in lines) <= 120


def test_sft_warmup_help_shares_the_sections(capsys):
    from recipes import sft_warmup

    lines = _help(capsys, sft_warmup.main)
    assert lines[0] == "usage: python recipes/sft_warmup.py [--config FILE.yaml] [--OPTION VALUE ...]"
    titles = _titles(lines)
    assert titles[0] == "data" and "rewards" not in titles  # the warm-up has no reward options
    assert titles[-3:] == ["TRL's SFTConfig", "transformers' TrainingArguments", "TRL's ModelConfig"]
    assert sum(x.startswith("  --") for x in lines[:30]) >= 10


def test_the_parser_reads_no_private_argparse_attribute():
    import inspect

    from recipes.shared import parser

    assert "._actions" not in inspect.getsource(parser) and "_HelpAction" not in inspect.getsource(parser)
