"""Session 41's red team against the runtime side (correctness and timing), CPU backend: the kernels of
``tests/integrity/test_redteam_s41.py``, as replacements of the honest KernelBench kernels of
``examples/solutions/kernelbench/kernels.py`` (so each is written in every convention by ``conventions.py``)."""
