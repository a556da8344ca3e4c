"""What users install: noderig's wheel holds the product and nothing of the lab, and installs
the `noderig` command; the product never imports the lab (lab/, a distribution of its own that
scripts/setup installs beside it for the tests and the demo)."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from noderig import cli

ROOT = Path(__file__).resolve().parents[1]
PRODUCT_CODE = [ROOT / "noderig", ROOT / "operations", ROOT / "deploy.py"]
LAB_PACKAGE = "noderig_lab"
# What a copy of the checkout leaves out: what is not source, and what earlier runs made.
NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "mutants", "build", "dist", "*.egg-info", "__pycache__",
                                    ".pytest_cache", "results")


def lab_imports(source: str) -> list[str]:
    """The modules of the lab that ``source`` imports, statically or by name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names = [node.value]  # importlib.import_module("..."), `python -m ...`
        else:
            continue
        found += [n for n in names if n.split(".")[0] == LAB_PACKAGE or n.startswith("noderig.lab")]
    return found


def test_the_import_check_finds_every_way_of_naming_the_lab():
    assert lab_imports("import noderig_lab.hub") == ["noderig_lab.hub"]
    assert lab_imports("from noderig_lab.lab import Lab") == ["noderig_lab.lab", "noderig_lab.lab.Lab"]
    assert lab_imports("from noderig import lab") == ["noderig.lab"]
    assert lab_imports("import importlib\nimportlib.import_module('noderig_lab.cli')") == ["noderig_lab.cli"]
    assert lab_imports("from noderig import errors\nimport noderig.unit\nx = 'the lab'") == []


def test_the_product_never_imports_the_lab():
    files = [p for root in PRODUCT_CODE for p in ([root] if root.is_file() else sorted(root.rglob("*.py")))]
    assert len(files) > 20 and ROOT / "noderig" / "cli.py" in files
    found = {str(p.relative_to(ROOT)): lab_imports(p.read_text()) for p in files}
    assert {path: names for path, names in found.items() if names} == {}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """noderig's wheel, built from a copy of this checkout (lab/ included, as in a clone) the way
    `pip wheel .` builds it; without build isolation, with the setuptools scripts/setup installs."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "checkout"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCE)
    assert (source / "lab" / "pyproject.toml").is_file()
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", ".", "--no-deps", "--no-build-isolation",
                          "--no-index", "-q", "-w", str(tmp / "dist")],
                         cwd=source, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr
    (built,) = (tmp / "dist").glob("*.whl")
    return built


def test_the_wheel_holds_the_product_and_nothing_of_the_lab(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    product = [n for n in names if ".dist-info/" not in n]
    assert {n.split("/")[0] for n in product} == {"noderig"}
    assert [n for n in names if "lab" in n.split("/") or LAB_PACKAGE in n] == []
    assert [n for n in names if "sglang" in n or "standin" in n or "nvidia-smi" in n] == []
    assert product_files() <= set(product), sorted(product_files() - set(product))
    assert {"noderig/cli.py", "noderig/node/verify_files.py", "noderig/node/hubpath.py", "noderig/node/launch.py",
            "noderig/diagnose/catalog.toml", "noderig/diagnose/benign.toml", "noderig/diagnose/tokens.toml",
            "noderig/bench_workloads.toml"} <= set(product)


def product_files() -> set[str]:
    """Every file of the package as the repository holds it: code and the data it reads beside it (a data file
    left out of package-data is missing only from an install, where no checkout test would see it)."""
    listed = subprocess.run(["git", "ls-files", "noderig"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout:
        return set(listed.stdout.split())
    return {p.relative_to(ROOT).as_posix() for p in (ROOT / "noderig").rglob("*")  # a copy without .git
            if p.is_file() and "__pycache__" not in p.parts}


def test_the_wheel_declares_the_noderig_command_and_no_lab_command(wheel):
    archive = zipfile.ZipFile(wheel)
    (entry_points,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = archive.read(entry_points).decode()
    assert "[console_scripts]\nnoderig = noderig.cli:main" in text
    assert cli.COMMANDS_GROUP not in text


def installed(wheel: Path, venv: Path) -> Path:
    """A new venv with the wheel installed (no dependencies); its python. PYTHONPATH is dropped: a checkout on it
    makes pip see noderig as installed already and install nothing."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                          "--no-deps", "--no-index", str(wheel)], capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stdout + res.stderr
    return venv / "bin" / "python"


def test_the_wheel_installs_a_noderig_command_that_says_where_the_lab_is(wheel, tmp_path):
    venv = installed(wheel, tmp_path / "venv").parents[1]
    command = venv / "bin" / "noderig"
    helped = subprocess.run([str(command), "--help"], capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "verify" in helped.stdout and "diagnose" in helped.stdout, helped.stderr
    lab = subprocess.run([str(command), "lab", "up", "--targets", "2"], capture_output=True, text=True, timeout=60)
    assert lab.returncode == 2
    assert lab.stderr.strip() == ("noderig lab: the lab is part of the development checkout, not of this install: "
                                  "run scripts/setup in a clone of the noderig repository, then .venv/bin/noderig lab")
    no_lab = subprocess.run([str(venv / "bin" / "python"), "-c", f"import {LAB_PACKAGE}"], capture_output=True)
    assert no_lab.returncode == 1


# A failure no signature names, that the key-token tier (tokens.toml) does: the installed catalog's every layer.
TOKEN_TIER_LOG = ("Traceback (most recent call last):\n  File \"/srv/app/serve.py\", line 3, in <module>\n"
                  "ValueError: the draft model's speculative head does not match the target model\n")


def test_the_installed_wheel_diagnoses_with_every_layer_of_its_catalog(wheel, tmp_path):
    python = installed(wheel, tmp_path / "venv")
    code = ("import sys; from noderig.diagnose import diagnose; r = diagnose(sys.stdin.read()); "
            "print(r.cls, r.confidence < 0.9)")
    # -I: the installed package alone, never this checkout on sys.path
    run = subprocess.run([str(python), "-I", "-c", code], input=TOKEN_TIER_LOG,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["speculative_config", "True"]


def test_the_development_install_dispatches_noderig_lab_to_the_lab():
    import noderig_lab.cli

    args = cli.build_parser().parse_args(["lab", "status", "--json"])
    assert args.func is noderig_lab.cli.cmd_lab_status and args.json is True
    args = cli.build_parser().parse_args(["lab", "ssh", "b300", "ls", "-l"])
    assert (args.func, args.host, args.command) == (noderig_lab.cli.cmd_lab_ssh, "b300", ["ls", "-l"])


def test_without_the_lab_noderig_lab_is_one_sentence_and_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(cli, "entry_points", lambda group: [])
    assert cli.main(["lab", "down"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the lab is part of the development checkout" in err and "scripts/setup" in err
