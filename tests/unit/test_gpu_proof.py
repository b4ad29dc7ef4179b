"""The GPU proof's runner (cluster_cli.gpu_proof) and the kit's first step (gpu_proof/run.sh),
without daemons: what it reads from Slurm and the driver, the inventory it renders, the results
it writes, and the refusal of a machine that cannot run the kit."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
from pathlib import Path

import pytest

from cluster_cli.gpu_proof import autodetect, daemons, gpu_steps, inventory, machine, record, steps
from cluster_cli.loader import load_cluster

DATA = Path(__file__).parent / "data" / "gpu_proof"
RUN_SH = Path(__file__).resolve().parents[2] / "cluster_cli" / "gpu_proof" / "run.sh"
# slurmd -G's records, as Debian's slurmd 22.05 prints them (emulated H200s, tests/gpu_kit)
KEPT = ("slurmd: Gres Name=gpu Type=h200 Count=1 Index=0 ID=7696487 File=/dev/nvidia0 Cores=0-15 "
        "CoreCnt=16 Links=-1\n")
H200 = machine.Gpu(0, "NVIDIA H200", "GPU-9666a7db-9715-1c2d-3a74-ba34b4895124", 143771, "580.159.04")


def test_the_plugins_own_lines_name_each_gpu() -> None:
    found = autodetect.nvml_gpus((DATA / "h200-slurmd.log").read_text())
    assert found == [autodetect.NvmlGpu(0, "nvidia_h200", H200.uuid, "/dev/nvidia0")]


def test_a_later_listing_replaces_an_earlier_one() -> None:
    log = (DATA / "h200-slurmd.log").read_text()
    assert len(autodetect.nvml_gpus(log + log)) == 1


def test_driver_and_plugin_agreeing_is_no_problem() -> None:
    found = autodetect.Autodetected(0, KEPT, autodetect.nvml_gpus((DATA / "h200-slurmd.log").read_text()),
                                    autodetect.kept_records(KEPT))
    assert autodetect.problems(found, [H200], "h200") == []


@pytest.mark.parametrize(("listed", "gpu_type", "says"), [
    ([H200, machine.Gpu(1, "NVIDIA H200", "GPU-other", 143771, "580")], "h200", "found 1 GPU(s), nvidia-smi lists 2"),
    ([machine.Gpu(0, "NVIDIA H200", "GPU-other", 143771, "580")], "h200", "GPU-other: not found by gpu/nvml"),
    ([machine.Gpu(0, "NVIDIA H100 80GB HBM3", H200.uuid, 81559, "580")], "h200", "names it 'nvidia_h200'"),
    ([H200], "h100", "types ['h200'] do not hold 'h100'"),
])  # fmt: skip
def test_each_disagreement_is_named(listed: list[machine.Gpu], gpu_type: str, says: str) -> None:
    found = autodetect.Autodetected(0, KEPT, autodetect.nvml_gpus((DATA / "h200-slurmd.log").read_text()),
                                    autodetect.kept_records(KEPT))
    assert any(says in problem for problem in autodetect.problems(found, listed, gpu_type))


@pytest.mark.parametrize(("name", "expected"), [
    ("NVIDIA H200", "h200"), ("NVIDIA H100 80GB HBM3", "h100"), ("NVIDIA A100-SXM4-80GB", "a100"),
    ("Tesla V100-PCIE-32GB", "v100"), ("NVIDIA L40S", "l40s"),
])  # fmt: skip
def test_the_gpu_type_is_the_word_after_the_vendor(name: str, expected: str) -> None:
    assert machine.gpu_type(name) == expected
    assert expected in autodetect.slurm_name(name)


def _render(tmp_path: Path, cgroups: bool, swap: bool) -> str:
    tmp_path.mkdir(exist_ok=True)
    layout = daemons.Layout(tmp_path / "kit-root", tmp_path / "work")
    data = inventory.inventory("gpu-host", layout, machine.Cpus(1, 16, 1, 120000), 1, "h200", "2.11.0+cu130",
                               cgroups, swap)
    data["secrets"] = {"dir": str(tmp_path / "secrets")}
    inventory.write_and_render(tmp_path / "inventory.yaml", data, layout, "gpu-host")
    return "".join((layout.conf_dir / name).read_text() for name in ("slurm.conf", "gres.conf", "cgroup.conf"))


def test_the_rendered_configuration_points_into_the_kit_and_the_run(tmp_path: Path) -> None:
    text = _render(tmp_path, cgroups=True, swap=True)
    for line in (f"PluginDir={tmp_path}/kit-root/lib/slurm", f"AuthInfo=socket={tmp_path}/work/munge/munge.socket.2",
                 "SlurmctldPort=26817", "SlurmdPort=26818", "AutoDetect=nvml", "Gres=gpu:h200:1", "IgnoreSystemd=yes",
                 "ProctrackType=proctrack/cgroup", "ConstrainDevices=yes", "SlurmdDebug=debug2"):
        assert line in text
    assert "HealthCheckProgram" not in text and "AccountingStorageType=accounting_storage/slurmdbd" not in text
    assert (tmp_path / "work" / "spool" / "gpu-host").is_dir()


def test_without_cgroups_nothing_asks_for_them(tmp_path: Path) -> None:
    text = _render(tmp_path, cgroups=False, swap=True)
    for line in ("ProctrackType=proctrack/linuxproc", "TaskPlugin=task/affinity\n", "ConstrainDevices=no",
                 "JobAcctGatherType=jobacct_gather/linux"):
        assert line in text
    assert "PrologFlags" not in text


def test_without_swap_accounting_swap_is_not_constrained(tmp_path: Path) -> None:
    assert "ConstrainSwapSpace=no" in _render(tmp_path, cgroups=True, swap=False)
    assert "ConstrainSwapSpace=yes" in _render(tmp_path / "b", cgroups=True, swap=True)


def test_one_gpu_says_nccl_was_not_exercised_rather_than_a_figure(tmp_path: Path) -> None:
    rows = steps.figures([], gpu_count=1)
    assert [(row["check"], row["value"], row["reason"]) for row in rows] == [
        ("allreduce", None, "one GPU: NCCL is not exercised"), ("ddp", None, "one GPU: NCCL is not exercised")]
    proof = record.Record(tmp_path, machine={"description": "1 x NVIDIA H200", "gpu_count": 1})
    proof.figures = rows
    proof.add(record.Step("autodetect", record.PASS, "found", 0.1, {"found_by_nvml": 1}))
    row = record.results_row(proof, 30.0)
    assert "| 1 / 1 |" in row and "skipped: one GPU: NCCL is not exercised" in row and row.endswith("| PASS |")


def test_each_step_is_written_as_it_ends(tmp_path: Path) -> None:
    proof = record.Record(tmp_path)
    proof.add(record.Step("kit", record.PASS, "unpacked", 0.1))
    assert json.loads((tmp_path / "proof.json").read_text())["steps"][0]["name"] == "kit"
    proof.add(record.Step("daemons", record.STOP, "slurmd exited 1", 0.2))
    assert "| daemons | stop | slurmd exited 1 |" in (tmp_path / "summary.md").read_text()
    assert "FAIL: daemons" in (tmp_path / "summary.md").read_text()
    assert not list(tmp_path.glob("*.tmp"))


def _stub(path: Path, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)


@pytest.mark.skipif(os.geteuid() != 0, reason="the munge key's owner check needs root")
def test_the_munge_key_is_made_0600_and_kept_across_a_restart(tmp_path: Path) -> None:
    layout = daemons.Layout(tmp_path / "root", tmp_path / "work")
    _stub(layout.kit_root / "sbin" / "munged", "exit 0")
    _stub(layout.kit_root / "bin" / "munge", "echo credential")
    _stub(layout.kit_root / "bin" / "unmunge", "cat >/dev/null")
    (tmp_path / "work" / "log").mkdir(parents=True)
    assert daemons.start_munge(layout) is None
    key = layout.munge_dir / "munge.key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == daemons.MUNGE_KEY_BYTES
    first = key.read_bytes()
    assert daemons.start_munge(layout) is None and key.read_bytes() == first


def _kit(tmp_path: Path, floor: str) -> Path:
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "run").write_bytes(RUN_SH.read_bytes())
    (kit / "run").chmod(0o755)
    (kit / "kit.json").write_text(json.dumps({"glibc_floor": floor}))
    return kit


def test_a_c_library_older_than_the_kit_stops_the_first_step_in_seconds(tmp_path: Path) -> None:
    kit = _kit(tmp_path, "99.0")
    started = time.monotonic()
    done = subprocess.run([str(kit / "run"), str(tmp_path / "out")], capture_output=True, text=True, check=False)
    assert done.returncode == 1 and time.monotonic() - started < 5
    assert "need glibc >= 99.0: use a kit made on an older release" in done.stderr
    summary = (tmp_path / "out" / "summary.md").read_text()
    assert "Stopped at the first step (machine)" in summary and "glibc >= 99.0" in summary
    assert json.loads((tmp_path / "out" / "proof.json").read_text())["steps"][0]["verdict"] == "stop"


@pytest.mark.skipif(os.geteuid() != 0, reason="the first step refuses anyone but root")
def test_a_c_library_new_enough_passes_the_first_step(tmp_path: Path) -> None:
    kit = _kit(tmp_path, "2.0")
    done = subprocess.run([str(kit / "run"), str(tmp_path / "out"), "--python", "/bin/false"],
                          capture_output=True, text=True, check=False)
    assert "is not a Python 3.10 or newer" in done.stderr  # past the C library, stopped at the Python


def test_a_directory_without_kit_json_is_not_a_kit(tmp_path: Path) -> None:
    kit = _kit(tmp_path, "2.0")
    (kit / "kit.json").unlink()
    done = subprocess.run([str(kit / "run"), str(tmp_path / "out")], capture_output=True, text=True, check=False)
    assert done.returncode == 1 and "not a GPU kit" in done.stderr


def test_the_loader_reads_the_proofs_json_inventory_with_line_numbers(tmp_path: Path) -> None:
    layout = daemons.Layout(tmp_path / "kit-root", tmp_path / "work")
    data = inventory.inventory("gpu-host", layout, machine.Cpus(1, 4, 1, 1000), 1, "h200", None, True, True)
    data["node_groups"][0]["gpus"]["count"] = 0
    (tmp_path / "inventory.yaml").write_text(json.dumps(data, indent=2))
    with pytest.raises(Exception, match=r"inventory.yaml:\d+: node_groups\[0\]\.gpus\.count"):
        load_cluster(tmp_path / "inventory.yaml")


def _samples(uuid: str, memory_bytes: int, temperature: float, job: str | None) -> list[tuple[str, dict[str, str], float]]:
    labels = {"gpu": "0", "uuid": uuid}
    samples = [("info", {**labels, "name": "NVIDIA H200"}, 1.0), ("memory_total_bytes", labels, float(memory_bytes)),
               ("temperature_celsius", labels, temperature), ("power_watts", labels, 89.1)]
    if job is not None:
        samples.append(("slurm_job", {**labels, "slurm_job_id": job}, 1.0))
    return samples


def test_a_scrape_that_agrees_with_nvidia_smi_and_the_holding_job_is_no_problem() -> None:
    assert gpu_steps.metrics_problems(_samples(H200.uuid, 143771 << 20, 35, "4"), [H200], "4") == []


@pytest.mark.parametrize(("samples", "job", "says"), [
    (_samples("GPU-other", 143771 << 20, 35, "4"), "4", "the exporter lists GPUs ['GPU-other']"),
    (_samples(H200.uuid, 81559 << 20, 35, "4"), "4", "memory total 81559 MiB, nvidia-smi 143771 MiB"),
    (_samples(H200.uuid, 143771 << 20, 0, "4"), "4", "temperature_celsius 0 outside 1..120"),
    (_samples(H200.uuid, 143771 << 20, 35, None), "4", "is not named on"),
    (_samples(H200.uuid, 143771 << 20, 35, "5"), "4", "is not named on"),
])  # fmt: skip
def test_each_disagreement_of_the_exporter_is_named(samples: list[tuple[str, dict[str, str], float]],
                                                    job: str, says: str) -> None:
    assert any(says in problem for problem in gpu_steps.metrics_problems(samples, [H200], job))


def test_the_monitoring_page_lists_every_metric_the_exporter_serves() -> None:
    from cluster_cli.exporters import gpu_metrics

    page = (Path(__file__).resolve().parents[2] / "docs" / "monitoring.md").read_text()
    listed = set(re.findall(r"^\| `cluster_gpu_(\w+)` \| (\w+) \|", page, re.MULTILINE))
    assert listed == {(name, kind) for name, (kind, _) in gpu_metrics.METRICS.items()}
