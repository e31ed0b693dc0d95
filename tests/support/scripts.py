"""The project's scripts as modules: ``samples/*.py`` and ``benchmarks/*.py`` are not
packages, and tests use their generators."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_script(relative: str, name: str) -> ModuleType:
    """The module in ``ROOT/relative``, registered in ``sys.modules`` as ``name`` before it
    runs (its dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / relative)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
