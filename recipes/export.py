"""Export a training checkpoint as a plain bf16 Hugging Face folder that `eval run` and vLLM load as is.

    python recipes/export.py runs/grpo_smollm2_cpu/checkpoint-40 --out models/tuned [--force] [--results DIR ...]
    python recipes/export.py runs/grpo_smollm2_cpu --out models/tuned --card-only --results runs/eval/tuned
    python recipes/export.py runs/grpo_smollm2_cpu --out models/tuned --gguf q8_0   # + model.gguf, Modelfile

Full checkpoints are re-saved in bf16 (safetensors); PEFT/LoRA checkpoints are merged into their base
model first. The tokenizer and its chat template come along (from the checkpoint, its run folder or the
base model). A README.md model card records the training configuration (tase_config.json of the run) and
the evaluation results given with --results (results.json of `eval run`) or found under the run's
`eval/*/results.json`; `--card-only` rewrites just the card of an existing export (after evaluating it).
`--gguf TYPE` (f16, q8_0, bf16, f32) also writes model.gguf for llama.cpp and an Ollama Modelfile beside it
(recipes/shared/gguf_export.py; Llama models with a byte-level BPE tokenizer, as the default SmolLM2).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

from common.errors import TaseError, one_line_exit
from common.paths import (
    OutputBusy,
    followed,
    hold_output,
    os_error_line,
    output_refusal,
    recover_replace,
    replace_folder,
    write_marker,
)
from common.process import apply as process_settings, pop_verbose
from recipes.shared.gguf_export import TYPES as GGUF_TYPES
from recipes.shared.run_dir import checkpoint_problem


def find_up(ckpt: Path, name: str) -> Path | None:
    for d in (ckpt, ckpt.parent):
        if (d / name).is_file():
            return d / name
    return None


def found_results(ckpt: Path) -> list[Path]:
    """Eval results kept beside a run (RUN/eval/*/results.json) for the card when --results is not given."""
    seen = []
    for d in (ckpt, ckpt.parent):
        seen += sorted(d.glob("eval/*/results.json"))
    return seen


def read_json(path: Path, advice: str) -> dict:
    """A JSON object the project wrote (trainer state, config, results); a torn or truncated one (what a
    kill mid-save leaves) is one line naming the file and what to do, not a traceback."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise TaseError(f"{path}: cannot read ({e.strerror})") from e
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise TaseError(f"{path}: torn or truncated (not valid JSON); {advice}") from None
    if not isinstance(obj, dict):
        raise TaseError(f"{path}: not a JSON object; {advice}")
    return obj


def previous_hint(ckpt: Path) -> str:
    """', e.g. RUN/checkpoint-N' naming the newest complete checkpoint before `ckpt` (for a run folder: the
    newest complete checkpoint in it), or ''."""
    run = ckpt.parent if ckpt.name.startswith("checkpoint-") else ckpt
    step = int(ckpt.name.split("-")[-1]) if ckpt.name.split("-")[-1].isdigit() and run != ckpt else None
    done = sorted((int(c.name.split("-")[-1]), c) for c in run.glob("checkpoint-*")
                  if c.name.split("-")[-1].isdigit() and c != ckpt
                  and checkpoint_problem(c, weights_only_ok=True) is None)
    done = [c for n, c in done if step is None or n < step]
    return f", e.g. {done[-1]}" if done else ""


def check_weights_present(ckpt: Path) -> None:
    """Refuse a checkpoint that a kill mid-save left with its config but no weights at all: the Trainer
    writes config.json (adapter_config.json) first, then the weights, into the folder itself. Named as torn,
    with the previous complete checkpoint; --allow-pickle-weights (the advice for a folder holding only
    pickle weights) would not help."""
    from common.models import PICKLE_WEIGHTS

    if (ckpt / "adapter_config.json").is_file():
        have = any(ckpt.glob("adapter_model*.safetensors")) or (ckpt / "adapter_model.bin").is_file()
        what = "adapter_config.json but no adapter weights"
    elif (ckpt / "config.json").is_file():
        have = (any(ckpt.glob("*.safetensors")) or (ckpt / "model.safetensors.index.json").is_file()
                or any((ckpt / f).exists() for f in PICKLE_WEIGHTS))
        what = "config.json but no model weights"
    else:
        return
    if not have:
        raise TaseError(f"{ckpt}: torn checkpoint ({what}: a save killed midway); export an earlier checkpoint "
             f"instead{previous_hint(ckpt)}")


def check_checkpoint(ckpt: Path) -> None:
    """Refuse a torn checkpoint before minutes of loading: its trainer_state.json, config.json and
    safetensors weights must be whole (a kill mid-save leaves one of them short)."""
    from common.models import ModelError, check_model_files, safetensors_problem

    advice = f"export an earlier checkpoint instead{previous_hint(ckpt)}"
    if (ckpt / "trainer_state.json").is_file():
        read_json(ckpt / "trainer_state.json", advice)
    if (ckpt / "adapter_config.json").is_file():
        read_json(ckpt / "adapter_config.json", advice)
        for f in sorted(ckpt.glob("adapter_model*.safetensors")):
            why = safetensors_problem(f)
            if why:
                raise TaseError(f"{f}: {why}; {advice}")
    elif (ckpt / "config.json").is_file():
        try:
            check_model_files(ckpt, advice)
        except ModelError as e:
            raise TaseError(str(e)) from e


def model_card(ckpt: Path, out_name: str, results: list[Path], merged_from: str | None,
               gguf: str | None = None) -> str:
    """The README.md of an export; `gguf`: the type of its model.gguf ("" for one of unknown type), None: none."""
    lines = [f"# {out_name}", "", f"Exported by tase-grpo `recipes/export.py` from `{ckpt}`"
             + (f" (LoRA merged into `{merged_from}`)" if merged_from else "") + ".", ""]
    if gguf is not None:
        lines += ["## GGUF", "", f"`model.gguf`{f' ({gguf})' if gguf else ''} runs in llama.cpp "
                  "(`llama-cli -m model.gguf`) and Ollama (`ollama create NAME -f Modelfile`).", ""]
    cfg = find_up(ckpt, "tase_config.json")
    if cfg:
        c = read_json(cfg, "fix or remove it, or pass --results/another checkpoint")
        tase = c.get("tase") or c.get("data") or {}
        tr = c.get("training", {})
        lines += ["## Training", "", "| option | value |", "|---|---|"]
        for k in ("model",):
            if k in c:
                lines.append(f"| base model | `{c[k].get('model')}` |")
        synth_only = ("tasks", "langs", "subtasks", "mixture", "synth_seed", "max_len", "paraphrase")
        for k in ("train_data", *synth_only, "num_train_examples", "skip_examples", "streaming", "max_prompt_tokens",
                  "reward_granularity", "format_reward", "system_prompt"):
            if (k == "subtasks" and tase.get(k) is None) or (k == "skip_examples" and not tase.get(k)):
                continue  # unset: every subtask, no rows skipped (older runs have no such keys)
            if k in tase and not (k in synth_only and tase.get("train_data", "synth") != "synth"):
                lines.append(f"| {k} | `{tase[k]}` |")
        for k in ("learning_rate", "lr_scheduler_type", "max_steps", "num_train_epochs", "per_device_train_batch_size",
                  "gradient_accumulation_steps", "num_generations", "max_completion_length", "temperature", "beta",
                  "loss_type", "seed"):
            if k in tr and not (k == "num_train_epochs" and (tr.get("max_steps") or 0) > 0):
                lines.append(f"| {k} | `{tr[k]}` |")
        if "rewards" in c:
            lines.append(f"| rewards | `{c['rewards']}` |")
        lines.append("")
    state = find_up(ckpt, "trainer_state.json")
    if state:
        st = read_json(state, f"export an earlier checkpoint instead{previous_hint(ckpt)}")
        logs = [h for h in st.get("log_history", []) if "reward" in h]
        if logs:
            first, last = logs[0], logs[-1]
            lines += ["## Training log", "", f"{st.get('global_step')} steps. Reward {first['reward']:.3f} (step "
                      f"{first.get('step')}) -> {last['reward']:.3f} (step {last.get('step')}); frac_reward_zero_std "
                      f"{first.get('frac_reward_zero_std', float('nan')):.2f} -> "
                      f"{last.get('frac_reward_zero_std', float('nan')):.2f}.", ""]
    for r in results:
        f = r / "results.json" if r.is_dir() else r
        if f.is_file():
            res = read_json(f, "rerun that evaluation, or leave it out of --results")
            if not all(k in res for k in ("overall", "micro", "n", "by_task")):
                raise TaseError(f"{f}: not an `eval` results file (rerun that evaluation, or leave it out of "
                                "--results)")
            lines += [f"## Evaluation of `{res.get('model')}` on `{res.get('data')}`", "",
                      f"Overall {res['overall']:.2f} (micro {res['micro']['overall']:.2f}, n={res['n']}).", "",
                      "| task | accuracy |", "|---|---:|"]
            lines += [f"| {k} | {v:.2f} |" for k, v in res["by_task"].items()] + [""]
    return "\n".join(lines)


@one_line_exit
def main(argv: list[str] | None = None) -> int:
    argv, verbose = pop_verbose(argv)
    process_settings(verbose or None)  # OpenMP wait policy, before torch loads; quiet libraries (common/process.py)
    p = argparse.ArgumentParser(prog="python recipes/export.py", description=__doc__.splitlines()[0])
    p.add_argument("--verbose", action="store_true", help="show the libraries' messages that are filtered by "
                   "default (common/process.py, QUIET)")
    p.add_argument("checkpoint", help="a Trainer checkpoint or output folder (full model or PEFT adapter)")
    p.add_argument("--out", required=True, help="destination folder (must be empty unless --force)")
    p.add_argument("--force", action="store_true", help="replace an earlier export at --out (never a folder "
                   "holding anything that export did not write: the checkpoint, a training run, eval output, notes)")
    p.add_argument("--allow-pickle-weights", action="store_true", help="accept a checkpoint or base model without "
                   "safetensors weights (pickle files can run code; trusted folders only)")
    p.add_argument("--base", default=None, help="base model for a PEFT checkpoint (default: from adapter_config)")
    p.add_argument("--results", action="append", default=[], help="eval result folders to put in the model card "
                   "(default: CHECKPOINT/eval/*/ or its run folder's, when present)")
    p.add_argument("--card-only", action="store_true", help="only rewrite README.md of an existing export at --out")
    p.add_argument("--gguf", nargs="?", const="f16", choices=GGUF_TYPES, metavar="TYPE",
                   help="also write OUT/model.gguf for llama.cpp and OUT/Modelfile for Ollama; TYPE is f16 (the "
                   "default when only --gguf is given), q8_0 (half the size, near lossless), bf16 or f32. Llama "
                   "models with a byte-level BPE tokenizer (the default SmolLM2); others are refused")
    args = p.parse_args(argv)
    if args.card_only and args.gguf:
        raise TaseError("--card-only rewrites only the model card; export again with --gguf (and --force) instead")
    ckpt, out = Path(args.checkpoint), followed(args.out)  # a symlinked --out: its target is replaced, the link stays
    if out.name in ("", ".", ".."):  # name the folder itself: its temp and old-* siblings are named after it
        out = Path(os.path.abspath(out))
    if not ckpt.is_dir():
        raise TaseError(f"{ckpt}: no such checkpoint folder")
    results = [Path(r) for r in args.results] or found_results(ckpt)
    for r in results:
        if not (r / "results.json" if r.is_dir() else r).is_file():
            raise TaseError(f"{r}: no results.json (an `eval run` output folder is expected)")
    check_out(out)
    try:
        with hold_output(out):  # one writer per --out: a second export stops here, naming the first
            return _main(args, ckpt, out, results)
    except OutputBusy as e:
        raise TaseError(str(e)) from e
    return 2


def _main(args: argparse.Namespace, ckpt: Path, out: Path, results: list[Path]) -> int:
    if args.card_only:
        if not (out / "config.json").is_file():
            raise TaseError(f"{out}: not an exported model folder (no config.json); export it first")
        adapter = ckpt / "adapter_config.json"
        base = args.base or (read_json(adapter, "re-save the adapter").get("base_model_name_or_path")
                             if adapter.is_file() else None)
        card = out / "README.md"
        tmp_card = out / ".README.md.tmp"
        gguf = "" if (out / "model.gguf").is_file() else None
        tmp_card.write_text(model_card(ckpt, out.name, results, base, gguf), encoding="utf-8")
        os.replace(tmp_card, card)
        print(f"model card rewritten: {card}")
        return 0
    recover_replace(out)
    if out.exists() and any(out.iterdir()):
        if not args.force:
            raise TaseError(f"{out} is not empty; pass --force to overwrite it")
        guard_force(ckpt, out)
    check_weights_present(ckpt)
    if not args.allow_pickle_weights:
        weights = "adapter_model.safetensors" if (ckpt / "adapter_config.json").is_file() else None
        if weights and not (ckpt / weights).is_file():
            raise TaseError(f"{ckpt}: no {weights}; pass --allow-pickle-weights to load adapter_model.bin if you trust "
                            "it")
        if not weights and (ckpt / "config.json").is_file():
            from common.models import ModelError, check_safetensors

            try:
                check_safetensors(ckpt)
            except ModelError as e:
                raise TaseError(str(e)) from e
    check_checkpoint(ckpt)
    if args.gguf and (ckpt / "config.json").is_file() and not (ckpt / "adapter_config.json").is_file():
        from recipes.shared.gguf_export import config_refusal  # before loading; a merged LoRA: after the merge

        why = config_refusal(read_json(ckpt / "config.json", "export an earlier checkpoint instead"), ckpt)
        if why:
            raise TaseError(why)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:  # made now, so an unwritable destination fails before minutes of loading
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as e:
        raise TaseError(f"{out.parent}: cannot write there ({e.strerror})") from e
    from safetensors import SafetensorError

    try:
        return _export(args, ckpt, out, tmp, results)
    except OSError as e:  # e.g. a full disk while saving: the old --out is untouched, the temp folder goes
        raise TaseError(f"cannot write the export: {os_error_line(e)}; {out} is unchanged") from e
    except SafetensorError as e:  # the same from safetensors' writer (a Rust IoError, not an OSError)
        raise TaseError(f"cannot write the export: {safetensors_error_line(e)}; {out} is unchanged") from e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def safetensors_error_line(e: Exception) -> str:
    """safetensors' own error text, e.g. 'Error while serializing: I/O error: No space left on device (os error
    28)' (the form varies with the version), as one line."""
    return " ".join(str(e).split()) or type(e).__name__


def check_out(out: Path) -> None:
    """--out must be a folder or creatable as one."""
    try:
        out.exists()
    except OSError as e:  # e.g. a name the file system refuses (too long)
        raise TaseError(f"{out.parent}: cannot write there ({e.strerror})") from e
    if out.exists() and not out.is_dir():
        raise TaseError(f"--out {out} is a file, not a folder")
    from common.paths import write_blocker

    blocked = write_blocker(out)
    if blocked and blocked[1] == "file":  # an unwritable folder fails later, when the export writes
        raise TaseError(f"--out {out}: {blocked[0]} is a file, not a folder")


def guard_force(ckpt: Path, out: Path) -> None:
    """--force replaces an earlier export and nothing else (common/paths.py, `output_refusal`): never the
    checkpoint, the current directory, a folder that is or holds another command's output (a training run,
    an eval run, scores, ...) at any depth, or one holding files the earlier export did not write."""
    src, dst = ckpt.resolve(), out.resolve()
    if dst == src or dst in src.parents:
        raise TaseError(f"--out {out} contains the checkpoint being exported ({ckpt}); choose another --out")
    why = output_refusal(out, "export", reading=(ckpt,))
    if why:
        raise TaseError(f"--out {why}; --force only replaces an earlier export")


def _export(args: argparse.Namespace, ckpt: Path, out: Path, tmp: Path, results: list[Path]) -> int:
    """Load, convert to bf16, write everything into `tmp`, then swap it in for `out`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    merged_from = None
    if (ckpt / "adapter_config.json").is_file():
        from peft import PeftModel

        from recipes.shared.lora_check import check_adapter

        base, base_path = check_adapter(ckpt, args.base, args.allow_pickle_weights)  # named, same shapes: or one line
        model = AutoModelForCausalLM.from_pretrained(base_path, dtype=torch.bfloat16,
                                                     use_safetensors=None if args.allow_pickle_weights else True)
        model = PeftModel.from_pretrained(model, str(ckpt)).merge_and_unload()
        merged_from, tok_sources = str(base), [ckpt, ckpt.parent, Path(base_path)]
    elif (ckpt / "config.json").is_file():
        model = AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.bfloat16,
                                                     use_safetensors=None if args.allow_pickle_weights else True)
        tok_sources = [ckpt, ckpt.parent]
    else:
        raise TaseError(f"{ckpt}: neither a model (config.json) nor a PEFT adapter (adapter_config.json)")
    tok = None
    for src in tok_sources:
        if (src / "tokenizer_config.json").is_file():
            tok = AutoTokenizer.from_pretrained(src)
            break
    if tok is None:
        raise TaseError(f"no tokenizer found in {', '.join(map(str, tok_sources))}")
    if not tok.chat_template:
        print("warning: the tokenizer has no chat template; eval run needs one", file=sys.stderr)
    model.to(torch.bfloat16).save_pretrained(tmp, safe_serialization=True)
    tok.save_pretrained(tmp)
    gguf_line = write_gguf_files(args.gguf, ckpt, model, tmp, out) if args.gguf else ""
    (tmp / "README.md").write_text(model_card(ckpt, out.name, results, merged_from, args.gguf), encoding="utf-8")
    for name in ("tase_config.json",):
        src = find_up(ckpt, name)
        if src:
            shutil.copy(src, tmp / name)
    write_marker(tmp, "export")  # what a later --force may replace: this folder, these files
    replace_folder(tmp, out)
    print(f"exported {ckpt} -> {out} (bf16{', LoRA merged' if merged_from else ''})")
    if gguf_line:
        print(gguf_line)
    return 0


def write_gguf_files(qtype: str, ckpt: Path, model: object, tmp: Path, out: Path) -> str:
    """model.gguf (from the bf16 weights just saved in `tmp`) and the Ollama Modelfile beside it, or one line
    refusing a model --gguf does not cover; the line that says what was written."""
    from common.prompts import SYSTEM_PROMPT
    from recipes.shared.gguf_export import (
        GGUF_NAME,
        MODELFILE,
        config_refusal,
        modelfile,
        tokenizer_refusal,
        write_gguf,
    )

    why = config_refusal(model.config.to_dict(), ckpt) or tokenizer_refusal(tmp)
    if why:
        raise TaseError(why)
    tensors, size = write_gguf(tmp, model.state_dict(), tmp / GGUF_NAME, qtype, out.name)
    cfg = find_up(ckpt, "tase_config.json")
    tase = read_json(cfg, "fix or remove it") if cfg else {}
    system = (tase.get("tase") or tase.get("data") or {}).get("system_prompt", SYSTEM_PROMPT)
    (tmp / MODELFILE).write_text(modelfile(tmp, system), encoding="utf-8")
    return (f"GGUF: {out / GGUF_NAME} ({qtype}, {tensors} tensors, {size / 2**20:.1f} MiB) and {out / MODELFILE} "
            f"for Ollama (docs/training.md, Export)")


if __name__ == "__main__":
    raise SystemExit(main())
