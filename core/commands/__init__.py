"""Core CLI commands: run, plugins, config, show, doctor (see :mod:`cuda_agent.cli`)."""
