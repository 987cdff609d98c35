"""FSDP2 on CPU (gloo): one GRPO-loss optimizer step, sharded over N processes or unsharded in one.

    python tests/fsdp_cpu_check.py OUT_1                                                  # one process, no sharding
    python -m torch.distributed.run --standalone --nproc_per_node 2 tests/fsdp_cpu_check.py OUT_2   # FSDP2, 2 ranks
    python tests/fsdp_cpu_check.py --compare OUT_1 OUT_2                                  # report + JSON on stdout

Why torch's own `fully_shard` and not accelerate: accelerate 1.15 never turns a CPU (gloo) run into FSDP.
`AcceleratorState.__init__` (accelerate/state.py) sets `DistributedType.FSDP` only inside the
`elif self.distributed_type in [MULTI_GPU, MULTI_MLU, ..., MULTI_NEURON]` branch, which excludes `MULTI_CPU`;
a CPU run with an FSDP config is prepared as `DistributedDataParallel` (measured: `distributed_type: FSDP`,
`fsdp_version: 2`, `use_cpu: true`, 2 processes -> `DistributedType.MULTI_CPU`, DDP, full parameters on each
rank). Without `cpu=True` a CUDA-less process gets no backend at all (`_prepare_backend`: `DistributedType.NO`).
So this check drives FSDP2 the way accelerate's `fsdp2_prepare_model` does on GPUs: `fully_shard` on every
decoder layer, then on the root, over a 1-D `DeviceMesh` -- here `init_device_mesh("cpu", (world,))` on gloo.

Model: a tiny random Llama (transformers `LlamaConfig`, tied embeddings like SmolLM2) built in code from a
fixed seed, so every run starts from the same weights; `--model DIR` loads a safetensors folder instead
(e.g. the default SmolLM2-135M-Instruct). Batch: fixed random prompts + completions (padded completion masks)
and group-normalised advantages, 8 sequences; rank r trains rows [r*8/N, (r+1)*8/N). Loss: TRL 1.16's
`loss_type="grpo"` with beta=0 on-policy (ratio exp(logp - logp.detach()) = 1, clipped surrogate
-min(ratio*A, clip(ratio)*A), masked mean per sequence, mean over sequences), log-probs from TRL's
`selective_log_softmax`. Each rank's loss is the mean over its equal share of sequences and FSDP2 averages
gradients over ranks, so the sharded step is the one-process step on the full batch up to float order.
One AdamW step (lr 1e-3). The on-policy loss's value is -mean(A) whatever the weights (ratio 1), so the
loss "after the step" is TRL's loss on a second pass over the same batch (num_iterations > 1: ratio against
the log-probs from before the step), which does depend on the new weights; the masked mean NLL of the
completion tokens is reported before and after too. Writes OUT/rank{r}.json (local vs total parameter
elements, DTensor placements, full-batch losses before and after the step, wall time) and, from rank 0,
OUT/params.pt (full parameters after the step, gathered with `DTensor.full_tensor()`).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

BATCH, PROMPT_LEN, COMPLETION_LEN, GROUP = 8, 8, 8, 4
EPS_LOW = EPS_HIGH = 0.2


def build_model(model_dir: str | None):
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    if model_dir:
        return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, use_safetensors=True)
    cfg = LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                      tie_word_embeddings=True)
    return LlamaForCausalLM(cfg)


def make_batch(vocab: int) -> dict:
    import torch

    g = torch.Generator().manual_seed(1234)
    prompt_ids = torch.randint(0, vocab, (BATCH, PROMPT_LEN), generator=g)
    completion_ids = torch.randint(0, vocab, (BATCH, COMPLETION_LEN), generator=g)
    lengths = torch.randint(3, COMPLETION_LEN + 1, (BATCH,), generator=g)
    completion_mask = (torch.arange(COMPLETION_LEN)[None, :] < lengths[:, None]).long()
    rewards = torch.rand(BATCH, generator=g).view(-1, GROUP)
    advantages = ((rewards - rewards.mean(1, keepdim=True)) / (rewards.std(1, keepdim=True) + 1e-4)).view(-1)
    return {"prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids), "completion_ids": completion_ids,
            "completion_mask": completion_mask, "advantages": advantages}


def completion_logps(model, b: dict):
    import torch
    from trl.trainer.utils import selective_log_softmax

    input_ids = torch.cat([b["prompt_ids"], b["completion_ids"]], 1)
    attention_mask = torch.cat([b["prompt_mask"], b["completion_mask"]], 1)
    k = b["completion_ids"].size(1)
    logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=k + 1).logits[:, :-1]
    return selective_log_softmax(logits, b["completion_ids"])


def grpo_loss(model, b: dict, old_logps=None):
    """TRL 1.16 GRPOTrainer._compute_loss for loss_type="grpo", beta=0. Without old_logps it is the on-policy
    step (ratio exp(logp - logp.detach()) = 1: the value is -mean(A), only the gradient matters); with the
    log-probs from before the step it is the loss TRL computes on a second pass over the same batch
    (num_iterations > 1), whose value depends on the new weights. Also returns the masked mean NLL of the
    completion tokens."""
    import torch

    logps = completion_logps(model, b)
    coef_1 = torch.exp(logps - (logps.detach() if old_logps is None else old_logps))
    coef_2 = torch.clamp(coef_1, 1 - EPS_LOW, 1 + EPS_HIGH)
    adv = b["advantages"].unsqueeze(1)
    per_token = -torch.min(coef_1 * adv, coef_2 * adv)
    mask = b["completion_mask"]
    seq_mean = lambda t: ((t * mask).sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()  # noqa: E731
    return seq_mean(per_token), seq_mean(-logps.detach())


def main(out: Path, model_dir: str | None) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # same intra-op float order in every run (and 2 processes on 2 cores)
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    t0 = time.time()
    model = build_model(model_dir)
    total = sum(p.numel() for p in model.parameters())
    batch = make_batch(model.config.vocab_size)
    if world > 1:
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        dist.init_process_group("gloo")
        mesh = init_device_mesh("cpu", (world,))
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh)
        fully_shard(model, mesh=mesh)
    per = BATCH // world
    local = {k: v[rank * per:(rank + 1) * per] for k, v in batch.items()}

    def global_mean(*ts) -> list[float]:  # each rank holds the mean over its equal share of sequences
        t = torch.stack([x.detach() for x in ts])
        if world > 1:
            dist.all_reduce(t)
            t /= world
        return t.tolist()

    from torch.distributed.tensor import DTensor

    params = list(model.parameters())
    local_numel = sum((p.to_local() if isinstance(p, DTensor) else p).numel() for p in params)
    placements = sorted({str(p.placements) for p in params if isinstance(p, DTensor)})
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    model.train()
    with torch.no_grad():
        old_logps = completion_logps(model, local)
    loss, nll = grpo_loss(model, local)
    before, nll_before = global_mean(loss, nll)
    loss.backward()
    opt.step()
    opt.zero_grad()
    with torch.no_grad():
        loss_after, nll_after = grpo_loss(model, local, old_logps)
    after, nll_after = global_mean(loss_after, nll_after)
    full = {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().clone() for n, p in model.named_parameters()}
    out.mkdir(parents=True, exist_ok=True)
    if rank == 0:
        torch.save(full, out / "params.pt")
    info = {"world_size": world, "rank": rank, "local_numel": local_numel, "total_numel": total,
            "n_params": len(params), "n_dtensor": sum(isinstance(p, DTensor) for p in params),
            "placements": placements, "local_rows": per, "loss_before": before, "loss_after": after,
            "nll_before": nll_before, "nll_after": nll_after, "seconds": round(time.time() - t0, 2)}
    (out / f"rank{rank}.json").write_text(json.dumps(info) + "\n")
    print(json.dumps(info), flush=True)
    if world > 1:
        dist.barrier()
        dist.destroy_process_group()


def compare(one: Path, two: Path) -> dict:
    import torch

    ref = json.loads((one / "rank0.json").read_text())
    ranks = [json.loads(p.read_text()) for p in sorted(two.glob("rank*.json"))]
    a, b = torch.load(one / "params.pt"), torch.load(two / "params.pt")
    assert a.keys() == b.keys()
    report = {
        "one_process": {k: ref[k] for k in ("total_numel", "local_numel", "loss_before", "loss_after", "nll_before",
                                             "nll_after")},
        "ranks": [{k: r[k] for k in ("rank", "local_numel", "total_numel", "n_dtensor", "n_params", "placements",
                                     "loss_before", "loss_after", "nll_before", "nll_after")} for r in ranks],
        **{f"max_abs_diff_{k}": max(abs(r[k] - ref[k]) for r in ranks)
           for k in ("loss_before", "loss_after", "nll_before", "nll_after")},
        "max_abs_diff_params": max((a[k] - b[k]).abs().max().item() for k in a),
    }
    return report


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="+", help="output folder (or, with --compare, the 1-process and N-process folders)")
    ap.add_argument("--model", default=None, help="a safetensors model folder instead of the tiny random Llama")
    ap.add_argument("--compare", action="store_true")
    args = ap.parse_args()
    if args.compare:
        print(json.dumps(compare(Path(args.out[0]), Path(args.out[1])), indent=1))
    else:
        main(Path(args.out[0]), args.model)
    sys.exit(0)
