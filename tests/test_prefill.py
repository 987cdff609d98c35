"""The packed prefill (common/prefill.py): the shared prefix computed once and each row's own tokens in length buckets
give `generate` what the plain padded batch gives it: the same first-step logits (float rounding) and the same greedy
and sampled tokens, on real SmolLM2-135M-Instruct weights and the official prompts in three languages."""
from __future__ import annotations

import pytest
import torch

from common.prefill import buckets, common_prefix, packed_prefill
from common.prompts import build_messages, chat_text

PROMPTS = ['How many times does the letter "e" appear in seven eleven?',
           '"遵蹲驭春冷"的字形中有多少"尊"存在',
           '"봬쇄왠괜두"에서 "ㅙ"는 몇 회 출현하였습니까?',
           'How many "r" in strawberry?',
           '"엊줄룡"에서 "ㅛ"는 몇 회 출현하였습니까?',
           "Sort these words by length: apple, fig, banana, kiwi, watermelon, plum, cherry, date, grape, lemon."]


def test_common_prefix_and_buckets():
    assert common_prefix([[1, 2, 3], [1, 2, 4, 5], [1, 2]]) == 2
    assert common_prefix([[1], [2]]) == 0 and common_prefix([]) == 0
    # one long row among short ones gets its own pass; equal lengths share one
    assert buckets([3, 3, 3, 40], pass_cost=8) == [(0, 3), (3, 4)]
    assert buckets([5, 5, 5, 5], pass_cost=8) == [(0, 4)]
    # a pass cost larger than any saving: one batch
    assert buckets([3, 4, 5, 6], pass_cost=100) == [(0, 4)]
    lengths = [1, 2, 2, 9, 10, 30, 31, 31]
    cuts = buckets(lengths, pass_cost=4)
    assert cuts[0][0] == 0 and cuts[-1][1] == len(lengths)
    assert all(a[1] == b[0] for a, b in zip(cuts, cuts[1:], strict=False))
    padded = sum((e - s) * lengths[e - 1] + 4 for s, e in cuts)
    assert padded <= len(lengths) * max(lengths) + 4  # never worse than one padded batch


@pytest.fixture(scope="module")
def model_and_rows(default_model):
    from common.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(default_model, dtype="float32", device="cpu")
    texts = [chat_text(tok, build_messages({"prompt": p})) for p in PROMPTS]
    return model, tok, texts


def _plain(model, tok, texts, **kw):
    enc = tok(texts, return_tensors="pt", padding=True, add_special_tokens=False)
    with torch.inference_mode():
        out = model.generate(**enc, pad_token_id=tok.pad_token_id, output_scores=True, return_dict_in_generate=True,
                             **kw)
    return out.sequences[:, enc["input_ids"].shape[1]:], out.scores[0]


def _packed(model, tok, texts, **kw):
    rows = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    with torch.inference_mode():
        ids, mask, cache = packed_prefill(model, rows, tok.pad_token_id, pass_cost=4)
        out = model.generate(input_ids=ids, attention_mask=mask, past_key_values=cache, pad_token_id=tok.pad_token_id,
                             output_scores=True, return_dict_in_generate=True, **kw)
    return out.sequences[:, ids.shape[1]:], out.scores[0]


def test_packed_prefill_gives_generate_the_same_logits_and_tokens(model_and_rows):
    model, tok, texts = model_and_rows
    rows = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    p = common_prefix(rows)
    assert p >= 15  # the system turn and the user header: shared by every official prompt
    ids, mask, cache = packed_prefill(model, rows, tok.pad_token_id, pass_cost=4)
    assert cache.get_seq_length() == ids.shape[1] - 1  # every column but the last, which generate runs
    assert [ids[i][mask[i].bool()].tolist() for i in range(len(rows))] == rows  # each row's tokens, in order
    greedy = {"max_new_tokens": 10, "do_sample": False, "temperature": None, "top_p": None, "top_k": None}
    plain, plain_scores = _plain(model, tok, texts, **greedy)
    packed, packed_scores = _packed(model, tok, texts, **greedy)
    # the first decoded token's logits: what a wrong position, mask or cache row would change
    assert (plain_scores - packed_scores).abs().max() < 2e-3
    assert torch.equal(plain, packed)
    sampled = {"max_new_tokens": 10, "do_sample": True, "temperature": 1.0, "top_p": 1.0, "top_k": 0}
    torch.manual_seed(7)
    a, _ = _plain(model, tok, texts, **sampled)
    torch.manual_seed(7)
    b, _ = _packed(model, tok, texts, **sampled)
    assert torch.equal(a, b)  # the same random draws


def test_eval_backend_uses_it_with_the_same_samples(model_and_rows, default_model):
    """`eval run`'s hf backend on a CPU: the packed path, and k samples a prompt grouped as num_return_sequences
    groups them (the same texts as the plain path)."""
    from eval.backends import GenConfig, HFBackend

    model, tok, texts = model_and_rows
    conversations = [build_messages({"prompt": p}) for p in PROMPTS]
    be = HFBackend.live(model, tok, GenConfig(max_new_tokens=8, temperature=1.0, top_p=1.0, top_k=0, seed=3,
                                              num_samples=2))
    packed = be.generate(conversations)
    be.packed = False  # the plain padded batch, as before the packed prefill
    plain = be.generate(conversations)
    assert packed == plain and all(len(x) == 2 for x in packed)


def test_a_wider_layout_keeps_the_logits(model_and_rows):
    """`width`: more padding in the middle for a batch padded wider than its longest prompt (dynamic sampling's merge
    pads to the widest round drawn); the first decoded token's logits stay the same."""
    model, tok, texts = model_and_rows
    rows = [tok(t, add_special_tokens=False)["input_ids"] for t in texts[:3]]
    narrow = packed_prefill(model, rows, tok.pad_token_id, pass_cost=4)
    wide = packed_prefill(model, rows, tok.pad_token_id, pass_cost=4, width=narrow[0].shape[1] + 7)
    assert wide[0].shape[1] == narrow[0].shape[1] + 7 and wide[2].get_seq_length() == wide[0].shape[1] - 1
    assert [wide[0][i][wide[1][i].bool()].tolist() for i in range(3)] == rows
    with torch.inference_mode():  # the position ids generate gives: the mask's running count
        a, b = (model(input_ids=ids[:, -1:], attention_mask=mask, past_key_values=cache,
                      position_ids=mask.cumsum(-1)[:, -1:] - 1).logits for ids, mask, cache in (narrow, wide))
    assert (a - b).abs().max() < 2e-3
