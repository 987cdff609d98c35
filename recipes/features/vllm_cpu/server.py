"""Weight sync from TRL's trainer to a vLLM *server* without CUDA: the HTTP/reload transport.

Why: TRL 1.16's server mode always calls `VLLMClient.init_communicator`, which raises `NotImplementedError` for any
non-CUDA device ("Weight synchronization runs on vLLM's NCCL weight-transfer engine, which needs a CUDA device"),
and vLLM 0.32's weight-transfer engines are NCCL only. So on CPU the policy never reaches the server.

How: vLLM's OpenAI server in development mode (`VLLM_SERVER_DEV_MODE=1 python -m vllm.entrypoints.openai.api_server
--worker-extension-cls recipes.features.vllm_cpu.server.ReloadWorkerExtension`) serves `POST /collective_rpc`, which
calls a worker method by name on every worker; `ReloadWorkerExtension.tase_reload_weights(FILE)` feeds the file to the
workers' `reload_weights(weights_iterator, is_checkpoint_format=True)`, vLLM's in-place reload (the call
`recipes/features/vllm_cpu/colocate.py` makes in colocate mode: it restores the checkpoint-format layers, loads the
tensors and re-runs the post-load processing, the CPU backend's repacking), then re-packs a tied LM head (see the
class). `ReloadVLLMClient` is TRL's `VLLMClient` with three methods changed for non-CUDA devices only:

* `init_communicator`: no NCCL group; checks that the server answers `/collective_rpc` and creates the sync folder.
* `update_named_params`: writes the tensors TRL streams (TRL's own iterator: ZeRO-3 gathering, PEFT merge) into
  `DIR/model.safetensors` (written beside and renamed, so the server never reads half a file), then asks the server
  to reload it; `weight_update`'s start/finish calls (NCCL-engine endpoints) are skipped.
* TRL's `reset_prefix_cache` call after the sync is unchanged (cached KV blocks were computed with the old weights).

On a CUDA device every method is TRL's own, so GPU runs keep the NCCL path unchanged. The folder must be visible to
trainer rank 0 and the server: the run's output folder (`<output_dir>/vllm-sync`) by default, which a cluster keeps on
a shared filesystem; `TASE_VLLM_SYNC_DIR` overrides it. Cost per sync: one safetensors write + one read of the whole
model (float32 SmolLM2-135M: 513 MiB, ~3-4 s per sync measured) plus the repacking; docs/training.md ("Scaling out").

Where it plugs in: TRL has no hook for the client class (`VLLMGeneration._init_vllm` builds `VLLMClient` by name), so
`install()` rebinds that one name in `trl.generation.vllm_generation` to the subclass, on machines without CUDA only.
"""
from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SYNC_DIR_ENV = "TASE_VLLM_SYNC_DIR"


def _client_class() -> type:
    import torch
    from trl.generation.vllm_client import VLLMClient

    class ReloadVLLMClient(VLLMClient):
        """TRL's VLLMClient; on a non-CUDA device, weights travel as a safetensors file + `/collective_rpc`."""

        sync_dir: Path | None = None
        _cpu_sync = False
        sync_seconds: list[float]

        def init_communicator(self, device: Any = 0) -> None:
            dev = torch.device("cuda", device) if isinstance(device, int) else torch.device(device)
            if dev.type == "cuda":
                return super().init_communicator(device)
            self._cpu_sync, self.sync_seconds = True, []
            self.sync_dir = Path(os.environ.get(SYNC_DIR_ENV) or Path.cwd() / "vllm-sync").resolve()
            self.sync_dir.mkdir(parents=True, exist_ok=True)
            self.get_server_info()  # a development-mode endpoint: names VLLM_SERVER_DEV_MODE=1 when it is missing
            self.probe(0)

        def _start_weight_update(self) -> None:
            if not self._cpu_sync:
                super()._start_weight_update()

        def _finish_weight_update(self) -> None:
            if not self._cpu_sync:
                super()._finish_weight_update()

        def update_named_params(self, metadata: list, named_params: Iterator) -> None:
            if not self._cpu_sync:
                return super().update_named_params(metadata, named_params)
            from safetensors.torch import save_file

            t0 = time.perf_counter()
            tensors = {name: t.detach().to("cpu").contiguous().clone() for name, t in named_params}
            tmp = self.sync_dir / ".model.safetensors.tmp"
            save_file(tensors, str(tmp))
            os.replace(tmp, self.sync_dir / "model.safetensors")
            self._post(f"{self.base_url}/collective_rpc", json={"method": "tase_reload_weights",
                                                                 "args": [str(self.sync_dir / "model.safetensors")]})
            self.sync_seconds.append(time.perf_counter() - t0)
            print(f"vllm sync {len(self.sync_seconds)}: {len(tensors)} tensors "
                  f"({sum(t.numel() * t.element_size() for t in tensors.values()) / 2**20:.0f} MiB) reloaded by "
                  f"{self.base_url} in {self.sync_seconds[-1]:.2f} s", flush=True)
            self.probe(len(self.sync_seconds))

        def probe(self, sync: int) -> None:
            """With TASE_VLLM_SYNC_PROBE=ID,ID,... print the server's greedy continuation of those prompt token ids
            and its log-probs after each sync, as one JSON line (`vllm probe N: {...}`): what the served policy
            generates now, for checking against the trainer's weights (tests/test_slurm.py)."""
            ids = os.environ.get("TASE_VLLM_SYNC_PROBE")
            if not ids:
                return
            import json

            out = self._post(f"{self.base_url}/v1/completions", json={
                "model": self.model, "prompt": [int(i) for i in ids.split(",")], "max_tokens": 4, "temperature": 0.0,
                "logprobs": 0, "return_tokens_as_token_ids": True})
            lp = out["choices"][0]["logprobs"]
            print(f"vllm probe {sync}: " + json.dumps({"tokens": [int(t.split(":")[1]) for t in lp["tokens"]],
                                                       "logprobs": lp["token_logprobs"]}), flush=True)

        def close_communicator(self) -> None:
            if not self._cpu_sync:
                super().close_communicator()

    return ReloadVLLMClient


def install(sync_dir: str | Path | None = None) -> bool:
    """Use `ReloadVLLMClient` for TRL's server mode on a machine without CUDA; returns whether it did.

    sync_dir: the folder shared by trainer rank 0 and the server (`TASE_VLLM_SYNC_DIR` wins when set)."""
    import torch

    if torch.cuda.is_available():
        return False
    import trl.generation.vllm_generation as vg

    if sync_dir is not None:
        os.environ.setdefault(SYNC_DIR_ENV, str(sync_dir))
    if not getattr(vg.VLLMClient, "_cpu_reload_transport", False):
        cls = _client_class()
        cls._cpu_reload_transport = True
        vg.VLLMClient = cls
    return True


class ReloadWorkerExtension:
    """vLLM worker extension (`--worker-extension-cls recipes.features.vllm_cpu.server.ReloadWorkerExtension`, vLLM's
    own hook for adding worker methods that `/collective_rpc` can call): `tase_reload_weights(path)` reloads a
    safetensors file in place and refreshes a tied LM head.

    Why not `reload_weights(weights_path=...)` alone: on CPU vLLM packs the LM head's weight for its GEMM after
    loading (`UnquantizedEmbeddingMethod.process_weights_after_loading` -> `dispatch_cpu_unquantized_gemm`); with tied
    embeddings (SmolLM2, the tiny test models) the reload updates `embed_tokens` but skips `lm_head.weight`, so the
    packed copy keeps the old embedding and the logits come from the old head (measured: the served log-probs were
    those of the new body with the initial head). Re-running the head's post-load step re-packs the shared weight.
    """

    def tase_reload_weights(self, path: str) -> None:
        from safetensors.torch import load_file

        weights = load_file(path)
        self.reload_weights(weights_iterator=iter(weights.items()), is_checkpoint_format=True)
        model = self.model_runner.get_model()
        head, embed = getattr(model, "lm_head", None), getattr(getattr(model, "model", None), "embed_tokens", None)
        if head is not None and embed is not None and "lm_head.weight" not in weights \
                and getattr(head, "quant_method", None) is not None:
            head.quant_method.process_weights_after_loading(head)
