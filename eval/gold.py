"""Gold predictions for `eval gold`: one `id` + `completion` line per record, the completion built by
`synth.gold.gold_completion` (the one gold builder, shared with the SFT warm-up), checked by
`rewards.score`.

Why: `eval gold` and the tests feed these to `eval score`, which must then report 100.0 in every table;
that checks the whole path (data reader, scorer routing, aggregation) on real rows.
"""
from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from synth.gold import GoldError, gold_completion


def gold_predictions(records: Iterable[dict[str, Any]], seed: int = 0) -> Iterator[dict[str, str]]:
    """Prediction lines (`id`, `completion`) for `eval score`, one per record. A repeated id raises GoldError:
    `score` and `run` refuse such data, so a file written from it would be one that nothing can read."""
    seen: set[str] = set()
    for r in records:
        if r["id"] in seen:
            raise GoldError(f"id {r['id']!r} appears twice in the data; ids must be unique (score and run refuse "
                            "repeated ids)")
        seen.add(r["id"])
        yield {"id": r["id"], "completion": gold_completion(r, seed)}
