"""How many CPU cores this process may use: the one count behind every thread and worker default.

``os.cpu_count()`` counts the machine; the CPU set (``sched_getaffinity``) counts the cores the
process may run on; a container or batch job may further cap its CPU *time* with a cgroup quota
(``docker --cpus 2``, Kubernetes limits: cgroup v2 ``cpu.max``, v1 ``cpu.cfs_quota_us``). A
default of many threads under a quota of two cores makes llama.cpp's spinning threads and Numba's
``prange`` kernels wait on each other at every step, so the count is the smallest of the three.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["available_cores"]

_CGROUP = Path("/sys/fs/cgroup")


def _quota_cores(root: Path) -> float | None:
    """Cores allowed by a cgroup CPU quota under ``root`` (v2, then v1); None when unlimited or unknown."""
    try:
        quota, _, period = (root / "cpu.max").read_text().strip().partition(" ")  # v2: "max 100000" or "200000 100000"
        if quota != "max" and float(period or 100000) > 0:
            return float(quota) / float(period or 100000)
        return None
    except (OSError, ValueError):
        pass
    for d in (root / "cpu", root / "cpu,cpuacct"):  # v1
        try:
            q = float((d / "cpu.cfs_quota_us").read_text())
            p = float((d / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        return q / p if q > 0 and p > 0 else None
    return None


def available_cores(*, cgroup_root: str | os.PathLike | None = None) -> int:
    """Cores this process may use: the smallest of its CPU set and its cgroup CPU quota (rounded up).

    Parameters
    ----------
    cgroup_root : path, optional
        Where the cgroup files are (default ``/sys/fs/cgroup``; tests pass a folder of their own).

    Returns
    -------
    int
        At least 1.
    """
    n = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    q = _quota_cores(Path(cgroup_root) if cgroup_root is not None else _CGROUP)
    if q is not None:
        n = min(n, math.ceil(q))
    return max(1, int(n))
