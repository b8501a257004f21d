"""Stage drivers: single-turn PPO, RFT, value pretraining, agentic PPO (plugins in plugins/stages/)."""
