"""What a generation backend is (`Backend`) and the registry of them (`BACKENDS`), filled by `@register_backend`.

A backend is a class registered under its name by the decorator (as verl registers its reward managers); the name is
spelled there and nowhere else: `--backend`'s choices and help, the default batch sizes, the recipes' choices and the
runner's remote-or-local branch all read the registry. `BACKENDS` is a `common.registry.Registry`: a name already
taken is refused in one line naming both classes.

The built-in backends register in eval/backends.py (hf, vllm) and eval/api_backend.py (openai); eval/backends.py
imports every module that registers one, so `import eval.backends` sees them all (docs/architecture.md, "Adding a
backend"). This module imports none of them: they import it.
"""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Protocol, TypeVar

from common.registry import Registry, RegistryError

from .gen_config import BackendError, GenConfig


class Backend(Protocol):
    """What the runner (eval/runner.py) and `eval run` (eval/_cli/run.py) use of a backend.

    Class attributes: `name` (set by `register_backend`), `help` (its line in `--backend`'s help), `batch_size`
    (prompts per `generate` call by default), `remote` (the model lives on a server that `--base-url` and
    `--model-name` name: no local model is resolved, the runner hands requests to `generate_each(conversations,
    on_result)` and results.json gets an `api` block), `streams` (`generate_streaming(conversations, on_text)`
    hands each completion over as its request ends), `samples` (more than one completion per prompt with
    `--num-samples`). `build` makes one from the run's options (the `eval run` options it does not use are
    ignored); `generate` returns one completion per conversation, or a list of `num_samples` of them."""

    name: ClassVar[str]
    help: ClassVar[str]
    batch_size: ClassVar[int]
    remote: ClassVar[bool]
    streams: ClassVar[bool]
    samples: ClassVar[bool]

    @classmethod
    def build(cls, model_path: Path, cfg: GenConfig, options: dict[str, Any]) -> Backend: ...

    def generate(self, conversations: list[list[dict[str, str]]]) -> list[Any]: ...


# the optional class attributes and their values where a backend does not set them
DEFAULTS: dict[str, bool] = {"remote": False, "streams": False, "samples": True}

B = TypeVar("B", bound=type)

BACKENDS: Registry[type[Backend]] = Registry("backend", origin=lambda cls: f"{cls.__module__}.{cls.__qualname__}")


def register_backend(name: str) -> Callable[[B], B]:
    """Class decorator: register the class as backend `name` and set its `name`. A class without `build`,
    `generate`, a positive int `batch_size` or a `help` line, or a name already taken, is refused (RegistryError)."""

    def add(cls: B) -> B:
        missing = [a for a in ("build", "generate") if not callable(getattr(cls, a, None))]
        batch = getattr(cls, "batch_size", None)
        if not (isinstance(batch, int) and batch >= 1):
            missing.append("batch_size (a positive int)")
        if not isinstance(getattr(cls, "help", None), str) or not cls.help:
            missing.append("help")
        if missing:
            raise RegistryError(f"backend {name!r} ({cls.__module__}.{cls.__qualname__}) lacks {', '.join(missing)}")
        BACKENDS.add(name, cls)
        cls.name = name
        for attr, value in DEFAULTS.items():
            if not hasattr(cls, attr):
                setattr(cls, attr, value)
        return cls

    return add


def backend_class(name: str) -> type[Backend]:
    """The class registered as `name`; an unknown name is one BackendError line listing the known ones."""
    cls = BACKENDS.get(name)
    if cls is None:
        raise BackendError(f"unknown backend {name!r}; choose {', '.join(BACKENDS.names())}")
    return cls


def backend_names(local: bool = False) -> tuple[str, ...]:
    """The registered names in registration order; `local`: only those that run a model folder here (not remote)."""
    return tuple(n for n, cls in BACKENDS.items() if not (local and cls.remote))
