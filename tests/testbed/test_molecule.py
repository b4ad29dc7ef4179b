"""The molecule scenarios end to end: create → converge → idempotence → verify → smoke → destroy.

CI runs the `default` scenario (four Debian 12 systemd hosts, monitoring included). `gpu` (GPU
autodetection through Slurm's NVML plugin and the NVML emulator on the bed's hosts, about 7 min) is
opt-in since 2026-11-28, to keep CI inside its 45 minutes: CI still runs Slurm's own NVML plugin in a
real slurmd against the emulator (tests/nvml) and the slurm_build role's package of it
(tests/ansible/test_slurm_build_role.py). `trixie`, `ha` and `configless` take as long as `default`
each. Run any of them with ``CLUSTER_CLI_MOLECULE_SCENARIOS=default,gpu,trixie,ha,configless``
(or directly: ``molecule test -s configless``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
ALL_SCENARIOS = sorted(path.parent.name for path in (REPO / "molecule").glob("*/molecule.yml"))
SELECTED = [name.strip() for name in os.environ.get("CLUSTER_CLI_MOLECULE_SCENARIOS", "default").split(",")
            if name.strip()]

pytestmark = pytest.mark.testbed

# The least a scenario's verify must have run and its smoke passed: (checks, smoke passes). The gpu
# scenario verifies GPU autodetection only and smokes srun and gpu-binding.
MINIMUM_PASSED = {"gpu": (4, 2)}


def test_every_scenario_is_known() -> None:
    assert {"default", "gpu", "trixie", "ha", "configless"} <= set(ALL_SCENARIOS)
    assert set(SELECTED) <= set(ALL_SCENARIOS), f"unknown scenario in CLUSTER_CLI_MOLECULE_SCENARIOS: {SELECTED}"


@pytest.mark.parametrize("scenario", ALL_SCENARIOS)
def test_molecule_scenario(scenario: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    if scenario not in SELECTED:
        pytest.skip(f"scenario {scenario} not selected (CLUSTER_CLI_MOLECULE_SCENARIOS={','.join(SELECTED)})")
    request.getfixturevalue("testbed_requirements")  # skips with the reason without root or tools
    molecule = Path(sys.executable).parent / "molecule"
    if not molecule.exists() and shutil.which("molecule") is None:
        pytest.skip("molecule is not installed (pip install -e '.[test]')")
    reports = tmp_path / "reports"
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
           "CLUSTER_TB_REPORT_DIR": str(reports), "ANSIBLE_FORCE_COLOR": "0", "PY_COLORS": "0"}
    log = tmp_path / "molecule.log"
    with open(log, "w") as out:
        done = subprocess.run([str(molecule) if molecule.exists() else "molecule", "test", "-s", scenario],
                              cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=3600, check=False)
    text = log.read_text()
    print(text[-6000:])
    assert done.returncode == 0, f"molecule test -s {scenario} failed (log {log}):\n{text[-8000:]}"
    verify = ET.parse(reports / "verify.xml").getroot()
    suite = verify if verify.tag == "testsuite" else verify[0]
    counts = {key: int(suite.get(key, "0")) for key in ("tests", "failures", "errors", "skipped")}
    if scenario == "upgrade":  # verify is the upgrade itself (molecule/tests/test_60_upgrade.py); no smoke step
        assert counts["tests"] - counts["skipped"] == 1 and counts["failures"] == counts["errors"] == 0, counts
        upgrade = json.loads((reports / "upgrade.json").read_text())
        assert upgrade["jobs_lost"] == 0 and upgrade["upgrade_seconds"] > 0, upgrade
        return
    checks, passes = MINIMUM_PASSED.get(scenario, (15, 7))
    assert counts["tests"] - counts["skipped"] >= checks and counts["failures"] == counts["errors"] == 0, counts
    smoke = json.loads((reports / "smoke.json").read_text())
    assert smoke["verdict"] == "pass" and smoke["counts"]["pass"] >= passes, smoke["counts"]
