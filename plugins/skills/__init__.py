"""Built-in skill plugins: the skill documents of ``cuda_agent.skills`` registered through ``register_skills``."""
