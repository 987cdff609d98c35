"""Prompts exactly as the official runner builds them: system prompt + the row text as user message."""
from __future__ import annotations

from typing import Any

SYSTEM_PROMPT = "You need to put the final result inside <answer></answer>."
COT_SUFFIX = "\n\nLet's think step by step, then put the final result inside <answer></answer>."


def build_messages(record: dict[str, Any], cot: bool = False,
                   system_prompt: str = SYSTEM_PROMPT) -> list[dict[str, str]]:
    """Chat messages for one record (`--cot` appends a step-by-step instruction to the user turn)."""
    user = record["prompt"] + (COT_SUFFIX if cot else "")
    msgs = [{"role": "system", "content": system_prompt}] if system_prompt else []
    return msgs + [{"role": "user", "content": user}]


def chat_text(tokenizer: Any, messages: list[dict[str, str]]) -> str:
    """The exact text `eval run`'s hf backend feeds the model (chat template, generation prompt added);
    the lm-eval export's test compares lm-eval's prompts against it."""
    return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
