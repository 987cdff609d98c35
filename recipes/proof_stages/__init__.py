"""The proof's parts (recipes/proof.py, `make proof`): its config, checked once and typed (config.py, values.py,
sections.py), the inputs every stage reads (inputs.py), and the stages (train.py, evaluate.py, selection.py,
report.py).

Named for what it holds, not `recipes/proof/`: recipes/proof.py stays the entry point's path (`python
recipes/proof.py`), and a package of the same name would take `import recipes.proof` from it. Nothing is
re-exported here; import each module by its path."""
