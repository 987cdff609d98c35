"""`eval.data.load_official`: the contract's name (../shared/CONTRACT.md) for the official-layout reader, whose
home is `synth.readers.load_official` (each task module says which official files it owns). This alias is
the only name here; new code imports from the real homes (`synth.readers`, `common.readers`).
"""
from synth.readers import load_official

__all__ = ["load_official"]
