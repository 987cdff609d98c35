"""The one evaluator for base and tuned models; scores with `rewards` so verdict == coarse reward."""
