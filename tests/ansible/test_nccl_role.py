"""roles/nccl on this machine: /etc/nccl.conf from the rendered source, memlock, IB checks.

Writes /etc/nccl.conf and a limits.d file (needs root; both are put back as they were). The
InfiniBand port parsing is checked against a fake ibv_devinfo; the real ibv_devinfo runs where
the RDMA packages can be installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from role_runner import REPO, ansible_playbook, is_root, run_role, write_executable

from cluster_cli.loader import load_cluster
from cluster_cli.render.nccl_conf import render_nccl_conf

pytestmark = pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed")

NCCL_CONF = Path("/etc/nccl.conf")
LIMITS = Path("/etc/security/limits.d/90-cluster-cli-memlock.conf")

DEVINFO = """#!/bin/sh
cat <<'OUT'
hca_id:	mlx5_0
	transport:			InfiniBand (0)
	fw_ver:				28.39.1002
	phys_port_cnt:			1
		port:	1
			state:			PORT_ACTIVE (4)
			max_mtu:		4096 (5)
			link_layer:		InfiniBand

hca_id:	mlx5_1
	transport:			InfiniBand (0)
	phys_port_cnt:			1
		port:	1
			state:			PORT_DOWN (1)
			link_layer:		InfiniBand
OUT
"""


def rendered_nccl_conf(directory: Path, ib_hca: str | None = None) -> Path:
    """nccl.conf as cluster-cli renders it from the example GPU inventory's nccl.env."""
    cluster = load_cluster(REPO / "inventories" / "examples" / "gpu-cluster.yaml")
    if ib_hca is not None:
        cluster.inventory.nccl.env["NCCL_IB_HCA"] = ib_hca
    path = directory / "nccl.conf"
    path.write_text(render_nccl_conf(cluster))
    return path


@pytest.fixture
def system_files() -> Iterator[None]:
    """Root only; /etc/nccl.conf and the limits file are restored (or removed) afterwards."""
    if not is_root():
        pytest.skip("the nccl role writes /etc/nccl.conf and /etc/security/limits.d (needs root)")
    saved = {path: path.read_bytes() if path.exists() else None for path in (NCCL_CONF, LIMITS)}
    yield
    for path, content in saved.items():
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(content)


def test_nccl_conf_is_the_rendered_file_and_ib_checks_skip_with_reason(
    tmp_path: Path, system_files: None
) -> None:
    source = rendered_nccl_conf(tmp_path)
    run = run_role(tmp_path / "run", "nccl", extra_vars={"nccl_conf_src": str(source)})
    assert run.returncode == 0, run.explain()
    assert NCCL_CONF.read_bytes() == source.read_bytes()
    assert NCCL_CONF.stat().st_mode & 0o777 == 0o644
    assert "NCCL_IB_HCA=mlx5_0,mlx5_1" in NCCL_CONF.read_text()
    assert "InfiniBand checks skipped: nccl_infiniband is false" in run.text
    limits = LIMITS.read_text()
    assert "root     hard    memlock    unlimited" in limits
    assert "*        soft    memlock    unlimited" in limits
    again = run_role(tmp_path / "again", "nccl", extra_vars={"nccl_conf_src": str(source)})
    assert again.returncode == 0, again.explain()
    assert again.recap("gpuhost")["changed"] == 0


def test_real_ib_check_skips_where_no_adapter_exists(tmp_path: Path, system_files: None) -> None:
    if shutil.which("apt-get") is None:
        pytest.skip("installing the RDMA packages needs apt (Debian)")
    adapters = Path("/sys/class/infiniband")
    if adapters.is_dir() and any(adapters.iterdir()):
        pytest.skip("this machine has RDMA adapters: the no-adapter skip cannot be shown here")
    source = rendered_nccl_conf(tmp_path)
    run = run_role(
        tmp_path / "run", "nccl", extra_vars={"nccl_conf_src": str(source), "nccl_infiniband": True}
    )
    assert run.returncode == 0, run.explain()
    assert shutil.which("ibv_devinfo"), "nccl_infiniband should have installed ibverbs-utils"
    assert "InfiniBand port check skipped: ibv_devinfo finds no RDMA adapter here" in run.text
    required = run_role(
        tmp_path / "required",
        "nccl",
        extra_vars={"nccl_conf_src": str(source), "nccl_infiniband": True, "nccl_ib_required": True},
    )
    assert required.returncode != 0, required.explain()
    assert "gpuhost: nccl_ib_required is set, but ibv_devinfo finds no RDMA adapter" in required.text


@pytest.mark.parametrize(
    ("ib_hca", "ok", "message"),
    [
        ("mlx5_0:1", True, "gpuhost: ACTIVE RDMA ports: mlx5_0:1."),
        ("mlx5", True, "gpuhost: ACTIVE RDMA ports: mlx5_0:1."),
        ("=mlx5_1", False, "NCCL_IB_HCA names adapters without an ACTIVE port: mlx5_1"),
        ("mlx5_0:2", False, "NCCL_IB_HCA names adapters without an ACTIVE port: mlx5_0:2"),
        ("^mlx5_1", True, "gpuhost: ACTIVE RDMA ports: mlx5_0:1."),
    ],
)
def test_ib_ports_are_checked_against_nccl_ib_hca(
    tmp_path: Path, system_files: None, ib_hca: str, ok: bool, message: str
) -> None:
    bin_dir = tmp_path / "bin"
    write_executable(bin_dir / "ibv_devinfo", DEVINFO)
    source = rendered_nccl_conf(tmp_path, ib_hca=ib_hca)
    run = run_role(
        tmp_path / "run",
        "nccl",
        host_vars={"slurmd_nodes": [{"name": "gpuroles-none", "port": 28099}]},
        extra_vars={"nccl_conf_src": str(source), "nccl_infiniband": True, "nccl_ib_packages": []},
        path_prefix=bin_dir,
    )
    assert (run.returncode == 0) is ok, run.explain()
    assert message in run.text


@pytest.mark.parametrize(("memlock", "ok"), [("65536", False), ("unlimited", True)])
def test_slurmd_memlock_is_checked_where_rdma_is_used(
    tmp_path: Path, system_files: None, memlock: str, ok: bool
) -> None:
    """A stand-in process named slurmd (`slurmd -N gpuroles0`) with a given locked-memory limit."""
    if shutil.which("prlimit") is None:
        pytest.skip("prlimit (util-linux) is needed to start the stand-in slurmd")
    probe = subprocess.run(
        ["prlimit", f"--memlock={memlock}:{memlock}", "true"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip(
            f"this machine cannot set a locked-memory limit of {memlock} (no CAP_SYS_RESOURCE): {probe.stderr.strip()}"
        )
    bin_dir = tmp_path / "bin"
    write_executable(bin_dir / "ibv_devinfo", DEVINFO)
    stand_in = tmp_path / "fake" / "slurmd"
    stand_in.parent.mkdir()
    shutil.copy(shutil.which("sleep") or "/bin/sleep", stand_in)
    process = subprocess.Popen(
        [
            "prlimit",
            f"--memlock={memlock}:{memlock}",
            "bash",
            "-c",
            f'exec -a "slurmd -N gpuroles0" {stand_in} 300',
        ]
    )
    try:
        time.sleep(0.5)
        source = rendered_nccl_conf(tmp_path, ib_hca="mlx5_0")
        run = run_role(
            tmp_path / "run",
            "nccl",
            host_vars={"slurmd_nodes": [{"name": "gpuroles0", "port": 28098}]},
            extra_vars={"nccl_conf_src": str(source), "nccl_infiniband": True, "nccl_ib_packages": []},
            path_prefix=bin_dir,
        )
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert (run.returncode == 0) is ok, run.explain()
    if ok:
        assert f"slurmd locked-memory limits (pid: bytes): {process.pid}: unlimited" in run.text
    else:
        assert f"gpuhost: slurmd runs with a locked-memory limit ({process.pid}: 65536 bytes)" in run.text


def test_missing_source_fails_in_preflight(tmp_path: Path) -> None:
    run = run_role(tmp_path, "nccl", extra_vars={"nccl_conf_src": str(tmp_path / "absent.conf")})
    assert run.returncode != 0, run.explain()
    assert "nccl_conf_src must name the rendered nccl.conf on the control node" in run.text
    assert os.path.exists(tmp_path / "absent.conf") is False


# Issue 17: every task a host runs or skips costs the control node about 17 ms per host. A GPU
# host took 14 results of this role before the cuts (docs/benchmarks.md, "GPU roles: results per
# GPU host"), with or without InfiniBand; 7 now, the argument check included.
RESULTS_PER_GPU_HOST = 7


@pytest.mark.parametrize("infiniband", [False, True])
def test_results_per_gpu_host_stay_few(tmp_path: Path, system_files: None, infiniband: bool) -> None:
    bin_dir = tmp_path / "bin"
    write_executable(bin_dir / "ibv_devinfo", DEVINFO)
    source = rendered_nccl_conf(tmp_path, ib_hca="mlx5_0")
    extra = {"nccl_conf_src": str(source), "nccl_infiniband": infiniband, "nccl_ib_packages": []}
    host_vars = {"slurmd_nodes": [{"name": "gpuroles-none", "port": 28099}]}
    first = run_role(tmp_path / "first", "nccl", host_vars=host_vars, extra_vars=extra, path_prefix=bin_dir)
    assert first.returncode == 0, first.explain()
    run = run_role(tmp_path / "again", "nccl", host_vars=host_vars, extra_vars=extra, path_prefix=bin_dir)
    assert run.returncode == 0, run.explain()
    expected = "gpuhost: ACTIVE RDMA ports: mlx5_0:1." if infiniband else "InfiniBand checks skipped"
    assert expected in run.text
    recap = run.recap("gpuhost")
    results = recap["ok"] + recap["skipped"] + recap["failed"]
    assert results <= RESULTS_PER_GPU_HOST, f"{results} results per GPU host (at most {RESULTS_PER_GPU_HOST}): {recap}"
    assert recap["changed"] == 0
