"""What memoryos-actors needs to run, and the one wording of every hint on installing it.

memoryos-actors has no entry on a package index: it is installed from its source checkout
(``pip install ".[server]"`` there) or from a wheel built in it (``python -m build
--wheel``, then ``pip install "dist/memoryos_actors-<version>-py3-none-any.whl[server]"``).
A hint naming the distribution and an extra (``pip install`` of its name, ``[server]``)
would send pip to an index, where other people's packages have similar names, so every hint on installing an extra comes from
:func:`install_hint` (a test greps the code and the docs for any other).

Two prerequisites are not Python packages a pip install can always bring:

* a POSIX system (Linux, macOS): the data directory's lock is an ``flock`` (the ``fcntl``
  module), which Windows lacks; there it runs under WSL;
* hnswlib's build tools: hnswlib (the nearest-neighbour index) is compiled from source
  where no wheel fits the platform, which needs a C++ compiler and the Python headers.

The first import that needs either raises :class:`MissingPrerequisite` saying so in one
line, and ``memoryos`` prints that line instead of a traceback.
"""

from __future__ import annotations

from .version import __version__

__all__ = [
    "EXTRAS",
    "WINDOWS_NOTE",
    "MissingPrerequisite",
    "hnswlib_note",
    "install_hint",
]

#: The optional extras of pyproject.toml's ``[project.optional-dependencies]`` (a test
#: checks the two agree).
EXTRAS = frozenset(
    {
        "bench",
        "dev",
        "docs",
        "llamaindex",
        "langgraph",
        "llm",
        "mcp",
        "openai-agents",
        "ray",
        "server",
        "st",
        "test",
    }
)

WINDOWS_NOTE = (
    "memoryos-actors runs on Linux and macOS: it needs POSIX file locks (the fcntl module), "
    "which Windows lacks; on Windows, run it under WSL (Windows Subsystem for Linux)"
)


class MissingPrerequisite(ImportError):
    """Something memoryos-actors needs is missing from this system; the message says what
    and how to get it. An :class:`ImportError`, raised by the import that needs it."""


def install_hint(*extras: str) -> str:
    """How to install memoryos-actors with ``extras``: from the source checkout, or from
    the wheel built there (never by a package index name, which would find someone else's
    package)."""
    unknown = sorted(set(extras) - EXTRAS)
    if unknown:
        raise ValueError(f"no such extra: {', '.join(unknown)}")
    spec = f"[{','.join(extras)}]" if extras else ""
    wheel = f"memoryos_actors-{__version__}-py3-none-any.whl"
    return (
        f'pip install ".{spec}" in the memoryos-actors source checkout '
        f'(or, from a wheel built there: pip install "dist/{wheel}{spec}")'
    )


def hnswlib_note(exc: ImportError) -> str:
    """Why hnswlib could not be imported (``exc``) and how to get it built."""
    return (
        f"hnswlib cannot be imported ({exc}): it is compiled from source when memoryos-actors "
        "is installed, which needs a C++ compiler and the Python headers (Debian/Ubuntu: "
        "apt-get install build-essential python3-dev; Fedora: dnf install gcc-c++ "
        "python3-devel; macOS: xcode-select --install); then install again: " + install_hint()
    )
