"""Generation backends with one interface: `generate(list of chat messages) -> list of strings`.

`hf`: transformers, batched, left padding, greedy unless sampling is asked for; works on CPU.
`vllm`: offline `LLM.chat` with prefix caching; only with the `gpu` extra and a CUDA device.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


class BackendError(RuntimeError):
    """A backend that cannot run here (one clear line for the CLI)."""


@dataclass
class GenConfig:
    max_new_tokens: int = 1024
    temperature: float = 0.0  # 0 = greedy
    top_p: float = 1.0
    top_k: int = -1
    seed: int = 0
    batch_size: int = 8


class HFBackend:
    name = "hf"

    def __init__(self, model_path: Path, cfg: GenConfig, device: str | None = None, dtype: str = "bfloat16") -> None:
        import torch

        from .models import load_model_and_tokenizer

        self.cfg = cfg
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model, self.tok = load_model_and_tokenizer(model_path, dtype=dtype, device=self.device)
        if self.tok.chat_template is None:
            raise BackendError(f"{model_path}: tokenizer has no chat template (base model?); use an instruct model")

    def generate(self, conversations: list[list[dict[str, str]]]) -> list[str]:
        import torch

        texts = [self.tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False) for c in conversations]
        enc = self.tok(texts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        kw: dict[str, Any] = {"max_new_tokens": self.cfg.max_new_tokens, "pad_token_id": self.tok.pad_token_id}
        if self.cfg.temperature > 0:
            torch.manual_seed(self.cfg.seed)
            kw.update(do_sample=True, temperature=self.cfg.temperature, top_p=self.cfg.top_p)
            if self.cfg.top_k > 0:
                kw["top_k"] = self.cfg.top_k
        else:
            kw.update(do_sample=False, temperature=None, top_p=None, top_k=None)
        with torch.inference_mode():
            out = self.model.generate(**enc, **kw)
        new = out[:, enc["input_ids"].shape[1] :]
        return [t.strip() for t in self.tok.batch_decode(new, skip_special_tokens=True)]


class VLLMBackend:
    name = "vllm"

    def __init__(self, model_path: Path, cfg: GenConfig, max_model_len: int = 16384) -> None:
        try:
            import vllm  # noqa: F401
        except ImportError:
            raise BackendError('--backend vllm needs vllm: pip install -e ".[gpu]" on a CUDA machine') from None
        import torch

        if not torch.cuda.is_available():
            raise BackendError("--backend vllm needs a CUDA GPU and none is visible; use --backend hf")
        from vllm import LLM, SamplingParams

        self.cfg = cfg
        self.llm = LLM(model=str(model_path), enable_prefix_caching=True, seed=cfg.seed, max_model_len=max_model_len)
        self.params = SamplingParams(
            temperature=cfg.temperature, top_p=cfg.top_p, top_k=cfg.top_k if cfg.top_k > 0 else -1,
            max_tokens=cfg.max_new_tokens, seed=cfg.seed,
        )

    def generate(self, conversations: list[list[dict[str, str]]]) -> list[str]:
        outs = self.llm.chat(conversations, sampling_params=self.params, use_tqdm=False)
        return [o.outputs[0].text.strip() if o.outputs else "" for o in outs]


def make_backend(name: str, model_path: Path, cfg: GenConfig) -> Any:
    if name == "hf":
        return HFBackend(model_path, cfg)
    if name == "vllm":
        return VLLMBackend(model_path, cfg)
    raise BackendError(f"unknown backend {name!r}; choose hf or vllm")
