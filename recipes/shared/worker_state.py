"""The trainer's side of a feature whose state lives in the async rollout worker (the curriculum's levels, the
guidance schedule): the worker puts its state on a spawn-context queue after each group, and the trainer takes the
latest before a checkpoint saves it."""
from __future__ import annotations

from typing import Any


class WorkerStateQueue:
    """`queue` carries the worker's states (spawn context: handed to the rollout child with its loop kwargs); `drain`
    loads the last one into `target` (an object with `load(state)`), the trainer's copy its checkpoints save."""

    def __init__(self, target: Any) -> None:
        import multiprocessing as mp

        self.target = target
        self.queue = mp.get_context("spawn").Queue()

    def drain(self) -> int:
        """Take every state the worker sent; the last one becomes the trainer's copy. Returns how many."""
        import queue

        n, last = 0, None
        while True:
            try:
                last = self.queue.get_nowait()
            except queue.Empty:
                break
            n += 1
        if last is not None:
            self.target.load(last)
        return n
