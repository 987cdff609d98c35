"""What every recipe shares: the command line and YAML reader (`parser`), the options (`config`), the output folder
(`run_dir`), the training rows (`data`, `streams`), the model (`model`, `adapters`, `lora_check`) and the
checkpoint choice (`best_checkpoint`)."""
