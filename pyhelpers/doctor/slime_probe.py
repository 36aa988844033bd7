"""Probe run INSIDE the activated slime env (`python3 - DIST...` with this file on stdin).

Stdlib only and no import of pyhelpers: it runs under the env's own interpreter (python 3.12,
M5), which does not have the toolkit installed (nothing is ever installed into slime). It
imports torch (for the cuDNN version torch actually loads) but not sglang, megatron or
transformer_engine: their versions come from package metadata and their libraries are located
with find_spec, which does not import them. It prints one line: MARKER + JSON.
"""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from importlib import metadata

MARKER = "SHOPSIMRL_PROBE "
APEX_MODULES = ("amp_C", "fused_layer_norm_cuda", "fused_weight_gradient_mlp_cuda")
CUDNN_DISTS = ("nvidia-cudnn-cu12", "nvidia-cudnn-cu13")


def dist_version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def package_dir(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    return os.path.dirname(spec.origin) if spec.origin else None


def module_file(name):
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin not in (None, "built-in") else None


def te_libs():
    """libtransformer_engine*.so (all kernels live there in TE 2.x) and the torch binding."""
    pkg = package_dir("transformer_engine")
    found = []
    if pkg:
        # pip wheel: <pkg>/ or <pkg>/wheel_lib/; editable install: the repo's top level.
        for d in (pkg, os.path.join(pkg, "wheel_lib"), os.path.dirname(pkg)):
            found += sorted(glob.glob(os.path.join(d, "libtransformer_engine*.so*")))
    binding = module_file("transformer_engine_torch")
    if binding:
        found.append(binding)
    return list(dict.fromkeys(found))


def nvcc_release():
    candidates = [shutil.which("nvcc")]
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "bin", "nvcc"))
    candidates.append("/usr/local/cuda/bin/nvcc")
    for path in candidates:
        if path and os.path.isfile(path) and os.access(path, os.X_OK):
            try:
                out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
            except (OSError, subprocess.SubprocessError):
                continue
            m = re.search(r"release (\d+\.\d+)", out)
            if m:
                return {"version": m.group(1), "path": path}
    return None


def torch_info():
    try:
        import torch  # optional: the slime env's torch (this probe runs inside that env)
    except Exception as exc:  # any import failure is a finding, not a crash
        return {"error": f"import torch failed: {type(exc).__name__}: {exc}"}
    info = {"version": getattr(torch, "__version__", None),
            "cuda": getattr(getattr(torch, "version", None), "cuda", None)}
    try:
        info["cudnn"] = torch.backends.cudnn.version()
    except Exception as exc:  # e.g. "cuDNN version incompatibility"
        info["cudnn_error"] = f"{type(exc).__name__}: {exc}"
    try:
        with open("/proc/self/maps") as f:
            maps = [ln.split(None, 5)[-1].strip() for ln in f if "libcudnn" in ln]
        info["cudnn_mapped"] = list(dict.fromkeys(maps))
    except OSError:
        info["cudnn_mapped"] = []
    return info


def main(dists):
    cudnn_dir = package_dir("nvidia.cudnn")
    out = {
        "python": ".".join(str(n) for n in sys.version_info[:3]),
        "executable": sys.executable,
        "env": {k: os.environ.get(k) for k in ("CONDA_PREFIX", "LD_LIBRARY_PATH", "CUDNN_PATH")},
        "dists": {name: dist_version(name) for name in list(dists) + list(CUDNN_DISTS)},
        "cudnn_dir": cudnn_dir,
        "te_libs": te_libs(),
        "apex_libs": [p for p in (module_file(m) for m in APEX_MODULES) if p],
        "nvcc": nvcc_release(),
        "torch": torch_info(),
    }
    sys.stdout.write("\n" + MARKER + json.dumps(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
