"""The scheduling pass and the simulator's engine, optionally compiled with Cython: same source, C speed-up.

The policy package and the simulator's hot modules are plain Python, and stay the code of record.
``python -m scheduling.compile`` (``make install`` runs it) compiles those same files, unchanged,
into C extension modules kept beside the interpreter (``<sys.prefix>/scheduling-compiled``, so
never in the source tree). A compiled pass makes exactly the same decisions (the tests compare a
simulation's JSON byte for byte) about 1.5x faster.

Importing :mod:`scheduling` calls :func:`install`, which loads a compiled module only when it was
built from the very source file now on disk (its SHA-256 is in the build's manifest) by this
interpreter; a file edited since the build is imported as plain Python until the next build, so a
stale build never runs. ``SCHEDULING_PURE_PYTHON=1`` turns the compiled modules off; without
Cython or a C compiler everything simply runs as Python.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from pathlib import Path
from types import ModuleType

# The modules a scheduling pass and a simulation spend their time in (not the package __init__s).
MODULES: tuple[str, ...] = (
    "scheduling.policy.explaining",
    "scheduling.policy.filing",
    "scheduling.policy.memo",
    "scheduling.policy.options",
    "scheduling.policy.placement",
    "scheduling.policy.planner",
    "scheduling.policy.preempting",
    "scheduling.policy.preemption",
    "scheduling.policy.queues",
    "scheduling.policy.ranking",
    "scheduling.policy.reasons",
    "scheduling.policy.replay",
    "scheduling.policy.reservation",
    "scheduling.policy.types",
    "scheduling.policy.usage",
    "scheduling.simulator.engine",
    "scheduling.simulator.metrics",
    "scheduling.simulator.pending",
    "scheduling.simulator.usage",
)
# Type hints stay hints (annotation_typing off: a dict subclass is still a dict); nothing else
# departs from Python semantics (no C integer or division types are inferred or declared).
DIRECTIVES = {"language_level": 3, "annotation_typing": False}
PURE_PYTHON_ENV = "SCHEDULING_PURE_PYTHON"
MANIFEST = "manifest.json"
SOURCE_ROOT = Path(__file__).resolve().parent.parent  # the folder that holds the scheduling package
DIRECTORY_ENV = "SCHEDULING_COMPILED_DIR"
DEFAULT_DIRECTORY = Path(os.environ.get(DIRECTORY_ENV) or Path(sys.prefix) / "scheduling-compiled")


def source_file(module: str, root: Path = SOURCE_ROOT) -> Path:
    return root.joinpath(*module.split(".")).with_suffix(".py")


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def interpreter_tag() -> str:
    """What a compiled module is tied to: this interpreter's ABI (the extension suffix)."""
    return importlib.machinery.EXTENSION_SUFFIXES[0]


def usable_modules(directory: Path, root: Path = SOURCE_ROOT) -> dict[str, Path]:
    """The compiled modules in ``directory`` that may run: built by this interpreter from the
    source file now under ``root`` (same SHA-256), binary present. Anything else is left out."""
    try:
        manifest = json.loads((directory / MANIFEST).read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(manifest, dict):
        return {}
    if manifest.get("interpreter") != interpreter_tag() or manifest.get("directives") != DIRECTIVES:
        return {}
    usable: dict[str, Path] = {}
    for module, entry in sorted(dict(manifest.get("modules") or {}).items()):
        if not isinstance(entry, dict) or module not in MODULES:
            continue  # not a manifest this code wrote: leave it to Python
        binary = directory / str(entry.get("binary", ""))
        source = source_file(module, root)
        try:
            current = digest(source)
        except OSError:
            continue
        if entry.get("sha256") == current and binary.is_file():
            usable[module] = binary
    return usable


class _CompiledFinder(importlib.abc.MetaPathFinder):
    """Finds the usable compiled modules; every other import goes on to the normal finders."""

    def __init__(self, modules: dict[str, Path]) -> None:
        self.modules = modules

    def find_spec(self, fullname: str, path: object = None, target: ModuleType | None = None):
        binary = self.modules.get(fullname)
        if binary is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(binary))
        return importlib.util.spec_from_file_location(fullname, str(binary), loader=loader)


def pure_python_requested() -> bool:
    return os.environ.get(PURE_PYTHON_ENV, "").strip() not in ("", "0")


def install(directory: Path = DEFAULT_DIRECTORY) -> dict[str, Path]:
    """Put the usable compiled modules ahead of their source files (once); returns them."""
    for finder in sys.meta_path:
        if isinstance(finder, _CompiledFinder):
            return finder.modules
    if pure_python_requested():
        return {}
    modules = usable_modules(directory)
    if modules:
        sys.meta_path.insert(0, _CompiledFinder(modules))
    return modules


def active() -> tuple[str, ...]:
    """The modules of :data:`MODULES` imported so far that run compiled (for reports and tests)."""
    return tuple(
        name
        for name in MODULES
        if name in sys.modules
        and isinstance(
            getattr(sys.modules[name], "__loader__", None), importlib.machinery.ExtensionFileLoader
        )
    )
