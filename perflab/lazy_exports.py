"""A package's names, each imported from its module the first time it is asked for.

A package whose ``__init__`` re-exports what its modules define would load them all, and what they
import, as soon as any one of its modules is imported (``python -m perflab study --help`` loading
SciPy through ``perflab.study``). Such a package sets ``__getattr__ = lazy_exports(__name__, {module:
names})`` instead (PEP 562): ``from perflab.study import load_spec`` still works, and imports
``perflab.study.spec`` only then.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence


def lazy_exports(package: str, sources: Mapping[str, Sequence[str]]) -> Callable[[str], object]:
    """The module ``__getattr__`` of ``package``: each name of ``sources`` (module → its names) is read
    from its module, imported on first use; any other name is an ``AttributeError``."""
    module_of = {name: module for module, names in sources.items() for name in names}

    def __getattr__(name: str) -> object:
        if name not in module_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module_of[name]), name)

    return __getattr__
