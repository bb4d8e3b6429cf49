"""Compile the scheduling pass and the simulator's engine with Cython: ``python -m scheduling.compile``.

``make install`` runs it. It compiles the modules of :data:`scheduling.compiled.MODULES` whose
source changed since the last build into ``<sys.prefix>/scheduling-compiled``, and writes the
manifest :func:`scheduling.compiled.install` checks before loading any of them. Without Cython or a
C compiler it says so and exits 1: the scheduler then runs as plain Python, which is the same code.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from scheduling.compiled import (
    DEFAULT_DIRECTORY,
    DIRECTIVES,
    MANIFEST,
    MODULES,
    SOURCE_ROOT,
    digest,
    interpreter_tag,
    source_file,
    usable_modules,
)


def build(directory: Path = DEFAULT_DIRECTORY, *, jobs: int = 2, force: bool = False) -> int:
    """Compile the modules whose source changed since the last build (all with ``force``).

    Returns 0 when every module is compiled and current, 1 when it could not build (no Cython or no
    C compiler): then the code runs as plain Python, and this says so.
    """
    try:
        from Cython.Build import cythonize
        from setuptools import Distribution, Extension
    except ImportError as missing:
        _say(f"not compiled ({missing.name} is not installed): the scheduler runs as plain Python")
        return 1
    current = {} if force else usable_modules(directory)
    stale = [module for module in MODULES if module not in current]
    if not stale:
        _say(f"all {len(MODULES)} modules are compiled and current ({directory})")
        return 0
    _say(f"compiling {len(stale)} of {len(MODULES)} modules with Cython ({jobs} jobs, about 4 s each) ...")
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="scheduling-compile-") as scratch:
        work = Path(scratch)
        digests = {module: digest(source_file(module)) for module in stale}
        extensions = [
            Extension(module, [str(source_file(module).relative_to(SOURCE_ROOT))]) for module in stale
        ]
        previous = Path.cwd()
        os.chdir(SOURCE_ROOT)  # cythonize names modules by their path relative to here
        try:
            compiled = cythonize(
                extensions, build_dir=str(work / "c"), compiler_directives=DIRECTIVES, quiet=True
            )
            distribution = Distribution({"ext_modules": compiled, "script_name": "compile"})
            distribution.script_args = [
                "build_ext",
                f"--build-lib={work / 'lib'}",
                f"--build-temp={work / 'obj'}",
                f"--parallel={jobs}",
            ]
            distribution.parse_command_line()
            distribution.run_commands()
        except (Exception, SystemExit) as failed:  # compiler missing or failing: say so, run as Python
            _say(f"not compiled ({failed}): the scheduler runs as plain Python")
            return 1
        finally:
            os.chdir(previous)
        entries = _entries(directory, current)
        directory.mkdir(parents=True, exist_ok=True)
        for module in stale:
            relative = Path(*module.split(".")).with_suffix(interpreter_tag())
            binary = work / "lib" / relative
            name = module + interpreter_tag()
            shutil.copyfile(binary, directory / f".{name}.new")
            os.replace(directory / f".{name}.new", directory / name)
            entries[module] = {"sha256": digests[module], "binary": name}
        _write_manifest(directory, entries)
    _say(f"compiled {len(stale)} modules in {time.monotonic() - began:.0f} s into {directory}")
    return 0


def _entries(directory: Path, current: dict[str, Path]) -> dict[str, dict[str, str]]:
    """The manifest entries of the modules that stay as they are."""
    try:
        modules = json.loads((directory / MANIFEST).read_text())["modules"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return {module: modules[module] for module in current if module in modules}


def _write_manifest(directory: Path, entries: dict[str, dict[str, str]]) -> None:
    import Cython

    manifest = {
        "interpreter": interpreter_tag(),
        "cython": Cython.__version__,
        "directives": DIRECTIVES,
        "modules": dict(sorted(entries.items())),
    }
    scratch = directory / f".{MANIFEST}.new"
    scratch.write_text(json.dumps(manifest, indent=2) + "\n")
    os.replace(scratch, directory / MANIFEST)


def _say(message: str) -> None:
    print(f"[compile] {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--force", action="store_true", help="compile every module, current or not")
    parser.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 4), help="parallel C compilers")
    parser.add_argument("--directory", type=Path, default=DEFAULT_DIRECTORY, help="where the modules go")
    parser.add_argument("--check", action="store_true", help="only report which modules are usable")
    options = parser.parse_args(argv)
    if options.check:
        usable = usable_modules(options.directory)
        _say(f"{len(usable)} of {len(MODULES)} modules compiled and current in {options.directory}")
        return 0 if len(usable) == len(MODULES) else 1
    return build(options.directory, jobs=options.jobs, force=options.force)


if __name__ == "__main__":
    raise SystemExit(main())
