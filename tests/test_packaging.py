"""One import namespace: store/ and cli/ install as colbench.store and colbench.cli, never top-level."""
from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_mapped_packages_import_from_anywhere(tmp_path):
    probe = (
        "import importlib.util as u, colbench.store.models, colbench.cli.app, colbench.migrations;"
        "print(u.find_spec('store'), u.find_spec('cli'))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, check=True)
    assert result.stdout.split() == ["None", "None"]


def test_wheel_holds_only_the_colbench_namespace(tmp_path):
    # Build from a copy, so the build leaves nothing behind in the checkout.
    source = tmp_path / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info", "node_modules", "*.db*")
    source.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(REPO / name, source / name)
    for folder in ("colbench", "store", "cli", "migrations"):
        shutil.copytree(REPO / folder, source / folder, ignore=skip)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path),
         str(source)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("colbench-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"colbench", next(t for t in tops if t.endswith(".dist-info"))}
    expected_files = ("colbench/store/models.py", "colbench/cli/app.py", "colbench/migrations/env.py",
                      "colbench/migrations/versions/0001_initial_schema.py",
                      "colbench/store/queries/__init__.py", "colbench/store/queries/runs.py",
                      "colbench/training/lifecycle.py", "colbench/authoring/validate.py", "colbench/regrade.py")
    for expected in expected_files:
        assert expected in names
    entry_points = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("entry_points.txt"))).decode()
    assert "colbench = colbench.cli.app:main" in entry_points
