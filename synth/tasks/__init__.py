"""Task generators, one module per task: importing this package registers every generator.

The package imports its parts by name, as reasoning-gym's `__init__` does, in alphabetical order (the
registry's order, which `--task all` follows). Adding a task: its module here and its name in this line
(`tests/test_layers.py` checks that every module in this folder is listed). `synth/__init__.py` imports this
package, so the registry (`synth.core.GENERATORS`) is full whenever `synth` is; `synth.core` imports no task.
"""
from . import (  # noqa: F401  (each import registers the module's generator)
    component_count,
    component_split,
    diff_tokens,
    dot_matrix,
    execute,
    freq_count,
    sentence_length,
    shuffle_tokens,
    sort_lengths,
    structure_riddle,
    variant_normalize,
)
