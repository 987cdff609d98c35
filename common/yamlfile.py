"""The one YAML reader of configs (recipe `--config`, proof configs, presets, mixture files): `read`, a file through
`yaml.safe_load` that refuses a duplicate key, every failure sorted into one YamlFileError (`bounded`,
common/errors.py, quotes a value in an error line).

Why: PyYAML keeps the last of two equal keys without a word (`learning_rate` twice: the second wins, whichever the
user meant), and an alias bomb (`&a [...]`, `[*a, *a, ...]` nested) is cheap to load, shared references, but its
repr is exponential: a type-check message quoting it printed megabytes. A duplicate key is a
`yaml.constructor.ConstructorError` (a `yaml.YAMLError`, which every reader already turns into one line naming the
file) whose first line names the key and its line.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from common.errors import bounded


class UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader refusing a key given twice in one mapping (merge keys `<<:` may still be overridden)."""

    def construct_mapping(self, node: Any, deep: bool = False) -> dict:
        if isinstance(node, yaml.MappingNode):
            seen: set = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    dup = key in seen
                    seen.add(key)
                except TypeError:  # an unhashable key: SafeLoader's own error follows
                    continue
                if dup:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"duplicate key {bounded(key, 60)} on line {key_node.start_mark.line + 1}", None)
        return super().construct_mapping(node, deep=deep)


def load(text: str) -> Any:
    """`yaml.safe_load(text)` with duplicate keys refused (yaml.YAMLError)."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


class YamlFileError(ValueError):
    """Why a YAML file did not load, sorted once for every reader (each words its own line): `kind` is "read" (an
    OSError), "encoding" (not UTF-8), "yaml" (invalid YAML or a key given twice) or "depth" (nested too deeply);
    `cause` is the original exception."""

    def __init__(self, kind: str, cause: BaseException) -> None:
        super().__init__(f"{kind}: {cause}")
        self.kind, self.cause = kind, cause


def read(path: str | Path) -> Any:
    """A YAML file's content (`load`: safe_load refusing a key given twice); any failure is one YamlFileError."""
    try:
        return load(Path(path).read_text(encoding="utf-8"))
    except OSError as e:
        raise YamlFileError("read", e) from None
    except UnicodeDecodeError as e:
        raise YamlFileError("encoding", e) from None
    except yaml.YAMLError as e:
        raise YamlFileError("yaml", e) from None
    except RecursionError as e:
        raise YamlFileError("depth", e) from None


def too_large(value: Any, limit: int = 10_000) -> bool:
    """Whether a loaded YAML value holds more than `limit` items in all, counted through its aliases (an alias bomb:
    a few lines that load as billions of shared references), stopping as soon as the count passes the limit."""
    count, stack = 0, [value]
    while stack:
        v = stack.pop()
        count += 1
        if count > limit:
            return True
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set)):
            stack.extend(v)
    return False


__all__ = ["UniqueKeyLoader", "YamlFileError", "bounded", "load", "read", "too_large"]
