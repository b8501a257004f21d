"""Built-in command plugins: ``eval``, ``report``, ``ablate``, ``score``, ``data`` and ``train`` enter the
``cuda-agent`` CLI through the ``register_commands`` hook a third-party package uses too."""
