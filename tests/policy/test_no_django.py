"""The policy is pure Python: no Django import anywhere inside scheduling/policy."""

import pathlib
import re
import subprocess
import sys

POLICY = pathlib.Path(__file__).resolve().parents[2] / "scheduling" / "policy"


def test_no_policy_module_imports_django():
    offenders = [
        path.name
        for path in POLICY.glob("*.py")
        if re.search(r"^\s*(from|import)\s+django", path.read_text(), re.MULTILINE)
    ]
    assert offenders == []


def test_the_policy_package_imports_and_plans_without_django_loaded():
    program = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'django' or name.startswith('django.'):\n"
        "            raise ImportError('django is not allowed in the policy')\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "from scheduling.policy import plan, PolicyConfig, Snapshot\n"
        "result = plan(Snapshot('c', (), ()), 0.0, PolicyConfig())\n"
        "assert 'django' not in sys.modules\n"
        "print('ok', len(result.starts))\n"
    )
    root = POLICY.parents[1]
    done = subprocess.run(
        [sys.executable, "-c", program], cwd=root, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok 0"
