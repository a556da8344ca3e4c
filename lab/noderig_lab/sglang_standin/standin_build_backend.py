"""PEP 517 backend: setuptools when it can build wheels, otherwise a stdlib wheel writer.

setuptools < 70.1 needs the separate `wheel` package for bdist_wheel. A fresh Debian
bookworm venv has setuptools 66 and no `wheel`, so `pip install --no-build-isolation`
of a plain setuptools project fails at metadata generation. This package is pure
Python, so the fallback zips the files that [tool.setuptools] in pyproject.toml
selects; both paths install the same files.
"""

import base64
import fnmatch
import hashlib
import importlib.util
import os
import shutil
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def _setuptools_builds_wheels() -> bool:
    try:
        return importlib.util.find_spec("setuptools") is not None and (
            importlib.util.find_spec("wheel") is not None
            or importlib.util.find_spec("setuptools.command.bdist_wheel") is not None)
    except ImportError:
        return False


def _with_setuptools(hook: str, *args):
    """Run a setuptools hook, then remove the build/ and *.egg-info it leaves in the tree."""
    from setuptools import build_meta

    before = {p.name for p in ROOT.iterdir()}
    try:
        return getattr(build_meta, hook)(*args)
    finally:
        for path in ROOT.iterdir():
            if path.name not in before and (path.name == "build" or path.name.endswith(".egg-info")):
                shutil.rmtree(path, ignore_errors=True)


def _project() -> dict:
    import tomllib  # 3.11+; older interpreters have `wheel` or fail clearly here

    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _package_files(pyproject: dict) -> list[Path]:
    find = pyproject["tool"]["setuptools"]["packages"]["find"]
    package_data = pyproject["tool"]["setuptools"].get("package-data", {})
    files = []
    for init in sorted(ROOT.rglob("__init__.py")):
        package_dir = init.parent
        dotted = ".".join(package_dir.relative_to(ROOT).parts)
        if not any(fnmatch.fnmatch(dotted, pattern) for pattern in find["include"]):
            continue
        files += sorted(package_dir.glob("*.py"))
        for pattern in package_data.get(dotted, []):
            files += sorted(package_dir.glob(pattern))
    return files


def _dist_info(pyproject: dict) -> tuple[str, dict[str, bytes]]:
    project = pyproject["project"]
    name, version = project["name"], project["version"]
    metadata = (f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
                f"Summary: {project.get('description', '')}\n"
                f"Requires-Python: {project.get('requires-python', '>=3')}\n")
    wheel = ("Wheel-Version: 1.0\nGenerator: standin_build_backend\n"
             "Root-Is-Purelib: true\nTag: py3-none-any\n")
    return f"{name}-{version}.dist-info", {"METADATA": metadata.encode(), "WHEEL": wheel.encode()}


def _record_line(arcname: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def get_requires_for_build_wheel(config_settings=None):
    return _with_setuptools("get_requires_for_build_wheel", config_settings) if _setuptools_builds_wheels() else []


def get_requires_for_build_sdist(config_settings=None):
    return _with_setuptools("get_requires_for_build_sdist", config_settings)


def build_sdist(sdist_directory, config_settings=None):
    return _with_setuptools("build_sdist", sdist_directory, config_settings)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    if _setuptools_builds_wheels():
        return _with_setuptools("prepare_metadata_for_build_wheel", metadata_directory, config_settings)
    dist_info, files = _dist_info(_project())
    target = Path(metadata_directory) / dist_info
    target.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (target / name).write_bytes(data)
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if _setuptools_builds_wheels():
        return _with_setuptools("build_wheel", wheel_directory, config_settings, metadata_directory)
    pyproject = _project()
    dist_info, meta_files = _dist_info(pyproject)
    wheel_name = dist_info.replace(".dist-info", "-py3-none-any.whl")
    os.makedirs(wheel_directory, exist_ok=True)
    records = []
    with zipfile.ZipFile(Path(wheel_directory) / wheel_name, "w", zipfile.ZIP_DEFLATED) as whl:
        for path in _package_files(pyproject):
            arcname, data = path.relative_to(ROOT).as_posix(), path.read_bytes()
            whl.writestr(arcname, data)
            records.append(_record_line(arcname, data))
        for name, data in meta_files.items():
            whl.writestr(f"{dist_info}/{name}", data)
            records.append(_record_line(f"{dist_info}/{name}", data))
        records.append(f"{dist_info}/RECORD,,")
        whl.writestr(f"{dist_info}/RECORD", "\n".join(records) + "\n")
    return wheel_name
