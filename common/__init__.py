"""The floor: what every package shares and none owns. Every package may import it; it imports none of ours.

- `common.record`: the record (`make_record`, `Example`) and the task catalogue (`TASKS`, `LANGS`, ...);
- `common.languages`: the language catalogue (one module per language, `LANGUAGES`);
- `common.types`: the catalogue of scoring types (`TypeInfo`: what every floor may know about a type);
- `common.readers`: the record checks, JSON lines and CSV rows (`DataError`, `check_record`, `load_jsonl`);
- `common.guard`: the contamination guard (`Guard`);
- `common.paths`: output locks, atomic writes and the rule for what a command may replace;
- `common.models`: model resolution (a spec to a plain Hugging Face folder), model files' checks;
- `common.prompts`: the system prompt and the chat messages, the same for training and evaluation;
- `common.process`: process-wide settings the entry points make (OpenMP, child processes);
- `common.prefill`: a batch of prompts prefilled with their shared head once and their own tokens in length buckets;

See docs/architecture.md.
"""
