"""synth.core.register refuses what would silently break the task registry (reasoning-gym's factory does
the same): a second generator under a task name already taken, and a Config that is not a dataclass."""
import pytest

from synth.core import GENERATORS, Generator, RegistryError, available, register


def test_register_refuses_a_duplicate_task_name():
    before = dict(available())

    class Again(Generator):
        task = "freq_count"

        def make(self, rng, lang, subtask):
            return None

    with pytest.raises(RegistryError, match="task 'freq_count' is already registered by synth.tasks.freq_count"):
        register(Again)
    assert GENERATORS == before  # nothing replaced
    assert register(before["freq_count"]) is before["freq_count"]  # the same class again is harmless


def test_register_refuses_a_config_that_is_not_a_dataclass():
    class Plain(Generator):
        task = "toy_plain_config"

        class Config:
            paraphrase = False

    with pytest.raises(RegistryError, match="Config must be a dataclass"):
        register(Plain)
    assert "toy_plain_config" not in GENERATORS


def test_generated_prompts_are_distinct_in_every_cell_and_stable():
    """Every task x lang x subtask cell (execute included), 40 rows of one seed stream: no prompt twice, the
    same rows on a second call (determinism), and the ids unique."""
    import synth
    from common.record import TASKS
    from synth.core import combos

    for task in TASKS:
        if task not in available():
            continue
        for t, lang, sub in combos(task, "all"):
            recs = list(synth.generate(t, lang, 40, 3, sub, max_len=8))
            prompts = [r["prompt"] for r in recs]
            assert len(recs) == 40 and len(set(prompts)) == 40, (t, lang, sub)
            assert len({r["id"] for r in recs}) == 40
            assert [r["id"] for r in synth.generate(t, lang, 40, 3, sub, max_len=8)] == [r["id"] for r in recs]


def test_a_used_up_cell_stops_with_one_line_instead_of_looping(capsys, monkeypatch):
    """char_classification's digits are 10 characters: asking the digit-only prompt space for more rows than
    it has ends the stream after MAX_REPEATS repeats in a row, with one line saying how many distinct prompts
    it gave and the repeats counted in `stats`."""
    import synth
    from synth import core
    from synth.tasks import dot_matrix

    monkeypatch.setattr(core, "MAX_REPEATS", 200)
    monkeypatch.setattr(dot_matrix, "categories", lambda: ("digit",))
    stats: dict[str, int] = {}
    recs = list(synth.generate("dot_matrix", "mul", 50, 1, "char_classification", stats=stats))
    assert sorted(r["meta"]["char"] for r in recs) == list("0123456789")
    assert stats["exhausted"] == 1 and stats["repeats"] >= 200
    assert capsys.readouterr().err.strip().splitlines() == [
        "synth: dot_matrix/mul/char_classification (seed 1): 10 distinct prompts, then 200 repeats in a row: no "
        "new prompts left, this cell stops here"]
