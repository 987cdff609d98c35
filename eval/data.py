"""Readers for benchmark data, re-exported from the shared data layer `synth.readers`.

`eval.data.load_official` (and the other names here) keep working for users' scripts and the contract;
new code imports `synth.readers`.
"""
from synth.readers import (  # noqa: F401
    CSV_FIELD_LIMIT,
    EVAL_TO_TYPE,
    LANG_OF_STEM,
    REQUIRED_JSONL_KEYS,
    DataError,
    FileInfo,
    check_record,
    classify_file,
    load_data,
    load_jsonl,
    load_official,
    official_files,
)
