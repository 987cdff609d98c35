"""The faster CPU step (issue 52, recipes/features/cpu_speed/speed.py) learns what the float32 step learns: on one fixed
batch of the combine config (real SmolLM2-135M weights cut to their first LAYERS layers, 2 prompts x 8 fixed
completions, no generation) the old path (float32, every
position scored) and the new one (bf16 autocast over float32 weights, completion tokens only) give the same rewards
and loss, per-token log-probs within bf16 rounding (mean < 0.06), and a gradient and AdamW update pointing the same way;
plus how `cpu_bf16` resolves and reaches the parsed config."""
from __future__ import annotations

import pytest
import torch
from conftest import ROOT

from common.errors import TaseError
from common.prefill import common_prefix
from recipes.features.cpu_speed import speed as cpu_speed

CONFIG = str(ROOT / "recipes" / "configs" / "grpo_combine_cpu.yaml")
# SmolLM2-135M's embeddings, tied LM head, final norm and first 2 of its 30 layers: the real weights' scales (what bf16
# rounds) at a fifth of the cost. The bf16 path is emulated where the CPU lacks native bf16 (AVX2-only): one step of the
# whole model took 473 s there (load 3.5), against 57 s in float32.
LAYERS = 2


@pytest.fixture(scope="module")
def real_first_layers(tmp_path_factory, default_model):
    """The default model's first LAYERS layers (with its embeddings, final norm, tied LM head and tokenizer),
    float32."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = tmp_path_factory.mktemp("smollm2_first_layers")
    model = AutoModelForCausalLM.from_pretrained(default_model, dtype=torch.float32, num_hidden_layers=LAYERS)
    assert model.config.num_hidden_layers == LAYERS and model.config.hidden_size == 576  # SmolLM2-135M's width
    model.save_pretrained(out)
    AutoTokenizer.from_pretrained(default_model).save_pretrained(out)
    return out


def test_cpu_bf16_resolves_where_native_and_explicit_bf16_wins():
    assert cpu_speed.native_bf16({"avx2", "avx512f", "avx512_bf16"})
    assert cpu_speed.native_bf16({"avx2", "amx_bf16", "amx_tile"})
    assert not cpu_speed.native_bf16({"avx2", "avx512f", "fma"})
    assert cpu_speed.resolve("auto", native=True) and not cpu_speed.resolve("auto", native=False)
    assert cpu_speed.resolve("true", native=False) and not cpu_speed.resolve("false", native=True)
    on = ["--bf16", "true"] if cpu_speed.native_bf16() else []
    given = {"cpu_bf16"}
    assert cpu_speed.bf16_argv("auto", given, on_cpu=True, trainer="sync") == (on or ["--bf16", "false"])
    assert cpu_speed.bf16_argv("true", given, on_cpu=True, trainer="sync") == ["--bf16", "true"]
    assert cpu_speed.bf16_argv("false", given, on_cpu=True, trainer="sync") == ["--bf16", "false"]
    assert cpu_speed.bf16_argv("true", given | {"bf16"}, on_cpu=True, trainer="sync") == []  # explicit bf16 wins
    assert cpu_speed.bf16_argv("true", given, on_cpu=False, trainer="sync") == []  # GPUs: untouched
    assert cpu_speed.bf16_argv("true", given, on_cpu=True, trainer="async") == ["--bf16", "true"]  # its loss forward
    assert cpu_speed.bf16_argv("true", given, on_cpu=True, trainer="sft") == []
    assert cpu_speed.bf16_argv("false", set(), on_cpu=True, trainer="sync") == []  # not given: as before
    with pytest.raises(ValueError, match="cpu_bf16 must be one of auto, true, false, got 'fast'"):
        cpu_speed.bf16_argv("fast", set(), on_cpu=False, trainer="sync")


def test_cpu_bf16_reaches_the_parsed_config(tmp_path):
    from recipes.grpo_core.args import parse

    base = ["--config", CONFIG, "--output_dir", str(tmp_path / "run"), "--use_cpu", "true"]
    _, cfg, _ = parse(base)  # the config says cpu_bf16: auto
    assert cfg.bf16 is cpu_speed.native_bf16() and cfg.mixed_precision == ("bf16" if cfg.bf16 else "no")
    assert parse([*base, "--cpu_bf16", "true"])[1].bf16 is True
    assert parse([*base, "--cpu_bf16", "false"])[1].bf16 is False
    assert parse([*base, "--cpu_bf16", "true", "--bf16", "false"])[1].bf16 is False
    with pytest.raises(TaseError, match="cpu_bf16 must be one of"):
        parse([*base, "--cpu_bf16", "fast"])


def _trainer(tmp_path, cpu_bf16: str, model):
    """The recipe's sync trainer for the combine config (as recipes/grpo.py builds it), without training."""
    from trl import GRPOTrainer

    from recipes.grpo_core.args import parse
    from recipes.grpo_core.reward_funcs import resolve_rewards
    from recipes.grpo_core.run import tokenizer
    from recipes.shared.data import build_dataset
    from recipes.shared.model import resolve

    tase, cfg, model_args = parse(["--config", CONFIG, "--output_dir", str(tmp_path / cpu_bf16), "--use_cpu", "true",
                                   "--cpu_bf16", cpu_bf16, "--num_train_examples", "8", "--report_to", "none",
                                   "--model_name_or_path", str(model)])
    path = resolve(model_args.model_name_or_path)
    rewards = resolve_rewards(tase, cfg)
    cfg.reward_weights = rewards.weights
    cfg.model_init_kwargs = {"dtype": model_args.dtype}
    tok = tokenizer(path)
    data = build_dataset(tase, tok)
    trainer = GRPOTrainer(model=path, reward_funcs=rewards.funcs, args=cfg, train_dataset=data,
                          processing_class=tok)
    return trainer, data, tok


def _fixed_batch(data, tok):
    """2 prompts x 8 completions (right answers, wrong ones, untagged, long), left-padded prompts as TRL pads them."""
    rows = [data[0], data[1]]
    outs = []
    for r in rows:
        gold = str(r["answer"])
        outs += [f"<answer>{gold}</answer>", f"<answer>{gold}</answer>", f"The answer is <answer>{gold}</answer>",
                 "<answer>xyz</answer>", gold, "<answer></answer>", f"<answer>{gold} {gold}</answer>",
                 "I think it is " + " ".join([gold] * 6)]
    inputs = [r for r in rows for _ in range(8)]
    prompts = [r["prompt"] for r in inputs]
    texts = [tok.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    enc = tok(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    ids = [tok(c, add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for c in outs]
    width = max(map(len, ids))
    completion_ids = torch.tensor([x + [tok.pad_token_id] * (width - len(x)) for x in ids])
    completion_mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in ids])
    completions = [[{"role": "assistant", "content": c}] for c in outs]
    return inputs, prompts, completions, ids, enc, completion_ids, completion_mask


def _one_step(trainer, batch):
    """Rewards, advantages, per-token log-probs, loss, gradient and AdamW update of one optimizer step."""
    inputs, prompts, completions, ids, enc, completion_ids, completion_mask = batch
    rewards = trainer._calculate_rewards(inputs, prompts, completions, ids)
    total = (rewards * torch.tensor(trainer.reward_weights)).nansum(dim=1).view(-1, 8)
    adv = ((total - total.mean(1, keepdim=True)) / (total.std(1, keepdim=True) + 1e-4)).view(-1)
    batch_in = {"prompt_ids": enc["input_ids"], "prompt_mask": enc["attention_mask"], "completion_ids": completion_ids,
                "completion_mask": completion_mask, "advantages": adv,
                "num_items_in_batch": completion_mask.sum().float()}
    model = trainer.model
    model.train()
    trainer.current_gradient_accumulation_steps = trainer.args.gradient_accumulation_steps  # set by train()
    torch.manual_seed(0)
    with torch.no_grad():
        logps, _, _ = trainer._get_per_token_logps_and_entropies(
            model, torch.cat([enc["input_ids"], completion_ids], 1), torch.cat([enc["attention_mask"],
                                                                                completion_mask], 1),
            completion_ids.size(1))
    with trainer.compute_loss_context_manager():
        loss = trainer.compute_loss(model, batch_in)
    trainer.accelerator.backward(loss)
    grad = torch.cat([p.grad.reshape(-1).float() for p in model.parameters() if p.grad is not None])
    before = torch.cat([p.detach().reshape(-1).clone() for p in model.parameters()])
    trainer.create_optimizer()
    torch.nn.utils.clip_grad_norm_(model.parameters(), trainer.args.max_grad_norm)
    trainer.optimizer.step()
    after = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    dtypes = {p.dtype for p in model.parameters()}
    return {"rewards": rewards, "adv": adv, "logps": logps * completion_mask, "loss": loss.detach(), "grad": grad,
            "update": after - before, "before": before, "dtypes": dtypes}


def _cos(a, b):
    return float(torch.nn.functional.cosine_similarity(a.double(), b.double(), dim=0))


@pytest.mark.slow  # two trainers: with the whole model 130-530 s on a loaded 2-core machine; now LAYERS layers
def test_fast_path_learns_what_float32_learns(tmp_path, real_first_layers):
    old_trainer, data, tok = _trainer(tmp_path, "false", real_first_layers)
    batch = _fixed_batch(data, tok)
    old = _one_step(old_trainer, batch)
    assert not old_trainer.args.bf16
    new_trainer, _, _ = _trainer(tmp_path, "true", real_first_layers)
    assert new_trainer.args.bf16 and new_trainer.accelerator.mixed_precision == "bf16"
    applied = cpu_speed.speed_up(new_trainer)
    assert any("completion tokens only" in a for a in applied) and any("once per batch" in a for a in applied)
    new = _one_step(new_trainer, batch)
    assert old["dtypes"] == new["dtypes"] == {torch.float32}  # float32 weights (and so AdamW state) on both paths
    torch.testing.assert_close(new["rewards"], old["rewards"], rtol=0, atol=0)  # rewards read text only
    assert old["adv"].abs().sum() > 0  # the batch has something to learn
    torch.testing.assert_close(new["loss"], old["loss"], rtol=0, atol=1e-6)
    # bf16 rounds a logit to 8 bits of mantissa: measured 0.042 mean, 0.22 max with 2 layers on AVX2 (whole model:
    # 0.031, 0.34 on a low-probability token)
    diff = (new["logps"] - old["logps"]).abs()
    assert diff.sum() / (old["logps"] != 0).sum() < 0.06 and diff.max() < 0.7, (diff.mean(), diff.max())
    # what is learned: the gradient (measured cosine 0.99995, norm ratio 1.001; whole model 0.9994, 1.003) and AdamW's
    # update (0.995, 0.99992; whole model 0.981, 1.00002;
    # a first Adam step is about lr x sign(gradient), so tiny gradient entries flip) point the same way
    assert _cos(new["grad"], old["grad"]) > 0.995, _cos(new["grad"], old["grad"])
    assert abs(float(new["grad"].norm() / old["grad"].norm()) - 1) < 0.02
    assert _cos(new["update"], old["update"]) > 0.95, _cos(new["update"], old["update"])
    assert abs(float(new["update"].norm() / old["update"].norm()) - 1) < 0.01
    # why the weights stay float32: the same update applied to bf16 weights is rounded away (measured: 99% of them
    # would not move at all at lr 5e-6)
    moved = (old["before"] + old["update"]).bfloat16() != old["before"].bfloat16()
    assert moved.float().mean() < 0.1


def test_shared_prefill_generates_what_generate_does(real_first_layers):
    """TRL's rollout batch (each prompt repeated in a row, left-padded) through the shared prefill: the same tokens as
    plain `generate`, greedy and sampled with one seed; the prompts' forward runs once per distinct prompt (and their
    shared head once), and a batch
    with no repeats goes to `generate` unchanged."""
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    tok = AutoTokenizer.from_pretrained(real_first_layers)
    model = AutoModelForCausalLM.from_pretrained(real_first_layers, dtype=torch.float32).eval()
    prompts = ["How many r in strawberry?", "Sort by length: kiwi, fig, banana, apple pie", "Count 'ㄱ' in 강가"]
    texts = [tok.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
             for p in prompts]
    enc = tok([t for t in texts for _ in range(3)], return_tensors="pt", padding=True, padding_side="left",
              add_special_tokens=False)
    assert len(set(enc["attention_mask"].sum(1).tolist())) == 3  # three prompt lengths: left padding is exercised
    seen: list[tuple[int, int]] = []
    model.model.layers[0].register_forward_hook(lambda m, a, o: seen.append(tuple(a[0].shape[:2])))
    plain = model.generate
    for sample in (False, True):
        cfg = GenerationConfig(max_new_tokens=12, do_sample=sample, temperature=1.0 if sample else None, top_p=None,
                               top_k=None, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
        outs = []
        for shared in (False, True):
            model.generate = plain
            if shared:
                cpu_speed.shared_prefill_generate(model)
            seen.clear()
            torch.manual_seed(7)
            with torch.no_grad():
                outs.append(model.generate(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                                           generation_config=cfg))
            width = enc["input_ids"].shape[1]
            if shared:  # the prompts' shared head once, each prompt's own tokens once (all but the last, in length
                # buckets: common/prefill.py), then the 9 rows one token at a time
                rows = [ids[m.bool()].tolist() for ids, m in zip(enc["input_ids"][::3], enc["attention_mask"][::3],
                                                                 strict=True)]
                prefill = [s for s in seen if s[0] != 9]
                assert prefill[0] == (1, common_prefix(rows)) and sum(s[0] for s in prefill[1:]) == 3, seen[:4]
                assert all(s == (9, 1) for s in seen[len(prefill):]), seen[:4]
            else:
                assert seen[0] == (9, width)
        torch.testing.assert_close(outs[1], outs[0], rtol=0, atol=0)
    seen.clear()
    distinct = tok(texts, return_tensors="pt", padding=True, padding_side="left", add_special_tokens=False)
    with torch.no_grad():
        model.generate(input_ids=distinct["input_ids"], attention_mask=distinct["attention_mask"],
                       generation_config=cfg)
    assert seen[0] == (3, distinct["input_ids"].shape[1])  # nothing to share: generate's own prefill


def test_shared_prompts_in_the_loss_give_the_same_log_probs_and_gradient(tmp_path, real_first_layers):
    """The GRPO loss forward with each distinct prompt computed once (2 prompts x 8 completions, left-padded): the same
    per-token log-probs, loss and gradient as TRL's full forward (float32, so up to summation order); the prompt
    pass runs once per prompt, not once per row."""
    full_trainer, data, tok = _trainer(tmp_path, "false", real_first_layers)
    assert cpu_speed.compact_lm_head(full_trainer.model)
    batch = _fixed_batch(data, tok)
    full = _one_step(full_trainer, batch)
    shared_trainer, _, _ = _trainer(tmp_path, "false", real_first_layers)
    assert cpu_speed.compact_lm_head(shared_trainer.model, share_prompts=True)
    seen: list[tuple[int, int]] = []
    shared_trainer.model.model.layers[0].register_forward_hook(lambda m, a, o: seen.append(tuple(a[0].shape[:2])))
    shared = _one_step(shared_trainer, batch)
    ids, mask = batch[4]["input_ids"], batch[4]["attention_mask"]  # the left-padded prompts, each repeated 8 times
    prompts = [ids[i][mask[i].bool()].tolist() for i in (0, 8)]
    assert prompts[0] != prompts[1] and ids.shape[0] == 16
    # the prompts' shared head once, each prompt's own tokens once (all but the last: common/prefill.py), then the 16
    # rows from the prompt's last token on
    prefill = seen[:next(i for i, s in enumerate(seen) if s[0] == 16)]
    assert prefill[0] == (1, common_prefix(prompts)) and sum(s[0] for s in prefill[1:]) == 2, seen
    assert seen[len(prefill)] == (16, batch[5].shape[1] + 1), seen
    assert (full["logps"] != 0).sum() > 0
    torch.testing.assert_close(shared["logps"], full["logps"], rtol=0, atol=2e-5)
    torch.testing.assert_close(shared["loss"], full["loss"], rtol=0, atol=1e-6)
    assert _cos(shared["grad"], full["grad"]) > 0.99999
    torch.testing.assert_close(shared["grad"], full["grad"], rtol=1e-3, atol=1e-6)
    # AdamW's first step is about lr x sign(gradient): a gradient entry near 0 may flip (measured: 4 of 35.4M entries
    # moved 2.8e-7 apart)
    moved = (shared["update"] - full["update"]).abs() > 1e-7
    assert moved.float().mean() < 1e-5 and _cos(shared["update"], full["update"]) > 0.99999


@pytest.fixture(scope="module")
def sft_trainer_batch(real_first_layers, tmp_path_factory):
    """The SFT warm-up's trainer as recipes/sft_warmup.py builds it (its CPU config, the default model's first LAYERS
    layers) and its first real batch from TRL's collator: 8 rows of different lengths, padded on the right."""
    from transformers import AutoTokenizer
    from trl import SFTTrainer

    from recipes.sft_warmup import build_sft_dataset, option_types
    from recipes.shared.parser import parse_config

    out = tmp_path_factory.mktemp("sft_prefix")
    data_args, cfg, _, *extra = parse_config(option_types(), [
        "--config", str(ROOT / "recipes" / "configs" / "sft_smollm2_cpu.yaml"), "--num_train_examples", "8",
        "--output_dir", str(out), "--report_to", "none", "--tasks", "component_count", "--langs", "en", "ko",
        "--paraphrase", "false"])  # the demo's task: short rows keep this test to seconds
    tok = AutoTokenizer.from_pretrained(real_first_layers)
    cfg.model_init_kwargs = {"dtype": "float32"}
    trainer = SFTTrainer(model=str(real_first_layers), args=cfg, train_dataset=build_sft_dataset(data_args, tok, 512),
                         processing_class=tok)
    batch = next(iter(trainer.get_train_dataloader()))
    from recipes import features

    assert features.merged(data_args, *extra).cpu_shared_prefill is True  # the warm-up parses the option (default on)
    return trainer, batch


def _sft_step(trainer, batch) -> dict:
    """TRL's own SFT loss (SFTTrainer.compute_loss) and its backward on `batch`: the loss, the per-token log-probs
    and entropies of the fused head, TRL's logged entropy and token accuracy, and the gradient."""
    model = trainer.model
    model.train()
    model.zero_grad()
    trainer._metrics["train"].clear()
    loss = trainer.compute_loss(model, dict(batch))
    loss.backward()
    metrics = {k: v[-1] for k, v in trainer._metrics["train"].items() if k in ("entropy", "mean_token_accuracy")}
    grad = torch.cat([p.grad.reshape(-1) for p in model.parameters() if p.grad is not None])
    with torch.no_grad():
        out = model(**dict(batch, use_cache=False), fused_lm_head=True)
    return {"loss": loss.detach(), "logps": out.log_probs, "entropy": out.entropy, "top1": out.is_top1,
            "metrics": metrics, "grad": grad}


def test_sft_shared_prefix_learns_what_the_full_forward_learns(sft_trainer_batch):
    """The SFT loss forward with the rows' common prefix (system turn, user header) computed once: the same loss,
    per-token log-probs and entropies over the labelled positions, gradient, and TRL's entropy and token accuracy
    as TRL's full forward; the prefix pass runs once (batch 1), the rest of each row after it; an eval-mode call,
    or a batch with nothing in common, takes the full forward."""
    trainer, batch = sft_trainer_batch
    ids, mask, labels = batch["input_ids"], batch["attention_mask"], batch["labels"]
    lengths = mask.sum(1)
    assert len(set(lengths.tolist())) > 2 and (mask[:, 0] == 1).all() and (mask[:, -1] == 0).any()  # right padding
    cut = cpu_speed._common_prefix(ids, mask, labels)
    assert cut >= 15 and (labels[:, :cut + 1] == -100).all()  # the system turn and the user header, never a label
    model = trainer.model
    plain = model.forward
    try:
        full = _sft_step(trainer, batch)
        assert cpu_speed.sft_speed_up(trainer) == [  # what recipes/features/cpu_speed/__init__.py applies (use_cpu)
            "LM head scores completion tokens only; the batch's shared prefix computed once"]
        seen: list[tuple[int, int]] = []
        hook = model.model.layers[0].register_forward_hook(lambda m, a, o: seen.append(tuple(a[0].shape[:2])))
        shared = _sft_step(trainer, batch)
        hook.remove()
    finally:
        model.forward = plain
    width = ids.shape[1]
    assert seen[:2] == [(1, cut), (8, width - cut)], seen  # training: the prefix once, then the rest of each row
    scored = labels[:, 1:] != -100
    assert scored.sum() > 20
    torch.testing.assert_close(shared["loss"], full["loss"], rtol=1e-5, atol=0)
    torch.testing.assert_close(shared["logps"][scored], full["logps"][scored], rtol=0, atol=1e-4)
    torch.testing.assert_close(shared["entropy"][scored], full["entropy"][scored], rtol=0, atol=1e-4)
    assert shared["metrics"] == pytest.approx(full["metrics"], rel=1e-5) and len(full["metrics"]) == 2
    assert _cos(shared["grad"], full["grad"]) > 0.99999
    assert abs(float(shared["grad"].norm() / full["grad"].norm()) - 1) < 1e-4
    # the calls it does not share take the full forward: eval mode, and a batch whose rows start differently
    try:
        assert cpu_speed.compact_lm_head(model, share_prefix=True)
        hook = model.model.layers[0].register_forward_hook(lambda m, a, o: seen.append(tuple(a[0].shape[:2])))
        with torch.no_grad():
            seen.clear()
            model.eval()
            model(**dict(batch, use_cache=False), fused_lm_head=True)
            model.train()
            other = dict(batch, input_ids=ids.clone())
            other["input_ids"][0, 0] += 1  # the first row's first token differs: no common prefix
            model(**dict(other, use_cache=False), fused_lm_head=True)
        hook.remove()
    finally:
        model.forward = plain
        model.train()
    assert seen == [(8, width), (8, width)], seen


def test_distinct_rows_are_found_wherever_the_shuffle_put_them():
    """TRL shuffles the rows it trains on: a group's rows need not be consecutive (the loss's shared prompts found 14
    "distinct" prompts in 16 rows of 4 groups while they were matched only with their neighbours)."""
    ids = torch.tensor([[0, 5, 6], [7, 8, 9], [0, 5, 6], [7, 8, 9], [1, 5, 6], [0, 5, 6]])
    mask = torch.tensor([[0, 1, 1], [1, 1, 1], [0, 1, 1], [1, 1, 1], [1, 1, 1], [0, 1, 1]])
    index, first = cpu_speed._distinct_rows(ids, mask)
    assert len(first) == 3 and sorted(first) == [0, 1, 4]  # the first row of each distinct prompt
    assert all(torch.equal(ids[first[index[i]]], ids[i]) for i in range(len(ids)))
    mask2 = mask.clone()
    mask2[5, 0] = 1  # the same ids with another mask: another row
    assert len(cpu_speed._distinct_rows(ids, mask2)[1]) == 4
    assert cpu_speed._distinct_rows(ids[:2], mask[:2]) is None  # nothing repeats
