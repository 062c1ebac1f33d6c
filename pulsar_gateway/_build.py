"""Which build of the gateway runs: pure Python, or with modules compiled by mypyc.

setup.py compiles the per-message modules when asked (``PULSAR_GATEWAY_COMPILE``); each
compiled module is an extension module beside its ``.py``, which Python's path finder
imports in its place (``importlib.machinery.EXTENSION_SUFFIXES`` come first among a
directory's loaders). So the question is answered by what the import system finds (or
found, for a module imported already), not by how the package was built: a source tree on
``PYTHONPATH`` ahead of a compiled install is pure Python.
"""

from __future__ import annotations

import sys
from importlib.machinery import EXTENSION_SUFFIXES, PathFinder
from pathlib import Path

__all__ = ["build_info", "compiled_modules"]

#: The package's directory as imported, not resolved: an editable install in setuptools'
#: strict mode links the sources into a tree that also holds the built extension modules
_PACKAGE = Path(__file__).parent


def compiled_modules() -> list[str]:
    """The gateway's modules that import as extension modules (mypyc's), sorted."""
    found = []
    for path in _PACKAGE.rglob("*"):
        suffix = next((s for s in EXTENSION_SUFFIXES if path.name.endswith(s)), None)
        if suffix is None:
            continue
        relative = path.relative_to(_PACKAGE)
        name = ".".join(("pulsar_gateway", *relative.parent.parts, path.name[: -len(suffix)]))
        module = sys.modules.get(name)
        if module is not None:  # imported: what was loaded
            origin = getattr(module, "__file__", None)
        else:  # what the path finder would load from that directory, importing nothing
            spec = PathFinder.find_spec(name.rpartition(".")[2], [str(path.parent)])
            origin = spec.origin if spec is not None else None
        if origin is not None and origin.endswith(suffix):
            found.append(name)
    return sorted(found)


def build_info() -> str:
    """``"compiled (mypyc, N modules)"`` or ``"pure Python"``, for ``--version`` and the
    start-up log."""
    compiled = compiled_modules()
    if not compiled:
        return "pure Python"
    return f"compiled (mypyc, {len(compiled)} modules)"
