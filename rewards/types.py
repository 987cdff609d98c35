"""The registry of scoring types, re-exported from the floor (`common.types`, where it lives so that the
floor's catalogue and record checks may read it); the per-type modules register into it from here."""
from common.types import (  # noqa: F401
    INVALID,
    REGISTRY,
    Score,
    Scorer,
    ScorerView,
    ScoringType,
    TypeRegistryError,
    get_type,
    label_answers,
    register_type,
    type_names,
    unlabelled_types,
    unregister_type,
)
from common.types import __all__  # noqa: F401
