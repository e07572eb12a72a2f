"""A private single-node Slurm (munged + slurmctld + slurmd) for the Slurm engine tests, started
by tests/support/slurm-up.sh on free ports in a tmp folder and stopped by slurm-down.sh. It
needs root and the Debian packages slurmd, slurmctld, slurm-client and munge (scripts/test
installs them); without them the Slurm tests skip and say why."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.sshd import free_port

HERE = Path(__file__).parent
# Small, so that a sweep of a few cells already needs two job arrays (the index limit is real).
MAX_ARRAY_SIZE = 4


def missing() -> str | None:
    """Why a private Slurm cannot start here, or None."""
    if os.geteuid() != 0:
        return "starting a private Slurm needs root"
    absent = [b for b in ("slurmctld", "slurmd", "sbatch", "munged") if shutil.which(b) is None]
    return f"Slurm is not installed ({', '.join(absent)} missing; scripts/test installs it as root)" if absent else None


class Slurm:
    def __init__(self, folder: Path) -> None:
        self.dir = folder
        self.env = {**os.environ, "SLURM_TEST_DIR": str(folder), "SLURMCTLD_PORT": str(free_port()),
                    "SLURMD_PORT": str(free_port()), "SLURM_MAX_ARRAY_SIZE": str(MAX_ARRAY_SIZE)}
        self.conf = folder / "slurm.conf"

    def start(self) -> None:
        done = subprocess.run(["bash", str(HERE / "slurm-up.sh")], env=self.env, capture_output=True, text=True,
                              timeout=90, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"slurm-up.sh failed: {done.stderr[-2000:]}")

    def stop(self) -> None:
        subprocess.run(["bash", str(HERE / "slurm-down.sh")], env=self.env, capture_output=True, timeout=60,
                       check=False)
