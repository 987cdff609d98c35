"""Commands made of steps (the proof, the ablation, the demo, checkpoint selection): the step runner (`pipeline`) and
the ablation's grid (`ablate_grid`)."""
