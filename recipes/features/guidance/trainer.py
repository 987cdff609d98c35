"""The guided trainer (recipes/features/guidance/hints.py's `--guidance`): TRL's GRPOTrainer with every all-fail group
generated again with a hint and/or given the row's gold completion. Apart from the options, hints and schedule so that
those import without TRL and torch."""
from __future__ import annotations

import functools
from typing import Any

from common.errors import TaseError
from recipes.features.guidance.hints import PREFIX, HintSchedule, failed_groups, gold_text, plan_hints


def _widen(t: Any, width: int, value: Any, left: bool) -> Any:
    import torch

    if t.size(1) >= width:
        return t
    fill = t.new_full((t.size(0), width - t.size(1)), value)
    return torch.cat([fill, t] if left else [t, fill], dim=1)


def put_gold(out: dict[str, Any], k: int, prompt: Any, completion: Any, pad_id: int) -> None:
    """Row `k` of a generation batch becomes (`prompt`, `completion`) (1-D token tensors, unpadded): the prompt
    left-padded, the completion right-padded, the batch widened where either is wider. Per-token log-probabilities
    of the row are left for the caller; an importance-sampling ratio row becomes 1."""
    from recipes.features.dynamic_sampling.sampling import COMPLETION_KEYS, PROMPT_KEYS

    pw = max(out["prompt_ids"].size(1), prompt.numel())
    was = out["completion_ids"].size(1)
    cw = max(was, completion.numel())
    for key, spec in PROMPT_KEYS.items():
        if out.get(key) is not None:
            out[key] = _widen(out[key], pw, pad_id if spec == "pad" else spec, left=True)
    for key, spec in COMPLETION_KEYS.items():  # per-token keys only (a sequence-level ratio is one column)
        if out.get(key) is not None and out[key].dim() == 2 and out[key].size(1) == was:
            out[key] = _widen(out[key], cw, pad_id if spec == "pad" else spec, left=False)
    n, m = prompt.numel(), completion.numel()
    out["prompt_ids"][k] = pad_id
    out["prompt_ids"][k, pw - n:] = prompt
    out["prompt_mask"][k] = 0
    out["prompt_mask"][k, pw - n:] = 1
    out["completion_ids"][k] = pad_id
    out["completion_ids"][k, :m] = completion
    out["completion_mask"][k] = 0
    out["completion_mask"][k, :m] = 1
    if out.get("tool_mask") is not None:
        out["tool_mask"][k] = 1
    if out.get("importance_sampling_ratio") is not None:
        out["importance_sampling_ratio"][k] = 1.0


def group_advantages(rewards: Any, scale: str) -> Any:
    """TRL's sum_then_normalize advantages of one group: reward minus the group mean, over the group's std (+1e-4)
    unless scale_rewards is none (a batch-scaled run uses the group's std for a gold group: docs/training.md)."""
    adv = rewards - rewards.mean()
    if scale != "none":
        adv = adv / (rewards.std() + 1e-4)
    return adv


@functools.cache
def trainer_class(base: type | None = None) -> type:
    """GuidedGRPOTrainer on `base` (TRL's GRPOTrainer by default); DynamicGRPOTrainer takes it as its base, so that each
    dynamic-sampling round is guided before its groups are judged mixed or uniform."""
    import torch
    from trl import GRPOTrainer

    base = base or GRPOTrainer

    class GuidedGRPOTrainer(base):  # type: ignore[misc, valid-type]
        """GRPOTrainer whose all-fail groups are hinted and/or given a gold member
        (recipes/features/guidance/hints.py)."""

        def __init__(self, *args: Any, guide_mode: str = "hint", guide_schedule: HintSchedule | None = None,
                     guide_funcs: list[Any] | None = None, guide_weights: list[float] | None = None,
                     **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.guide_mode, self.guide_schedule = guide_mode, guide_schedule or HintSchedule({})
            self.guide_funcs, self.guide_weights = guide_funcs or [], guide_weights or []
            self._guide_scores: list[Any] | None = None
            self._guide_rewards: Any = None
            if self.accelerator.num_processes > 1:
                raise TaseError("guidance runs with one training process")
            if guide_mode in ("gold", "both"):
                if self.multi_objective_aggregation != "sum_then_normalize":
                    raise TaseError("guidance gold needs multi_objective_aggregation sum_then_normalize")
                if self.beta != 0.0 and self.ref_model is None:
                    raise TaseError("guidance gold with beta > 0 needs a reference model (not a PEFT adapter)")

        def _calculate_rewards(self, inputs, prompts, completions, completion_ids_list):  # noqa: ANN001, ANN202
            """TRL's rewards, after noting every completion's verdicts (strict decides whether a group failed)."""
            out = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
            if self.model.training:
                from rewards.trl import batch_scores

                cols = {k: [x[k] for x in inputs] for k in inputs[0] if k not in ("prompt", "completion",
                                                                                  "completion_ids")}
                self._guide_scores = batch_scores(prompts, completions, **cols)
                self._guide_rewards = out
            return out

        def _guide_pass(self, rows: list[dict[str, Any]]) -> tuple[dict[str, Any], list[Any], Any]:
            self._guide_scores = self._guide_rewards = None
            out = super()._generate_and_score_completions(rows)
            if self._guide_scores is None:
                raise TaseError("guidance: the rewards were not computed for a generation batch")
            return out, self._guide_scores, self._guide_rewards

        def _generate_and_score_completions(self, inputs):  # noqa: ANN001, ANN202
            if not self.model.training:  # evaluation never sees a hint
                return super()._generate_and_score_completions(inputs)
            from recipes.features.dynamic_sampling.sampling import Selection, merge
            from recipes.shared.data import LEVEL_COLUMN

            size, sched = self.num_generations, self.guide_schedule
            sched.step = self.state.global_step
            out, scores, rewards = self._guide_pass(inputs)
            strict = [float(s.strict) for s in scores]
            failed = failed_groups(strict, size)
            n = len(failed)
            hinted: dict[int, int] = {}  # group -> its index in the hinted pass
            rows: list[dict[str, Any]] = []
            levels: list[int] = []
            if self.guide_mode in ("hint", "both"):
                for g, (prompt, lv) in plan_hints(inputs, strict, size, sched.level).items():
                    hinted[g] = len(hinted)
                    levels.append(lv)
                    for x in inputs[g * size:(g + 1) * size]:
                        y = {**x, "prompt": prompt}
                        if LEVEL_COLUMN in y:
                            y[LEVEL_COLUMN] = -1  # the curriculum judges the unhinted pass only
                        rows.append(y)
            for g in range(n):  # the schedule moves after the batch was guided at the level in force
                task = inputs[g * size].get("task")
                if task is not None:
                    sched.record(task, sum(strict[g * size:(g + 1) * size]) / size)
            parts, all_scores, all_rewards = [out], [scores], [rewards]
            if rows:
                h_out, h_scores, h_rewards = self._guide_pass(rows)
                parts.append(h_out)
                all_scores.append(h_scores)
                all_rewards.append(h_rewards)
            order = [(1, hinted[g]) if g in hinted else (0, g) for g in range(n)]
            if rows:
                seq = frozenset({"importance_sampling_ratio"}) if str(
                    getattr(self, "vllm_importance_sampling_mode", "")).startswith("sequence") else frozenset()
                merged = merge(parts, Selection(kept=order), size, self._tokenizer.pad_token_id, seq)
            else:
                merged = {k: v for k, v in out.items() if k != "num_items_in_batch"}
            m_scores = [s for r, j in order for s in all_scores[r][j * size:(j + 1) * size]]
            m_rewards = torch.cat([all_rewards[r][j * size:(j + 1) * size] for r, j in order], dim=0)
            gold: list[int] = []
            if self.guide_mode in ("gold", "both"):
                gold = self._guide_gold(merged, inputs, m_scores, m_rewards, out)
            loss_mask = merged["completion_mask"] if merged.get("tool_mask") is None else \
                merged["completion_mask"] * merged["tool_mask"]
            merged["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
            if hasattr(self, "_dyn_verdicts"):  # dynamic sampling judges the guided groups
                self._dyn_verdicts = [float(getattr(s, self.dynamic_level)) for s in m_scores]
            h_strict = [float(s.strict) for s in (all_scores[1] if rows else [])]
            self._guide_log(n, sum(failed), len(hinted), len(gold), len(set(hinted) | set(gold)), strict, h_strict,
                            levels)
            return merged

        def _guide_gold(self, merged: dict[str, Any], inputs: list[dict[str, Any]], m_scores: list[Any],
                        m_rewards: Any, plain: dict[str, Any]) -> list[int]:
            """The gold member of every group that still fails: its last row becomes the gold completion under the
            plain prompt; the group's advantages are recomputed with the gold reward. Returns the groups given one."""
            from rewards.trl import batch_scores

            size, pad = self.num_generations, self._tokenizer.pad_token_id
            weights = torch.tensor(self.guide_weights, dtype=torch.float32)
            made = []
            for g, bad in enumerate(failed_groups([float(s.strict) for s in m_scores], size)):
                row = inputs[g * size]
                text = gold_text(row) if bad else None
                if text is None:
                    continue
                ids = self._tokenizer(text, add_special_tokens=False)["input_ids"]
                if len(ids) + 1 > self.max_completion_length:  # a cut gold answer is no gold answer
                    continue
                ids = torch.tensor([*ids, self._tokenizer.eos_token_id], device=merged["completion_ids"].device)
                p = plain["prompt_ids"][g * size][plain["prompt_mask"][g * size].bool()]
                k = g * size + size - 1
                put_gold(merged, k, p, ids, pad)
                cols = {key: [v] for key, v in row.items() if key not in ("prompt", "completion", "completion_ids")}
                comp = [[{"role": "assistant", "content": text}]]
                r = torch.tensor([float("nan") if (v := f(prompts=[row["prompt"]], completions=comp, **cols)[0]) is None
                                  else float(v) for f in self.guide_funcs])
                group = (m_rewards[g * size:(g + 1) * size].cpu().float() * weights).nansum(dim=1)
                group[-1] = float((r * weights).nansum())
                merged["advantages"][g * size:(g + 1) * size] = group_advantages(group, self.scale_rewards).to(
                    merged["advantages"].device, merged["advantages"].dtype)
                m_scores[k] = batch_scores(None, [text], **{c: [v] for c, v in row.items()
                                                            if c not in ("prompt", "completion", "completion_ids")})[0]
                made.append(g)
            if made:
                self._guide_gold_logps(merged, [g * size + size - 1 for g in made])
            return made

        def _guide_gold_logps(self, merged: dict[str, Any], rows: list[int]) -> None:
            """Behaviour (and reference) log-probabilities of the gold rows: the current policy's (ratio 1 at the
            first iteration), the reference model's where beta > 0; vLLM's sampling log-probs set equal to them."""
            idx = torch.tensor(rows, device=merged["completion_ids"].device)
            ids = torch.cat([merged["prompt_ids"][idx], merged["completion_ids"][idx]], dim=1)
            mask = torch.cat([merged["prompt_mask"][idx], merged["completion_mask"][idx]], dim=1)
            keep = merged["completion_ids"].size(1)
            with torch.no_grad():
                logps = None
                for key in ("old_per_token_logps", "sampling_per_token_logps"):
                    if merged.get(key) is not None:
                        if logps is None:
                            logps, _, _ = self._get_per_token_logps_and_entropies(self.model, ids, mask, keep)
                        merged[key][idx] = logps.to(merged[key].dtype)
                if merged.get("ref_per_token_logps") is not None:
                    ref, _, _ = self._get_per_token_logps_and_entropies(self.ref_model, ids, mask, keep)
                    merged["ref_per_token_logps"][idx] = ref.to(merged["ref_per_token_logps"].dtype)

        def _guide_log(self, groups: int, failed: int, hinted: int, gold: int, guided: int, strict: list[float],
                       h_strict: list[float], levels: list[int]) -> None:
            """Per generation batch: groups, all-fail groups, groups hinted and given a gold member, groups guided
            (either), the unhinted and hinted strict success, the gold share of the batch's completions, the hint
            level of the hinted groups (else the mean over the run's tasks) and each task's level."""
            m = self._metrics["train"]
            size = self.num_generations
            for key, v in (("groups", groups), ("groups_failed", failed), ("groups_hinted", hinted),
                           ("groups_gold", gold), ("groups_guided", guided)):
                m[PREFIX + key].append(float(v))
            m[PREFIX + "guided_share"].append(guided / groups if groups else 0.0)
            m[PREFIX + "success_unhinted"].append(sum(strict) / len(strict) if strict else 0.0)
            if h_strict:
                m[PREFIX + "success_hinted"].append(sum(h_strict) / len(h_strict))
            m[PREFIX + "gold_share"].append(gold / (groups * size) if groups else 0.0)
            sched = self.guide_schedule
            now = {t: sched.level(t) for t in sched.cur.levels}
            if levels:
                m[PREFIX + "hint_level"].append(sum(levels) / len(levels))
            elif now:
                m[PREFIX + "hint_level"].append(sum(v for v in now.values() if v is not None) / len(now))
            for t, lv in now.items():
                m[f"{PREFIX}{t}/hint_level"].append(float(lv))

    GuidedGRPOTrainer.__name__ = GuidedGRPOTrainer.__qualname__ = f"Guided{base.__name__}"
    return GuidedGRPOTrainer
