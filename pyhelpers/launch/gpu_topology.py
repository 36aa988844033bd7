"""NCCL_NVLS_ENABLE for the slime job, decided as slime's own run scripts decide it.

slime 624b824 sets it in the job's runtime env from the GPU topology: 1 when `nvidia-smi topo -m`
shows any NVLink (an `NV<n>` entry), else 0 (scripts/run-qwen3-4B.sh:18-24,138-143; the same in
slime/utils/external_utils/command_utils.py:143,187-189). We follow it rather than NCCL's default
because it is what slime is tested with: NVLink SHARP (NVLS) only exists where NVSwitches support
multicast (H100/H200 SXM systems), costs GPU memory for its buffers, and on a PCIe machine
there is nothing for it to use. A value already in the environment wins: a shared host that
forbids NVLink multicast exports NCCL_NVLS_ENABLE=0 for every program it runs.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Mapping

NVLINK = re.compile(r"(?<![A-Za-z#])NV\d+\b")


def has_nvlink(topo: str) -> bool:
    """Whether a `nvidia-smi topo -m` matrix shows an NVLink between two GPUs (the legend's
    "NV#" is not one)."""
    return bool(NVLINK.search(topo))


def nvls_enable(nvidia_smi: str, environ: Mapping[str, str]) -> str:
    if environ.get("NCCL_NVLS_ENABLE"):
        return environ["NCCL_NVLS_ENABLE"]
    try:
        out = subprocess.run([nvidia_smi, "topo", "-m"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "0"  # no nvidia-smi: no NVLink to use
    return "1" if out.returncode == 0 and has_nvlink(out.stdout) else "0"
