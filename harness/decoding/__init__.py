"""Batched decoding on a CPU for transformers causal LMs: the engine backends and training share."""
