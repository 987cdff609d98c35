"""Readers for benchmark data, re-exported: the official layout from `synth.readers`, the record checks and
JSON lines from the floor (`common.readers`).

`eval.data.load_official` (and the other names here) keep working for users' scripts and the contract;
new code imports them from where they live.
"""
from common.readers import (  # noqa: F401
    CSV_FIELD_LIMIT,
    REQUIRED_JSONL_KEYS,
    DataError,
    FileInfo,
    check_record,
    load_jsonl,
)
from common.record import LANG_OF_STEM  # noqa: F401
from synth.readers import (  # noqa: F401
    EVAL_TO_TYPE,
    classify_file,
    load_data,
    load_official,
    official_files,
)
