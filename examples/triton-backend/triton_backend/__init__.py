"""triton-backend: a third-party cuda-agent backend whose candidates write Triton kernels.

Installed with ``pip install ./examples/triton-backend``; the entry point ``triton`` (:mod:`triton_backend.plugin`)
registers the backend ``triton`` and its skill ``triton``. The backend is a
:class:`cuda_agent.harness.device_backend.DeviceBackend` over :class:`~triton_backend.adapter.TritonAdapter` (host
side) and :class:`~triton_backend.runner.TritonLoader` (inside the sandbox): everything that decides a verdict
(sandbox, input sets, comparison, timing, grading) is cuda-agent's.
"""

__version__ = "0.1.0"
