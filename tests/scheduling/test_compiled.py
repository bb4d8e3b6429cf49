"""The Cython-compiled policy and engine: loaded only when current, and deciding exactly as Python does."""

from __future__ import annotations

import importlib
import importlib.machinery
import json
import os
import subprocess
import sys
from io import StringIO

import pytest
from django.core.management import call_command

from scheduling import compiled
from scheduling.compiled import DIRECTIVES, MANIFEST, MODULES, interpreter_tag, usable_modules

# Big enough to preempt, requeue, reserve and fail nodes; small enough for a few seconds per run.
RUN = """
import json, sys
from scheduling import compiled
from scheduling.simulator import run_simulation
from scheduling.simulator.scenario import Ai2Parameters, ai2_scenario
inputs = ai2_scenario(Ai2Parameters(days=2.0, nodes=32, teams=5, researchers=50, warmup_days=0.5,
                                    node_mtbf_days=2.0, seed=7))
runs = [json.loads(run_simulation(inputs, policy=policy).to_json(wall_clock=False))
        for policy in ("fairshare", "priority")]
json.dump({"compiled": len(compiled.active()), "runs": runs}, sys.stdout)
"""


def _simulate(*, pure: bool) -> dict:
    environment = {**os.environ, compiled.PURE_PYTHON_ENV: "1" if pure else "0"}
    finished = subprocess.run(
        [sys.executable, "-c", RUN], env=environment, capture_output=True, text=True, check=True, timeout=300
    )
    return json.loads(finished.stdout)


@pytest.fixture
def built() -> dict:
    """The compiled modules of this checkout; in CI (where a skip fails) they must be there."""
    if compiled.pure_python_requested():
        pytest.skip(f"{compiled.PURE_PYTHON_ENV} is set: this run is plain Python")
    usable = usable_modules(compiled.DEFAULT_DIRECTORY)
    if len(usable) < len(MODULES):
        pytest.skip(
            f"{len(usable)} of {len(MODULES)} modules compiled and current: `make install` compiles them"
        )
    return usable


def test_every_pass_and_engine_module_runs_compiled_when_built(built):
    for module in MODULES:
        importlib.import_module(module)

    assert compiled.active() == MODULES
    planner = sys.modules["scheduling.policy.planner"]
    assert isinstance(planner.__loader__, importlib.machinery.ExtensionFileLoader)
    assert planner.__file__ == str(built["scheduling.policy.planner"])


def test_compiled_and_plain_python_simulations_give_byte_identical_results(built):
    compiled_run, python_run = _simulate(pure=False), _simulate(pure=True)

    assert compiled_run["compiled"] == len(MODULES) and python_run["compiled"] == 0
    assert compiled_run["runs"] == python_run["runs"]
    fairshare = compiled_run["runs"][0]
    assert fairshare["preemptions"] > 0 and fairshare["jobs"] > 500  # the run exercises the hard parts


def test_the_simulate_command_says_the_pass_ran_compiled(built):
    out = StringIO()
    call_command(
        "simulate", "--scenario", "ai2", "--days", "0.1", "--nodes", "4", "--teams", "2",
        "--researchers", "4", "--warmup-days", "0", "--no-progress", stdout=out,
    )  # fmt: skip

    assert f"ran compiled: {len(MODULES)} of {len(MODULES)} modules" in out.getvalue()


@pytest.fixture
def build_folder(tmp_path):
    """A source tree with one module and a build of it, as ``python -m scheduling.compile`` leaves it."""
    source = tmp_path / "src" / "scheduling" / "policy" / "planner.py"
    source.parent.mkdir(parents=True)
    source.write_text("DECIDE = 1\n")
    build = tmp_path / "build"
    build.mkdir()
    binary = "scheduling.policy.planner" + interpreter_tag()
    (build / binary).write_bytes(b"\x7fELF")
    entry = {"sha256": compiled.digest(source), "binary": binary}
    manifest = {"interpreter": interpreter_tag(), "directives": DIRECTIVES, "modules": {}}
    manifest["modules"]["scheduling.policy.planner"] = entry
    (build / MANIFEST).write_text(json.dumps(manifest))
    return tmp_path / "src", build, source


def test_a_module_built_from_the_current_source_is_used(build_folder):
    root, build, _ = build_folder

    assert list(usable_modules(build, root)) == ["scheduling.policy.planner"]


def test_a_source_edited_since_the_build_runs_as_python(build_folder):
    root, build, source = build_folder
    source.write_text("DECIDE = 2\n")

    assert usable_modules(build, root) == {}


@pytest.mark.parametrize(
    "field, value", [("interpreter", ".cpython-310-x86_64-linux-gnu.so"), ("directives", {})]
)
def test_a_build_by_another_interpreter_or_with_other_directives_is_ignored(build_folder, field, value):
    root, build, _ = build_folder
    manifest = json.loads((build / MANIFEST).read_text())
    manifest[field] = value
    (build / MANIFEST).write_text(json.dumps(manifest))

    assert usable_modules(build, root) == {}


def test_a_missing_binary_or_manifest_leaves_everything_to_python(build_folder):
    root, build, _ = build_folder
    (build / ("scheduling.policy.planner" + interpreter_tag())).unlink()
    assert usable_modules(build, root) == {}

    (build / MANIFEST).write_text("{not json")
    assert usable_modules(build, root) == {}


def test_a_manifest_entry_this_code_did_not_write_is_left_to_python(build_folder):
    root, build, _ = build_folder
    manifest = json.loads((build / MANIFEST).read_text())
    manifest["modules"]["scheduling.policy.planner"] = "not an entry"
    (build / MANIFEST).write_text(json.dumps(manifest))

    assert usable_modules(build, root) == {}
