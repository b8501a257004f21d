"""Built-in components of cuda-agent, registered through the same hooks a third party uses.

Every public module in a sub-folder (``tools/compile.py`` -> plugin
``tools.compile``) is loaded as a built-in plugin by
:class:`cuda_agent.plugin_manager.PluginManager`. Private helpers start with
``_``. Plugin modules keep heavy imports (torch, transformers) inside
functions so that listing plugins stays fast.
"""
