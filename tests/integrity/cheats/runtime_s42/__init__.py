"""Session 42's runtime red-team kernels (tests/integrity/test_redteam_s42.py)."""
