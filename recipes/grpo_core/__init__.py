"""What sync and async GRPO share: the options and their checks (`args`), what --dry-run prints (`plan`), the run
around the trainer (`run`), the launcher's processes (`distributed`), the known model shapes (`model_shapes`) and
the reward functions (`reward_funcs`, `reward_checks`)."""
