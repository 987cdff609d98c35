"""The contamination guard built from `--exclude` specs (the guard itself is in the floor, `common.guard`):
here because reading a spec (`official:DIR` or a `.jsonl`) is `synth.readers.load_data`."""
from __future__ import annotations

import sys
from collections.abc import Iterable

from common.guard import Guard, normalize_prompt

from .readers import load_data


def guard_from_specs(specs: Iterable[str], exact_specs: Iterable[str] = ()) -> Guard | None:
    """The guard against the benchmarks named by `specs` (`official:DIR` or a `.jsonl`, as `load_data`
    reads them), or None when there are none. `exact_specs` are guarded by exact prompt only: a held-out
    split against generated training sets, where paraphrased templates hide the shared wording from the
    template test and the 13-gram rule would drop every row written in one of them. Unreadable data raises
    `common.readers.DataError`. Excluded groups too small for the n-gram rule are named in one stderr line
    (`Guard.thin_report`). Used by `python -m synth --exclude/--exclude-exact` and the recipes alike."""
    specs, exact_specs = list(specs), list(exact_specs)
    if not specs and not exact_specs:
        return None
    g = Guard.from_records(r for spec in specs for r in load_data(spec))
    if g.thin_report():  # said once, before generating: the guard is weaker there than the user may think
        print(g.thin_report(), file=sys.stderr)
    if exact_specs:
        g.prompts = g.prompts | {normalize_prompt(r["prompt"]) for spec in exact_specs for r in load_data(spec)}
    return g

