"""The GPU proof rehearsed here (tests/gpu_kit/rehearsal.py): the kit made on this machine runs in
a trixie root with no network, no systemd as init, this machine's Python with CPU torch and the
NVML emulator, and reaches the verdicts a real run reaches, the GPU figures skipped for their
reason; in a bullseye root its first step refuses the older C library in seconds.

About a minute with the roots cached (CLUSTER_CLI_REHEARSAL_CACHE); the first run builds them
(debootstrap of trixie and bullseye, the venv: a few minutes)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import rehearsal

from cluster_cli.gpu_kit import pack

KIT_LIMIT_BYTES = 64 * 2**20  # what a call to the GPU machine carries
RESULT_FILES_LIMIT = 8  # what comes back from it


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root (systemd-nspawn, Slurm's daemons)"
    for tool in ("systemd-nspawn", "debootstrap", "gcc", "patchelf", "readelf", "dpkg-deb"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    try:
        pack.plugin_for(None)
    except pack.GpuKitError as error:
        return str(error)
    return None


pytestmark = pytest.mark.skipif(_missing() is not None, reason=_missing() or "")


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kit") / "gpu-kit"
    manifest = pack.make_kit(out, pack.this_release(), pack.plugin_for(None))
    assert manifest.total_bytes <= KIT_LIMIT_BYTES
    print(f"kit: {manifest.total_bytes} bytes in {manifest.files} files, made in {manifest.make_s} s")
    return out


def _steps(out: Path) -> dict[str, dict[str, object]]:
    return {step["name"]: step for step in json.loads((out / "proof.json").read_text())["steps"]}


def test_the_proof_passes_in_a_root_of_another_release(kit: Path, tmp_path: Path) -> None:
    rc, output, seconds = rehearsal.rehearse_trixie(kit, tmp_path, rehearsal.trixie_root())
    print(f"trixie rehearsal: {seconds:.1f} s")
    steps = _steps(tmp_path)
    assert rc == 0, output[-3000:]
    assert {name: step["verdict"] for name, step in steps.items()} == {
        "machine-check": "pass", "kit": "pass", "machine": "pass", "render": "pass", "daemons": "pass",
        "autodetect": "pass", "device-cgroup": "skip", "gpu-metrics": "pass", "smoke": "pass",
    }  # fmt: skip
    assert "glibc 2.41 >= " in str(steps["machine-check"]["says"])
    assert steps["autodetect"]["details"]["found_by_nvml"] == rehearsal.GPUS  # type: ignore[index]
    figures = {row["check"]: row for row in json.loads((tmp_path / "proof.json").read_text())["figures"]}
    assert figures["gpu matmul"]["verdict"] == "skip" and "fake" in figures["gpu matmul"]["reason"]
    assert figures["allreduce"]["verdict"] == "pass" and figures["ddp"]["verdict"] == "pass"
    produced = sorted(path.name for path in tmp_path.iterdir())
    assert len(produced) <= RESULT_FILES_LIMIT, produced
    assert {"summary.md", "proof.json", "smoke.json", "smoke.xml"} <= set(produced)
    assert "Row for docs/gpu-validation.md" in (tmp_path / "summary.md").read_text()


def test_an_older_c_library_stops_the_first_step_in_seconds(kit: Path, tmp_path: Path) -> None:
    rc, output, seconds = rehearsal.rehearse_bullseye(kit, tmp_path, rehearsal.bullseye_root())
    print(f"bullseye refusal: {seconds:.1f} s")
    assert rc == 1, output[-2000:]
    assert seconds < 10
    assert "glibc 2.31; the kit's programs (Slurm, munge) need glibc >= 2.34" in output
    assert _steps(tmp_path)["machine-check"]["verdict"] == "stop"
