"""One registry shape (issue 61): the task catalogue, the scoring types' catalogue, their behaviour and the task
generators are each a common.registry.Registry, with the same methods and the same refusals; the names each layer
exported before keep working over it."""
import pytest

import synth  # noqa: F401  (fills the generator registry)
from common.record import TASKS
from common.registry import Registry, RegistryError
from common.types import TYPE_INFO, TypeInfo, TypeRegistryError, declare_type, type_info, type_names, undeclare_type
from rewards.types import REGISTRY, get_type
from synth.core import GENERATORS, Generator, RegistryError as SynthRegistryError, available, spec


def test_the_four_registries_share_one_shape():
    for reg in (TASKS, TYPE_INFO, REGISTRY, GENERATORS):
        assert isinstance(reg, Registry) and isinstance(reg, dict)
        assert reg.names() == tuple(reg) and reg.get(next(iter(reg))) is reg[next(iter(reg))]
        assert reg.get("no_such_name") is None and reg.get(["not", "a", "str"]) is None
    assert issubclass(TypeRegistryError, RegistryError) and issubclass(SynthRegistryError, RegistryError)
    # the former names are these methods
    assert type_names() == TYPE_INFO.names() and type_info("NUMBER") is TYPE_INFO.get("NUMBER")
    assert get_type("NUMBER") is REGISTRY.get("NUMBER") and get_type(3) is None
    assert available() is GENERATORS and spec("freq_count") is GENERATORS.get("freq_count") and spec(None) is None
    assert TASKS.names()[:2] == ("freq_count", "sentence_length")  # catalogue order kept


def test_add_refuses_a_taken_name_in_one_line_and_remove_undoes_it():
    reg: Registry[int] = Registry("widget", origin=lambda v: f"v{v}")
    assert reg.add("a", 1) == 1 and reg.names() == ("a",)
    with pytest.raises(RegistryError, match=r"^widget 'a' is already registered by v1; refusing v2$"):
        reg.add("a", 2)
    with pytest.raises(RegistryError, match="already registered"):
        reg.add("a", 1)  # the same entry again too, unless the registry allows it (again=True)
    again: Registry[object] = Registry("task", again=True)
    entry = object()
    again.add("t", entry)
    assert again.add("t", entry) is entry and len(again) == 1
    reg.remove("a")
    reg.remove("a")  # nothing there: nothing to do
    assert reg.names() == ()


def test_declare_type_goes_through_the_registry_with_its_message():
    info = TypeInfo("TOY_REGISTRY")
    declare_type(info)
    try:
        assert TYPE_INFO.names()[-1] == "TOY_REGISTRY" and type_info("TOY_REGISTRY") is info
        with pytest.raises(TypeRegistryError, match=r"^scoring type 'TOY_REGISTRY' is already declared$"):
            declare_type(TypeInfo("TOY_REGISTRY"))
    finally:
        undeclare_type("TOY_REGISTRY")
    assert "TOY_REGISTRY" not in TYPE_INFO


def test_a_generator_module_imported_twice_registers_once():
    cls = GENERATORS["freq_count"]
    from synth.core import register

    assert register(cls) is cls and list(GENERATORS).count("freq_count") == 1
    assert issubclass(cls, Generator)
