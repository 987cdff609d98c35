"""The proof config is typed once (issue 61): load_config returns ProofConfig's dataclasses, and no proof module
but the loader (recipes/proof_stages/config.py, its value checks in values.py, and sections.py's `typed`, which
turns the checked YAML into the dataclasses) reads the YAML by key."""
from __future__ import annotations

import re
from pathlib import Path

from recipes.proof_stages.config import arm_specs, load_config
from recipes.proof_stages.sections import ProofConfig, StartStage

ROOT = Path(__file__).resolve().parents[1]
LOADER = {"config.py", "values.py", "sections.py"}  # sections.typed: the checked YAML typed


def proof_modules() -> list[Path]:
    """recipes/proof.py and the modules it is split into (recipes/proof_stages/)."""
    return [ROOT / "recipes" / "proof.py", *sorted((ROOT / "recipes" / "proof_stages").glob("*.py"))]


def test_no_proof_module_but_the_loader_indexes_the_config():
    indexed = re.compile(r"\bcfg(\[|\.get\()|\"[a-z_]+\" (not )?in (pr\.|self\.)?cfg\b")
    found = [f"{f.name}:{i}: {line.strip()}" for f in proof_modules() if f.name not in LOADER
             for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if indexed.search(line)]
    assert len(proof_modules()) >= 8 and not found, found


def test_the_shipped_configs_load_as_dataclasses():
    cfg = load_config(str(ROOT / "recipes" / "configs" / "proof_digital_transfer_cpu.yaml"))
    assert isinstance(cfg, ProofConfig) and cfg.transfer is not None and cfg.transfer.harder is not None
    assert all(isinstance(s, StartStage) for s in cfg.start) and cfg.start and cfg.start[-1].name == "start"
    assert cfg.control is None or isinstance(cfg.control.options, dict)
    assert list(arm_specs(cfg, expand=False)) == [a.name for a in cfg.grpo.arms] + (
        [f"{cfg.grpo.lr_matched}_lr_matched"] if cfg.grpo.lr_matched else [])
