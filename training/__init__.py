"""Training: the checkpoints the harness compares.

``corebench train grpo|pta|magrpo|corecode|sft`` with a TOML config and ``--set`` overrides.
Data comes from benchmark train splits through the contamination check; rewards run the same
sandbox as evaluation; trainers are TRL's (GRPOTrainer, SFTTrainer) and comlrl's (MAGRPOTrainer).
Each role's checkpoint directory gets a ``corebench_manifest.json`` that runs and leaderboards read.
"""
