"""Policy weights from the trainer to an in-process vLLM engine over a two-member gloo group (no NCCL, no CUDA):
the trainer's rank 0 broadcasts every parameter; the engine side loads them with vLLM's reload API between two
generation batches and acknowledges, so no batch mixes two policies. recipes/async_grpo/cpu_engine.py says why this
design."""
from __future__ import annotations

import socket
import time
from datetime import timedelta
from typing import Any

import torch

from common.errors import TaseError
from recipes.async_grpo.trl_checks import dead_worker_line, stalled_sync_line


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _gloo(store: Any, rank: int, timeout_s: float) -> Any:
    from torch.distributed import PrefixStore, ProcessGroupGloo

    return ProcessGroupGloo(PrefixStore("weights", store), rank, 2, timedelta(seconds=timeout_s))


class GlooWeightTransfer:
    """Trainer side (`WeightTransferProtocol` of TRL's AsyncGRPOTrainer), rank 0 only.

    `manifest`: (names, dtypes, shapes) of the parameters, in the order `send_weights` streams them.
    `start_peer`: called once before the rendezvous (starts the rollout child, which joins the group).
    `peer_exit`: returns the peer's exit code once it has died (None while it lives): every wait polls it, so a dead
    rollout child ends the run in one line at once instead of after `timeout_s`."""

    def __init__(self, manifest: dict[str, list], start_peer: Any = None, host: str = "127.0.0.1",
                 port: int | None = None, timeout_s: float = 600.0, peer_exit: Any = None):
        self.manifest, self.start_peer, self.peer_exit = manifest, start_peer, peer_exit
        self.host, self.port, self.timeout_s = host, port or free_port(), timeout_s
        self.store = self.pg = None
        self.version = 0
        self.send_s: list[float] = []  # seconds per sync, for logs and the bench

    def peer_info(self) -> dict[str, Any]:
        """What the receiving side needs (picklable)."""
        return {"host": self.host, "port": self.port, "timeout_s": self.timeout_s, **self.manifest}

    def init_weight_transfer(self) -> None:
        from torch.distributed import TCPStore

        self.store = TCPStore(self.host, self.port, 2, True, timedelta(seconds=self.timeout_s),
                              wait_for_workers=False)
        if self.start_peer is not None:
            self.start_peer()
        try:
            self.pg = _gloo(self.store, 0, self.timeout_s)
        except RuntimeError as e:  # the rollout child never joined the group
            raise TaseError(stalled_sync_line("joining the rollout engine's weight group", self.timeout_s, e)) from None

    def pause(self) -> None:  # the receiver applies weights between two generation batches: no pause needed
        pass

    def resume(self) -> None:
        pass

    def send_weights(self, iterator: Any) -> None:
        """Every parameter to the engine and its acknowledgement, or one TaseError line once timeout_s (the run's
        weight_sync_timeout) passes without the engine taking them: a stalled peer ends the run, never hangs it."""
        try:
            self._send(iterator)
        except RuntimeError as e:  # gloo's and the store's timeouts (DistStoreError is a RuntimeError)
            if "weight stream" in str(e):
                raise
            raise TaseError(stalled_sync_line(f"weight sync {self.version}", self.timeout_s, e)) from None

    def _send(self, iterator: Any) -> None:
        t0 = time.time()
        self.version += 1
        self.store.set("sync_request", str(self.version))
        names = self.manifest["names"]
        n = 0
        for name, tensor in iterator:
            if n >= len(names) or name != names[n]:
                raise RuntimeError(f"weight stream out of order: got {name!r}, manifest expects "
                                   f"{names[n] if n < len(names) else 'nothing'!r}")
            t = tensor.detach().to("cpu").contiguous()
            work = self.pg.broadcast(t, 0)
            self._wait(work.is_completed, t0)
            work.wait()  # raises what gloo raised (its own timeout)
            n += 1
        if n != len(names):
            raise RuntimeError(f"weight stream ended after {n} of {len(names)} parameters")
        self._wait(lambda: self.store.check([f"ack_{self.version}"]), t0)
        self.send_s.append(time.time() - t0)

    def _wait(self, done: Any, t0: float) -> None:
        """Until `done()`; a dead peer is one TaseError line at once, no answer within timeout_s a RuntimeError (the
        stalled-sync line)."""
        pause = 0.0005
        while not done():
            code = self.peer_exit() if self.peer_exit is not None else None
            if code is not None:
                raise TaseError(dead_worker_line(f"during weight sync {self.version}", code))
            if time.time() - t0 > self.timeout_s:
                raise RuntimeError(f"no answer in {self.timeout_s:g} s")
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def destroy(self) -> None:
        self.pg = None
        self.store = None


class GlooWeightReceiver:
    """Engine side: joins the trainer's group and, when a sync is pending, receives every parameter and loads it."""

    def __init__(self, info: dict[str, Any]):
        from torch.distributed import TCPStore

        self.info = info
        self.store = TCPStore(info["host"], info["port"], 2, False, timedelta(seconds=info["timeout_s"]))
        self.pg = _gloo(self.store, 1, info["timeout_s"])
        self.buffers = [torch.empty(shape, dtype=getattr(torch, dt))
                        for dt, shape in zip(info["dtypes"], info["shapes"], strict=False)]
        self.version = 0  # weights in the engine: 0 = the checkpoint it was started from

    def pending(self) -> int:
        if not self.store.check(["sync_request"]):
            return 0
        return int(self.store.get("sync_request"))

    def receive_into(self, llm: Any) -> bool:
        """Apply a pending sync to `llm` (vllm.LLM in this process); returns whether there was one."""
        want = self.pending()
        if want <= self.version:
            return False
        for buf in self.buffers:
            self.pg.broadcast(buf, 0).wait()
        from recipes.features.vllm_cpu import reload_sync

        reload_sync(llm, zip(self.info["names"], self.buffers, strict=False))
        self.version = want
        self.store.set(f"ack_{want}", "1")
        return True


# --------------------------------------------------------------------------------------------- rollout worker
