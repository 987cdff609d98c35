"""`--backend openai`: any model behind an OpenAI-compatible chat-completions API (a commercial API,
`vllm serve`, llama.cpp's server), through the maintained `openai` client (`AsyncOpenAI`).

Why its own module: an API run is a stream of independent requests, not batches. Each request that
finishes is handed to the runner at once (appended + fsync'ed), so a kill loses only requests in
flight. Faults (429, 5xx, timeouts, dropped connections) are retried here, with exponential backoff,
full jitter and the server's Retry-After; the client's own retries are off so every retry is counted.
A request that still fails is reported as failed with its reason, never scored as a wrong answer.

The API key is read from the environment and only handed to the client: it is never part of the
run's settings, and every error text is scrubbed of it before it is shown or written.
"""
from __future__ import annotations

import asyncio
import ipaddress
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .backend_registry import register_backend
from .gen_config import BackendError, GenConfig

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
FATAL_STATUS = {401, 403, 404}  # wrong key, no access, unknown model: every request would fail the same way


@dataclass
class APIOptions:
    """How to reach the server and how hard to try. Holds the key's variable name, never the key."""

    base_url: str
    model_name: str
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 8
    rpm: float | None = None  # requests started per minute, None: no limit
    timeout: float = 600.0  # seconds per request
    max_retries: int = 6
    token_param: str = "max_tokens"  # or max_completion_tokens (OpenAI reasoning models require it)
    send_temperature: bool = True  # False: leave temperature/top_p to the server (models that fix them)
    backoff_base: float = 1.0
    backoff_max: float = 60.0


@dataclass
class Result:
    """One finished request: the text and its bookkeeping, or the reason it failed."""

    ok: bool
    text: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    attempts: int = 0


def is_loopback(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_base_url(url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BackendError(f"--base-url must be an http(s) URL such as http://127.0.0.1:8000/v1, got {url!r}")
    if parts.username or parts.password:
        raise BackendError("--base-url must not hold credentials; put the key in an environment variable "
                           "(--api-key-env)")


def read_key(opts: APIOptions) -> str:
    """The key from the environment; a loopback server (vllm serve) may go without one."""
    key = os.environ.get(opts.api_key_env, "")
    if not key:
        if is_loopback(opts.base_url):
            return "EMPTY"
        raise BackendError(f"no API key: set {opts.api_key_env} (or name another variable with --api-key-env) "
                           f"to evaluate {urlsplit(opts.base_url).hostname}")
    return key


def retry_after(headers: Any) -> float | None:
    """Seconds the server asked us to wait (Retry-After seconds or HTTP date, retry-after-ms)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(ra).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def _hint(msg: str) -> str:
    low = msg.lower()
    if "max_tokens" in low:
        return " (reasoning models want --token-param max_completion_tokens)"
    if "temperature" in low or "top_p" in low:
        return " (models that fix their sampling want --no-temperature)"
    return ""


class _RateLimiter:
    """Starts at most `rpm` requests per minute, evenly spaced (no bursts that trip the server's limiter)."""

    def __init__(self, rpm: float | None) -> None:
        self.gap = 60.0 / rpm if rpm else 0.0
        self.next = 0.0
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        if not self.gap:
            return
        async with self.lock:
            now = time.monotonic()
            if self.next > now:
                await asyncio.sleep(self.next - now)
            self.next = max(now, self.next) + self.gap


@register_backend("openai")
class OpenAIBackend:
    """Chat completions against an OpenAI-compatible server; `generate_each` streams finished requests."""

    help = "a model behind an OpenAI-compatible API (--base-url, --model-name)"
    batch_size = 1
    remote = True  # the server names the model: no model folder, requests through generate_each
    samples = False  # one completion per request

    @classmethod
    def build(cls, model_path: Path, cfg: GenConfig, options: dict[str, Any]) -> OpenAIBackend:
        """`model_path` is unused: the server names the model (`model_name`)."""
        fields = APIOptions.__dataclass_fields__
        return cls(cfg, APIOptions(**{k: v for k, v in options.items() if k in fields}))

    def __init__(self, cfg: GenConfig, opts: APIOptions) -> None:
        import importlib.util

        if importlib.util.find_spec("openai") is None:
            raise BackendError("--backend openai needs the openai package: pip install openai")
        if opts.token_param not in ("max_tokens", "max_completion_tokens"):
            raise BackendError(f"--token-param must be max_tokens or max_completion_tokens, got {opts.token_param!r}")
        if not opts.model_name:
            raise BackendError("--backend openai needs --model-name (the model as the server names it)")
        check_base_url(opts.base_url)
        self.cfg, self.opts = cfg, opts
        self._key = read_key(opts)
        self.retries = 0  # retries made in this process, all requests together

    def scrub(self, text: str) -> str:
        """Error text with the key removed (some servers echo what they were sent)."""
        return text.replace(self._key, "***") if self._key and self._key != "EMPTY" else text

    def request_kwargs(self) -> dict[str, Any]:
        c, o = self.cfg, self.opts
        kw: dict[str, Any] = {o.token_param: c.max_new_tokens}
        extra: dict[str, Any] = {}
        if o.send_temperature:
            kw["temperature"] = c.temperature
            if c.temperature > 0:
                kw["top_p"] = c.top_p
                kw["seed"] = c.seed
                if c.top_k > 0:
                    extra["top_k"] = c.top_k  # not an OpenAI parameter; vLLM and llama.cpp read it
        if extra:
            kw["extra_body"] = extra
        return kw

    def generate(self, conversations: list[list[dict[str, str]]]) -> list[str]:
        """The common backend interface (for scripts); failed requests raise BackendError."""
        out: list[Result | None] = [None] * len(conversations)

        def keep(i: int, r: Result) -> None:
            out[i] = r

        self.generate_each(conversations, keep)
        bad = [r for r in out if r is None or not r.ok]
        if bad:
            raise BackendError(f"{len(bad)} requests failed, e.g. {bad[0].error if bad[0] else 'lost'}")
        return [r.text for r in out if r is not None]

    def generate_each(self, conversations: list[list[dict[str, str]]],
                      on_result: Callable[[int, Result], None]) -> None:
        """Send every conversation, `concurrency` at a time; call `on_result(index, Result)` as each ends."""
        asyncio.run(self._run_all(conversations, on_result))

    async def _run_all(self, convs: list[list[dict[str, str]]], on_result: Callable[[int, Result], None]) -> None:
        from openai import AsyncOpenAI

        client = AsyncOpenAI(api_key=self._key, base_url=self.opts.base_url, timeout=self.opts.timeout,
                             max_retries=0)
        limiter = _RateLimiter(self.opts.rpm)
        queue: asyncio.Queue[int] = asyncio.Queue()
        for i in range(len(convs)):
            queue.put_nowait(i)
        state = {"ok": 0, "refused": 0, "fatal": None}
        kw = self.request_kwargs()

        async def worker() -> None:
            while not queue.empty() and state["fatal"] is None:
                i = queue.get_nowait()
                res = await self._one(client, limiter, convs[i], kw, state)
                if state["fatal"] is not None:
                    return
                on_result(i, res)

        try:
            workers = [asyncio.create_task(worker()) for _ in range(min(self.opts.concurrency, len(convs)))]
            await asyncio.gather(*workers)
        finally:
            await client.close()
        if state["fatal"]:
            raise BackendError(state["fatal"])

    async def _one(self, client: Any, limiter: _RateLimiter, conv: list[dict[str, str]], kw: dict[str, Any],
                   state: dict[str, Any]) -> Result:
        import openai

        attempt, reason = 0, ""
        while True:
            attempt += 1
            await limiter.wait()
            t0 = time.monotonic()
            wait: float | None = None
            try:
                raw = await client.chat.completions.with_raw_response.create(
                    model=self.opts.model_name, messages=conv, **kw)
                resp = raw.parse()
                state["ok"] += 1
                return self._result(resp, time.monotonic() - t0, attempt)
            except openai.APIStatusError as e:
                status = e.status_code
                msg = self.scrub(_error_text(e))
                reason = f"HTTP {status}: {msg}"
                if status in FATAL_STATUS:
                    state["fatal"] = f"the server refused the request: {reason}"
                    return Result(False, error=reason, attempts=attempt)
                if status not in RETRY_STATUS and status < 500:
                    state["refused"] += 1
                    if state["ok"] == 0 and state["refused"] >= 8:  # every request so far: a setting, not a row
                        state["fatal"] = f"the server refused the first 8 requests: {reason}{_hint(msg)}"
                    return Result(False, error=reason + _hint(msg), attempts=attempt)
                wait = retry_after(e.response.headers)
            except openai.APITimeoutError:
                reason = f"timeout after {self.opts.timeout:g} s"
            except openai.APIConnectionError as e:
                reason = f"connection error: {self.scrub(str(e.__cause__ or e))[:200]}"
                if state["ok"] == 0 and name_unresolved(e):  # no DNS answer: retrying for minutes changes nothing
                    state["fatal"] = (f"cannot resolve the host of {self.opts.base_url} ({reason}); check --base-url "
                                      "and the network (nothing was retried)")
                    return Result(False, error=reason, attempts=attempt)
            if attempt > self.opts.max_retries:
                return Result(False, error=reason, attempts=attempt)
            self.retries += 1
            backoff = random.uniform(0, min(self.opts.backoff_max, self.opts.backoff_base * 2 ** (attempt - 1)))
            await asyncio.sleep(max(backoff, wait or 0.0))

    def _result(self, resp: Any, latency: float, attempts: int) -> Result:
        choice = resp.choices[0] if resp.choices else None
        msg = choice.message if choice else None
        text = (msg.content or "") if msg else ""
        reasoning = None
        if msg is not None:
            extra = getattr(msg, "model_extra", None) or {}
            reasoning = extra.get("reasoning_content") or extra.get("reasoning")
        u = resp.usage
        usage = None
        if u is not None:
            usage = {"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens,
                     "total_tokens": u.total_tokens}
            details = getattr(u, "completion_tokens_details", None)
            if details is not None and getattr(details, "reasoning_tokens", None) is not None:
                usage["reasoning_tokens"] = details.reasoning_tokens
        fields: dict[str, Any] = {"usage": usage, "latency_s": round(latency, 4),
                                  "finish_reason": choice.finish_reason if choice else None,
                                  "attempts": attempts}
        if reasoning:
            fields["reasoning_content"] = reasoning
        return Result(True, text.strip(), fields, attempts=attempts)


def name_unresolved(e: BaseException) -> bool:
    """The connection failed because the host name has no address (socket.gaierror somewhere in the chain)."""
    import socket

    seen: set[int] = set()
    cur: BaseException | None = e
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, socket.gaierror) or any(s in str(cur) for s in (
                "Name or service not known", "Temporary failure in name resolution", "nodename nor servname")):
            return True
        cur = cur.__cause__ or cur.__context__
    return False


def _error_text(e: Any) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        inner = body.get("error", body)
        m = inner.get("message") if isinstance(inner, dict) else None
        if m:
            return str(m).splitlines()[0][:300]
    return str(getattr(e, "message", e)).splitlines()[0][:300]


def summarize(samples: list[dict[str, Any]], failures: dict[str, str], failed_attempts: int = 0) -> dict[str, Any]:
    """Cost and fault figures for results.json: tokens, retries (of the scored requests and of those that still
    failed: `failed_attempts`, their attempts in all), latency, requests still failed."""
    lat = sorted(s["latency_s"] for s in samples if s.get("latency_s") is not None)
    tot = {"prompt_tokens": 0, "completion_tokens": 0, "reasoning_tokens": 0}
    for s in samples:
        for k in tot:
            tot[k] += int((s.get("usage") or {}).get(k) or 0)
    reasons: dict[str, int] = {}
    for r in failures.values():
        reasons[r] = reasons.get(r, 0) + 1
    retries = sum(max(0, int(s.get("attempts", 1)) - 1) for s in samples) + max(0, failed_attempts - len(failures))
    return {"requests_ok": len(samples), "retries": retries,
            **tot, "latency_s_median": lat[len(lat) // 2] if lat else None,
            "latency_s_p95": lat[min(len(lat) - 1, int(len(lat) * 0.95))] if lat else None,
            "finish_reasons": _count(s.get("finish_reason") for s in samples),
            "n_failed": len(failures), "failed_reasons": reasons}


def _count(xs: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for x in xs:
        out[str(x)] = out.get(str(x), 0) + 1
    return out
