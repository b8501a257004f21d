"""DeepSpeed engines for actor, critic and frozen reference; checkpoints and HF export."""
