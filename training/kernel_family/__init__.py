"""A task family a policy trained from scratch can master: fused elementwise chains.

- :mod:`.ops`: the elementwise operators (torch call, C++/CUDA expression, value domain and range);
- :mod:`.tasks`: training and held-out tasks composed by the data pipeline's rule composer
  (``cuda_agent.training.synthesis``), decontaminated, with the memorisation check;
- :mod:`.writer`: the programmatic kernel writer (CUDA and C++/OpenMP; fused or not, vectorised or
  scalar, launch shapes, planted bugs and their repairs);
- :mod:`.trajectories`: expert episodes in the agent loop's exact tool-call format and token layout;
- :mod:`.corpus`: the tokenizer and the random-init decoder trained/built on that corpus (HF format);
- :mod:`.features`: what a written kernel does (fused, vectorised, launch shape), for the learned-habit shares.
"""
