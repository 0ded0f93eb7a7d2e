"""The version of memoryos-actors (``memoryos_actors.__version__``), in a module of its own
so that any layer may name it without importing the package's namespace."""

__version__ = "0.1.0"
