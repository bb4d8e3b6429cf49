"""The policy package stays readable: small modules and functions, no hidden state, no copies of
rules inlined by hand (issue 16)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "scheduling" / "policy"
MODULES = sorted(PACKAGE.glob("*.py"))
MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 50


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_module_is_longer_than_400_lines(path):
    assert len(path.read_text().splitlines()) <= MAX_MODULE_LINES


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_function_is_longer_than_50_lines(path):
    tree = ast.parse(path.read_text())
    long = [
        (node.name, node.end_lineno - node.lineno + 1)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert long == []


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_thread_locals_no_id_keyed_state_no_inlined_copies(path):
    source = path.read_text()
    tree = ast.parse(source)
    calls = {
        node.func.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    }
    attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
    assert "id" not in calls  # nothing keyed (or told apart) by id()
    assert "local" not in attributes and "threading" not in source
    assert not re.search(r"#.*\binlin(ed|e)\b", source)
