"""Import compiled extensions with an error that says how to rebuild them."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require_extension"]

_HOW = (
    "rankopt's compiled kernels are missing or were built for another Python. "
    "Rebuild them: `pip install .` (or `pip install -e .` / "
    "`python setup.py build_ext --inplace` in a source checkout; needs a C "
    "compiler and Cython >= 3)."
)


def require_extension(name: str) -> ModuleType:
    """Import the compiled module ``name`` or raise an ImportError that explains."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"cannot import {name!r}: {exc}. {_HOW}") from exc
