"""A record as a GRPO training row: TRL's conversational `prompt` (the chat the recipes and `eval run` build:
system prompt + the question as the user turn, common.prompts.build_messages), the record's identity, and the
columns the reward functions read (rewards.trl.reward_columns; the question text travels as `question`, since TRL
passes the chat, not the text, to reward functions). One definition for `python -m synth --format conversational`
(a file TRL's own `trl grpo --dataset_name DIR` trains on) and the recipes (recipes/shared/data.to_row)."""
from __future__ import annotations

from typing import Any

from common.prompts import SYSTEM_PROMPT, build_messages
from rewards.trl import reward_columns

FORMATS = ("records", "conversational")


def conversational_row(record: dict[str, Any], system_prompt: str = SYSTEM_PROMPT) -> dict[str, Any]:
    """The trainer row of one record."""
    return {
        "prompt": build_messages(record, system_prompt=system_prompt),
        "id": record["id"], "task": record["task"], "subtask": record.get("subtask", ""), "lang": record["lang"],
        **reward_columns(record),
    }
