"""Training of the checkpoints the harness compares (GRPO, MAGRPO, CoRe-Code). Not built yet: see the training issue."""
