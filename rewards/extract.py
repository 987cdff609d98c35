"""Answer extraction exactly as the official evaluator does it, in linear time.

Rule: the text inside the first `<answer>...</answer>` (non-greedy, across lines), stripped; else the
text inside the first `**...**`, stripped; else "". Implemented with `str.find` instead of a regex so
that a 1 MB completion with many unclosed tags costs one linear scan.
"""
from __future__ import annotations

from typing import Any


def extract_answer(text: str | None) -> str:
    """Official extraction: first <answer>..</answer>, else first **..**, else ""."""
    if not text:
        return ""
    # re.search(r"<answer>(.*?)</answer>") finds the earliest "<answer>" that has a closing tag after
    # it; with a closing tag anywhere after the first opening tag, that is the first opening tag.
    start = text.find("<answer>")
    if start != -1:
        end = text.find("</answer>", start + 8)
        if end != -1:
            return text[start + 8 : end].strip()
    start = text.find("**")
    if start != -1:
        end = text.find("**", start + 2)
        if end != -1:
            return text[start + 2 : end].strip()
    return ""


def completion_text(completion: Any) -> str:
    """A completion as plain text: a string, or TRL's conversational list of messages (the last
    assistant message's content), or None."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content") or "")
    if isinstance(completion, (list, tuple)):
        for msg in reversed(completion):
            if isinstance(msg, dict) and msg.get("role", "assistant") == "assistant":
                content = msg.get("content")
                if isinstance(content, list):  # multimodal content parts
                    return "".join(p.get("text", "") for p in content if isinstance(p, dict))
                return str(content or "")
        return ""
    return str(completion)
