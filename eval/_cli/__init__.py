"""`python -m eval`'s subcommands, one module each (the lm-evaluation-harness `_cli/` layout): a module
registers its parser (`register(sub, formatter)`, which sets `execute`) and runs it (`execute(args)`).
`eval/__main__.py` builds the top-level parser in `SUBCOMMANDS` order and turns errors into one line."""
from . import compare, export_lm_eval, gold, plot_training, robustness, run, score, tokstats

SUBCOMMANDS = (run, score, compare, export_lm_eval, gold, tokstats, robustness, plot_training)
