"""The chapters' setup cell, run as Colab and as a local Jupyter would run it.

The cell (tools/setup_cell.py) is executed in a fresh interpreter. Installed versions are
faked with ``*.dist-info`` folders placed first on the path (what importlib.metadata reads),
Colab with a stand-in ``google.colab`` module imported beforehand (as Colab's kernel does),
and pip with a stand-in ``subprocess.check_call`` that records the command instead of
installing anything.
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("setup_cell", ROOT / "tools" / "setup_cell.py")
setup_cell = importlib.util.module_from_spec(spec)
spec.loader.exec_module(setup_cell)
FLOORS = setup_cell.floors()
RELEASE = f"git+{setup_cell.repository_url()}@v{setup_cell.version()}"

HARNESS = r'''
import json, subprocess, sys, types
calls = []
subprocess.check_call = lambda command, **kwargs: calls.append(command) or 0
if COLAB:
    google, colab = types.ModuleType("google"), types.ModuleType("google.colab")
    output = types.ModuleType("google.colab.output")
    output.enable_custom_widget_manager = lambda: calls.append("custom widget manager")
    google.colab, colab.output = colab, output
    sys.modules.update({"google": google, "google.colab": colab, "google.colab.output": output})
try:
    exec(CELL, {"__name__": "__main__"})
    result = "ok"
except Exception as error:
    result = f"{type(error).__name__}: {error}"
print(json.dumps({"calls": calls, "result": result}))
'''


def run_cell(tmp_path, colab=False, versions=None):
    """Run the setup cell; ``versions`` fakes installed distributions (name -> version)."""
    for name, version in (versions or {}).items():
        info = tmp_path / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    code = f"COLAB = {colab}\nCELL = {setup_cell.setup_cell_source()!r}\n{HARNESS}"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "JAX_PLATFORMS": "cpu"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_cell_lines_fit_and_name_the_release():
    source = setup_cell.setup_cell_source()
    assert max(len(line) for line in source.splitlines()) <= 100
    assert RELEASE in source and "@v" in RELEASE
    for name in ("jax", "flax", "optax", "ipywidgets"):
        assert f'"{name}": "{FLOORS[name]}"' in source


def test_locally_with_current_versions_it_installs_nothing(tmp_path):
    assert run_cell(tmp_path) == {"calls": [], "result": "ok"}


def test_too_old_jax_stops_with_the_fix_everywhere(tmp_path):
    for colab in (False, True):
        folder = tmp_path / str(colab)
        folder.mkdir()
        report = run_cell(folder, colab=colab, versions={"jax": "0.1.0"})
        assert report["calls"] == []  # never replaces (Colab's CUDA) jax itself
        assert report["result"].startswith("RuntimeError: jax 0.1.0 is older than")
        assert f"jax[cuda12]>={FLOORS['jax']}" in report["result"]


def test_too_old_flax_locally_stops_naming_package_version_and_fix(tmp_path):
    report = run_cell(tmp_path, versions={"flax": "0.1.0"})
    assert report["calls"] == []
    assert f"flax 0.1.0 (pip install -U 'flax>={FLOORS['flax']}')" in report["result"]


def test_in_colab_too_old_packages_are_upgraded_by_installing_the_release(tmp_path):
    report = run_cell(tmp_path, colab=True, versions={"flax": "0.1.0", "ipywidgets": "7.6.5"})
    install = [sys.executable, "-m", "pip", "install", "-q", f"annotated-ssm[book] @ {RELEASE}"]
    assert report == {"calls": [install, "custom widget manager"], "result": "ok"}


def test_in_colab_another_annotated_ssm_version_is_replaced_by_the_release(tmp_path):
    report = run_cell(tmp_path, colab=True, versions={"annotated-ssm": "0.0.1"})
    assert report["calls"][0][-1] == f"annotated-ssm[book] @ {RELEASE}"


@pytest.mark.skipif(importlib.util.find_spec("annotated_ssm") is None, reason="not installed")
def test_in_colab_with_everything_in_place_only_the_widget_manager_is_enabled(tmp_path):
    installed = importlib.metadata.version("annotated-ssm")
    if installed != setup_cell.version():
        pytest.skip(f"annotated-ssm {installed} installed, not the release {setup_cell.version()}")
    assert run_cell(tmp_path, colab=True) == {"calls": ["custom widget manager"], "result": "ok"}
