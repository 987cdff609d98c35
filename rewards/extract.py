"""Answer extraction exactly as the official evaluator does it, in linear time.

Rule: the text inside the first `<answer>...</answer>` (non-greedy, across lines), stripped; else the
text inside the first `**...**`, stripped; else "". Written with `str.find` instead of the official
regexes so that a 1 MB completion full of unclosed tags costs one linear scan.
"""
from __future__ import annotations

from typing import Any

OPEN, CLOSE = "<answer>", "</answer>"


def extract_answer(text: str | None) -> str:
    """Official extraction: first <answer>..</answer>, else first **..**, else ""."""
    if not text:
        return ""
    # re.search(r"<answer>(.*?)</answer>", DOTALL) matches at the earliest "<answer>" that has a
    # "</answer>" after it; if the first opening tag has none after it, no later one has either.
    start = text.find(OPEN)
    if start != -1:
        end = text.find(CLOSE, start + len(OPEN))
        if end != -1:
            return text[start + len(OPEN) : end].strip()
    # Same argument for r"\*\*(.*?)\*\*": the first "**" with another "**" at least two chars later.
    start = text.find("**")
    if start != -1:
        end = text.find("**", start + 2)
        if end != -1:
            return text[start + 2 : end].strip()
    return ""


def completion_text(completion: Any) -> str:
    """A completion as plain text: a string; TRL's conversational list of messages (the content of the
    last assistant message, text parts joined); a single message dict; None -> ""."""
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return _content(completion.get("content"))
    if isinstance(completion, (list, tuple)):
        for msg in reversed(completion):
            if isinstance(msg, dict) and msg.get("role", "assistant") == "assistant":
                return _content(msg.get("content"))
        return ""
    return str(completion)


def _content(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, (list, tuple)):  # multimodal content parts: keep the text ones
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return str(content)
