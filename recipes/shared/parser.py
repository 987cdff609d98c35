"""The recipes' command line, read once: TRL's TrlParser over a recipe's dataclasses (its options, a TRL config,
ModelConfig), with the --config YAML read once and checked against the parser's own options, and every error one
line (a TaseError), never argparse's usage text. Shared by GRPO, the SFT warm-up and proof.py's stage checks.

Abbreviated options are refused (argparse reads `--learning_rat` as `--learning_rate`): a misspelling is an error."""
from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.errors import TaseError, one_line_errors  # noqa: F401  (one_line_errors: the recipes' import)


def read_yaml(path: str | Path, what: str = "--config ") -> Any:
    """A YAML file's content (common.yamlfile.read: safe_load, a key given twice refused); an unreadable file or
    invalid YAML is one line naming it."""
    from common.yamlfile import YamlFileError, read

    try:
        return read(path)
    except YamlFileError as e:
        cause = e.cause
        if e.kind in ("read", "encoding"):
            raise TaseError(f"{what}{path}: cannot read ({getattr(cause, 'strerror', None) or cause})") from None
        if e.kind == "yaml":
            raise TaseError(f"{what}{path}: not valid YAML ({str(cause).splitlines()[0]})") from None
        raise TaseError(f"{what}{path}: nested too deeply to read") from None


def config_value(path: str | Path, key: str) -> str:
    """One top-level value of a recipe YAML as a launcher's shell needs it (launch/_options.sh `config_key`): "" when
    the key is absent or null or the file does not read (the recipe's own run reports that in its one line),
    booleans as YAML writes them, anything else as str()."""
    try:
        data = read_yaml(path)
    except TaseError:
        return ""
    value = data.get(key) if isinstance(data, dict) else None
    if value is None:
        return ""
    return str(value).lower() if isinstance(value, bool) else str(value)


class ConfigFile:
    """The --config YAML of a command line, read once: `path`, `values` (a mapping), and `argv` without it. `read`
    is the reader (read_yaml): proof.py passes one that reads each recipe config once for all its stages."""

    def __init__(self, argv: list[str], read: Callable[[str], Any] = read_yaml) -> None:
        self.argv, self.path, self.values = list(argv), None, {}
        if "--config" not in self.argv:
            return
        i = self.argv.index("--config")
        if i + 1 >= len(self.argv):
            raise TaseError("--config needs a file")
        self.path = self.argv[i + 1]
        del self.argv[i:i + 2]
        data = read(self.path)
        if not isinstance(data, dict):  # an empty file too
            raise TaseError(f"--config {self.path}: must be a YAML mapping of option: value")
        self.values = data

    def given(self) -> set[str]:
        """Option names set on the command line or in the YAML."""
        keys = {a[2:].split("=")[0].replace("-", "_") for a in self.argv if a.startswith("--")}
        return keys | {str(k) for k in self.values}


class RecipeParser:
    """TrlParser over `types`, reading a ConfigFile: YAML values become the options' defaults (TRL's
    set_defaults_with_config), the command line overrides them; one TaseError line for any bad value. Its --help is
    a short usage line and the options by section (`section`: a TASE option's section, recipes/shared/config.py; the
    others by the library class that declares them), not argparse's usage line of every option."""

    def __init__(self, types: tuple, where: str = "", prog: str | None = None, description: str = "",
                 section: Callable[[str], str | None] | None = None) -> None:
        from trl import TrlParser

        recipe = self

        class _Parser(TrlParser):
            def error(self, message: str):  # argparse's usage text + exit 2 -> one line
                raise TaseError(f"{where}{message}")

            def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
                """argparse's, each action also kept in the recipe's own list (`actions`)."""
                action = super().add_argument(*args, **kwargs)
                recipe.actions.append(action)
                return action

            def format_help(self) -> str:
                return recipe.help_text()

        self.where, self.types = where, tuple(types)
        self.prog, self.description, self.section = prog, description, section
        self.actions: list[argparse.Action] = []  # every option the parser holds, in the order it was added
        self.parser = _Parser(types, allow_abbrev=False, prog=prog)

    def options(self) -> set[str]:
        """Every option name the parser knows (dest), and the former names of renamed ones (still accepted)."""
        known = {a.dest for a in self.option_actions()}
        return known | {old for old, new in self.renamed.items() if new in known}

    @property
    def renamed(self) -> dict[str, str]:
        """Former option name -> new name, as the options classes declare them (`renamed_options`: TaseArgs gets its
        features' `renamed`, recipes/shared/config.py)."""
        return {old: new for t in self.types for old, new in getattr(t, "renamed_options", {}).items()}

    def rename(self, values: dict, argv: list[str], path: str | None = None) -> list[str]:
        """Former option names (an options class's `renamed_options`) in the YAML `values` (read from `path`, changed
        in place) and on the command line, given their new names; one deprecation line on stderr per name used. A
        former name beside its new one in the YAML, or on the command line, is one line (both_names)."""
        known = {a.dest for a in self.option_actions()}
        argv = list(argv)
        for old, new in self.renamed.items():
            if new not in known:
                continue
            used = old in values
            if used:
                if new in values:  # which one was meant is not for the parser to guess
                    raise TaseError(f"--config {path}: {both_names(old, new)}")
                values[new] = values.pop(old)
            flags = [a[2:].split("=")[0] for a in argv if a.startswith("--")]
            names = {f.replace("-", "_") for f in flags}
            if old in names and new in names:
                raise TaseError(f"{self.where}--{old} and --{new}: {both_names(old, new)}")
            for i, a in enumerate(argv):
                name = a[2:].split("=")[0]
                if a.startswith("--") and name.replace("-", "_") == old:
                    argv[i], used = "--" + new + a[2 + len(name):], True
            if used:
                print(deprecation_note(old, new), file=sys.stderr)
        return argv

    def parse(self, config: ConfigFile) -> tuple:
        """The dataclasses, as TrlParser.parse_args_and_config builds them (YAML `env:` set first, unknown YAML
        keys refused after the command line is read), from the YAML read once."""
        values = dict(config.values)
        argv = self.rename(values, config.argv, config.path)
        if values:
            self.check_types(config.path, values)
        try:
            if "env" in values:
                env = values.pop("env", {})
                if not isinstance(env, dict):
                    raise ValueError("`env` field should be a dict in the YAML file.")
                for key, value in env.items():
                    os.environ[key] = str(value)
            unknown = self.parser.set_defaults_with_config(**values)
            out = self.parser.parse_args_into_dataclasses(args=argv)
            if unknown:
                raise ValueError(f"Unknown arguments from config file: {unknown}. Please remove them, add them to the "
                                 "dataclass, or set `fail_with_unknown_args=False`.")
            return out
        except (ValueError, TypeError, FileNotFoundError) as e:
            raise TaseError(self.where + str(e).strip().splitlines()[0]) from None

    def option_actions(self) -> list[argparse.Action]:
        """The options (not -h/--help), from the list add_argument keeps (no private argparse attribute read)."""
        return [a for a in self.actions if a.dest != "help"]

    def sections(self) -> list[tuple[str, list[str]]]:
        """(title, option names) in help order: the TASE sections `section` names (data, rewards, run, then each
        feature's), then each library class's own fields, the most derived class first (TRL's GRPOConfig before
        transformers' TrainingArguments it extends), then ModelConfig's."""
        ours: dict[str, list[str]] = {}
        theirs: dict[str, list[str]] = {}
        for t in self.types:
            mro = [k for k in t.__mro__ if dataclasses.is_dataclass(k) and not k.__name__.startswith("_")]
            by_class: dict[type, list[str]] = {}
            for f in dataclasses.fields(t):
                title = self.section(f.name) if self.section else None
                if title:
                    ours.setdefault(title, []).append(f.name)
                    continue
                first = next((k for k in t.__mro__ if f.name in vars(k).get("__annotations__", {})), t)
                # the class that declares it last, or the nearest public subclass of a private one (TRL's _BaseConfig)
                owner = [k for k in mro if issubclass(k, first)][-1]
                by_class.setdefault(owner, []).append(f.name)
            for k in sorted(by_class, key=mro.index):
                lib = k.__module__.split(".")[0]
                lib = "TRL" if lib == "trl" else lib
                title = f"{lib}{chr(39) if lib.endswith('s') else chr(39) + 's'} {k.__name__}"
                theirs.setdefault(title, []).extend(by_class[k])
        order = ("data", "rewards", "run")
        tase = sorted(ours.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order))
        return [*tase, *theirs.items()]

    def help_text(self) -> str:
        """--help: a short usage line, the description, then every option by section, one entry each: its names
        (`--no_NAME` beside a boolean that has one), metavar, help text and default."""
        import shutil
        import textwrap

        width = max(60, min(120, shutil.get_terminal_size((100, 24)).columns))
        prog = self.prog or os.path.basename(sys.argv[0])
        lines = [f"usage: {prog} [--config FILE.yaml] [--OPTION VALUE ...]", ""]
        if self.description:
            lines += [*textwrap.wrap(self.description, width), ""]
        lines += textwrap.wrap("Every option is also a key of the --config YAML; the command line overrides it. "
                               "Booleans take true or false (alone: true). -h, --help: this text.", width)
        by_dest: dict[str, list[argparse.Action]] = {}
        for a in self.option_actions():
            by_dest.setdefault(a.dest, []).append(a)
        for title, names in self.sections():
            entries = [_help_entry(by_dest[n], width) for n in names if n in by_dest]
            entries = [e for e in entries if e]
            if entries:
                lines += ["", f"{title}:", *entries]
        return "\n".join(lines) + "\n"

    def check_types(self, path: str | None, values: dict) -> None:
        """The YAML against the options, before argparse sees it as defaults: a value of the wrong type is one
        line naming the key, the expected type and the value (argparse would print its usage text, or let a
        list through to crash later). Unknown keys are left to parse's own line."""
        actions: dict[str, Any] = {}
        for a in self.option_actions():  # the option taking a value (bools also have a --no_X flag taking none)
            if a.nargs != 0:
                actions.setdefault(a.dest, a)
        from common.errors import bounded
        from common.yamlfile import too_large

        mappings = self.mapping_options()
        for key, value in values.items():
            a = actions.get(key)
            if a is None or value is None:
                continue
            if isinstance(value, dict) and key in mappings:  # generation_kwargs, model_init_kwargs: TRL takes a dict
                if too_large(value):
                    raise TaseError(f"--config {path}: {key} holds over 10,000 values through its aliases (an alias "
                                    f"bomb?): {bounded(value)}")
                continue
            many = a.nargs in ("+", "*") or (isinstance(a.nargs, int) and a.nargs > 1)
            if many and not isinstance(value, list):
                raise TaseError(f"--config {path}: {key} expects a list, got {bounded(value)}")
            for v in value if many else [value]:
                if not _fits(a, v):
                    want = "one of " + ", ".join(map(str, a.choices)) if a.choices else _type_name(a)
                    raise TaseError(f"--config {path}: {key} expects {want}, got {bounded(v)}")

    def mapping_options(self) -> set[str]:
        """Options whose dataclass field takes a dict (`dict | str | None`: TRL's generation_kwargs, model_init_kwargs),
        which a YAML mapping sets as it is (the command line takes them as JSON text)."""
        out: set[str] = set()  # the classes' annotations: HfArgumentParser rewrites a field's type (dict | str -> str)
        for t in self.types:
            for klass in t.__mro__:
                out |= {k for k, v in vars(klass).get("__annotations__", {}).items() if "dict" in str(v)}
        return out


def parse_config(dataclass_types: tuple, argv: list[str], **help_args: Any) -> tuple:
    """The dataclasses of `argv` (--config YAML and command line) in one read: RecipeParser over ConfigFile;
    `help_args` (prog, description, section) shape its --help."""
    return RecipeParser(dataclass_types, **help_args).parse(ConfigFile(argv))


def deprecation_note(old: str, new: str) -> str:
    """The one line a former option name prints (the same text in launch/_options.sh): the old name still works."""
    return f"{old} is deprecated: use {new} (the old name is accepted for one more release)"


def both_names(old: str, new: str) -> str:
    """The one line for a former option name given beside its new name (a YAML, a command line, a proof arm):
    refused, since either could be the one meant."""
    return f"{old} is the former name of {new}; give one"


def rename_flags(argv: list[str], renamed: dict[str, str]) -> list[str]:
    """A plain argparse command line (ablate.py) with former flags (`--old` or `--old=V`, old -> new in `renamed`,
    names without dashes) given their new names; one deprecation line on stderr per former name used, one error line
    for a former flag beside its new one."""
    argv = list(argv)
    for old, new in renamed.items():
        used = False
        flags = {a[2:].split("=")[0] for a in argv if a.startswith("--")}
        if old in flags and new in flags:
            raise TaseError(f"--{old} and --{new}: {both_names(old, new)}")
        for i, a in enumerate(argv):
            if a == "--" + old or a.startswith(f"--{old}="):
                argv[i], used = "--" + new + a[2 + len(old):], True
        if used:
            print(deprecation_note(old, new), file=sys.stderr)
    return argv


def _help_entry(actions: list[argparse.Action], width: int) -> str:
    """One option's --help entry: `  --name METAVAR` (and `--no_name` for a boolean that has it), then its help text
    and default wrapped below, indented; "" for an option whose help is suppressed."""
    import textwrap

    main = actions[0]
    if main.help == argparse.SUPPRESS:
        return ""
    names = [o for a in actions for o in a.option_strings if "-" not in o[2:]] or list(main.option_strings)
    text = " ".join(str(main.help or "").replace("%%", "%").split())
    metavar = _metavar(main)
    if len(metavar) > 40:  # many choices: listed in the text, wrapped
        metavar = _metavar(main, choices=False)
        text += " (one of: " + ", ".join(str(getattr(c, "value", c)) for c in main.choices or ()) + ")"
    head = "  " + ", ".join(names[:1]) + metavar + "".join(", " + n for n in names[1:])
    default = main.default
    if default not in (None, "", [], argparse.SUPPRESS) and "default" not in text.lower():
        shown = getattr(default, "value", default)
        shown = str(shown) if len(str(shown)) <= 60 else str(shown)[:57] + "..."
        text += f" (default: {shown})"
    if not text:
        return head
    body = textwrap.wrap(text, width, initial_indent=" " * 8, subsequent_indent=" " * 8)
    if len(head) + 2 <= 30:  # a short name: its text starts on the same line, as argparse's does
        first, *rest = textwrap.wrap(text, width - 32)
        return "\n".join([f"{head:<30}  {first}", *(" " * 32 + x for x in rest)])
    return "\n".join([head, *body])


def _metavar(action: argparse.Action, choices: bool = True) -> str:
    """How an option's value is written in --help: [true|false] for a boolean, {a,b} for choices (VALUE without
    `choices`), V [V ...] for a list, else the type's name."""
    if action.nargs == 0:
        return ""
    if getattr(action.type, "__name__", "") == "string_to_bool":
        return " [true|false]"
    if action.choices and choices:
        one = "{" + ",".join(str(getattr(c, "value", c)) for c in action.choices) + "}"
    else:
        one = {int: "INT", float: "FLOAT"}.get(action.type, "VALUE")  # type: ignore[call-overload]
    return f" {one} [{one} ...]" if action.nargs in ("+", "*") else f" {one}"


def _type_name(action: Any) -> str:
    t = action.type
    if t is None:
        return "a string"
    name = getattr(t, "__name__", str(t))
    return {"string_to_bool": "true or false", "int": "an integer", "float": "a number",
            "str": "a string"}.get(name, name)


def _fits(action: Any, v: Any) -> bool:
    """Would argparse accept this YAML value for the option (YAML already typed it)?"""
    if isinstance(v, (list, dict)):
        return False
    t = action.type
    name = getattr(t, "__name__", "")
    if name == "string_to_bool":
        return isinstance(v, bool) or (isinstance(v, str) and v.lower() in ("yes", "true", "t", "y", "1", "no",
                                                                            "false", "f", "n", "0"))
    if t is int:
        return (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, str) and _parses(int, v))
    if t is float:
        return (isinstance(v, (int, float)) and not isinstance(v, bool)) or (isinstance(v, str) and _parses(float, v))
    if action.choices:
        return any(v == c or str(v) == str(c) or getattr(c, "value", None) == v for c in action.choices)
    if t is not None and isinstance(v, str):
        return _parses(t, v)
    return True


def _parses(t: Any, v: str) -> bool:
    try:
        t(v)
    except (ValueError, TypeError):
        return False
    return True
