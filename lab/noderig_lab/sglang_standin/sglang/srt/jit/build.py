"""Triton-style JIT build of a small C extension, done in every scheduler rank at model init.

Triton compiles its `cuda_utils` launcher with the system C compiler the first time a
process uses it, and fails with the compiler's own stderr plus a CalledProcessError when
the Python headers are missing. This module does the same build for real.
"""

import importlib.util
import os
import shutil
import subprocess
import sysconfig
import tempfile

SOURCE = os.path.join(os.path.dirname(__file__), "cuda_utils.c")


def _python_include_dir() -> str:
    # Test hook only: point at an empty dir to reproduce a node without python3-dev.
    override = os.environ.get("SGLANG_STANDIN_PYTHON_INCLUDE")
    if override:
        return override
    scheme = sysconfig.get_default_scheme()
    # Debian's system Python defaults to 'posix_local' (/usr/local/...); headers live under posix_prefix.
    if scheme == "posix_local":
        scheme = "posix_prefix"
    return sysconfig.get_paths(scheme=scheme)["include"]


def _build(name: str, src: str, srcdir: str) -> str:
    so = os.path.join(srcdir, f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}")
    cc = os.environ.get("CC") or shutil.which("gcc") or shutil.which("clang")
    if cc is None:
        raise RuntimeError("Failed to find C compiler. Please specify via CC environment variable.")
    cc_cmd = [cc, src, "-O3", "-shared", "-fPIC", "-Wno-psabi", "-o", so, f"-I{srcdir}", f"-I{_python_include_dir()}"]
    # stderr is inherited: the compiler's diagnostics reach the log unmodified.
    subprocess.check_call(cc_cmd, stdout=subprocess.DEVNULL)
    return so


def compile_module_from_src(src: str, name: str):
    with tempfile.TemporaryDirectory() as tmpdir:
        src_path = os.path.join(tmpdir, f"{name}.c")
        with open(src_path, "w") as f:
            f.write(src)
        so = _build(name, src_path, tmpdir)
        spec = importlib.util.spec_from_file_location(name, so)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # the .so stays mapped after the dir is removed
        return module


class CudaUtils:
    def __init__(self):
        with open(SOURCE) as f:
            mod = compile_module_from_src(f.read(), "cuda_utils")
        self.get_device_properties = mod.get_device_properties
