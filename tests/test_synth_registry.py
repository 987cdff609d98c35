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
