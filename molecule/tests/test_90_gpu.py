"""GPU autodetection on the `gpu` scenario: Slurm's own gpu/nvml plugin, built by the deploy and
installed on the hosts that autodetect, reads each host's emulated NVML (roles/nvml_emulator); so
does the GPU exporter (roles/gpu_exporter, where the scenario has a monitoring host).

Skipped in scenarios whose inventory autodetects no GPU.
"""

from __future__ import annotations

import json
import re
import shlex
import urllib.parse

import pytest
from conftest import FETCH, ClusterView

from cluster_cli.exporters.text_format import samples_of
from cluster_cli.render.dashboards import GPUS

EMULATOR_CONF = "/etc/cluster-cli/nvml-emulator.conf"


@pytest.fixture(scope="module")
def gpu_nodes(view: ClusterView) -> dict[str, tuple[str, int]]:
    """{node: (type, count)} of every node whose group autodetects."""
    found = {
        node.name: (node.group.gpus.type or "", node.group.gpus.count)
        for node in view.cluster.nodes
        if node.group.gpus is not None and node.group.gpus.autodetect == "nvml"
    }
    if not found:
        pytest.skip("no node group of this scenario autodetects its GPUs (gpus.autodetect: nvml)")
    return found


def test_slurmd_found_each_hosts_gpus_through_nvml(view: ClusterView, gpu_nodes: dict[str, tuple[str, int]]) -> None:
    view.wait_nodes_idle()
    for node, (gpu_type, count) in gpu_nodes.items():
        shown = view.slurm(f"scontrol show node {node}", view.controller)
        assert f"Gres=gpu:{gpu_type}:{count}" in shown, shown
        # What slurmd loads at start: the NVML plugin's answer, one record per GPU.
        detected = view.run(node, f"slurmd -G -N {node} 2>&1", check=False).stdout
        # the line of Slurm's gpu/nvml plugin (Debian's packages have none to print it)
        assert f"gpu/nvml: _get_system_gpu_list_nvml: {count} GPU system device(s) detected" in detected, detected
        records = re.findall(r"Name=gpu Type=(\S+) .*?File=(/dev/nvidia\d+)", detected)
        assert sorted(records) == [(gpu_type, f"/dev/nvidia{n}") for n in range(count)], detected


def test_only_the_hosts_that_autodetect_get_the_plugin(view: ClusterView, gpu_nodes: dict[str, tuple[str, int]]) -> None:
    for host in view.cluster.hosts:
        installed = view.run(host, "dpkg-query -W -f='${Version}' slurm-wlm-nvml-plugin", check=False)
        if host in gpu_nodes:
            assert installed.rc == 0 and installed.stdout.endswith("+nvml1"), installed.stdout + installed.stderr
        else:
            assert installed.rc != 0, f"{host} has slurm-wlm-nvml-plugin {installed.stdout}"


def test_the_gpu_exporter_serves_each_hosts_gpus_as_nvml_shows_them(
    view: ClusterView, gpu_nodes: dict[str, tuple[str, int]]
) -> None:
    """roles/gpu_exporter on each host whose GPUs NVML reads: its GPUs through NVIDIA's binding
    (the emulated NVML here), the count the inventory expects, Prometheus scraping it."""
    monitoring = view.cluster.inventory.monitoring
    if monitoring.host is None:
        pytest.skip("this scenario's inventory has no monitoring host")
    for node, (gpu_type, count) in gpu_nodes.items():
        host = view.cluster.node(node).host
        address = view.cluster.hosts[host].address
        samples = samples_of(view.run(host, f"{FETCH} http://{address}:{monitoring.ports.gpu}/metrics").stdout)
        names = [labels["name"] for name, labels, _ in samples if name == "cluster_gpu_info"]
        assert len(names) == count and all(gpu_type in name.lower().replace(" ", "_") for name in names), names
        assert [value for name, _, value in samples if name == "cluster_gpu_expected"] == [count]
        totals = [value for name, _, value in samples if name == "cluster_gpu_memory_total_bytes"]
        assert len(totals) == count and all(total > 0 for total in totals), totals
    server = view.cluster.hosts[monitoring.host].address
    url = f"http://{server}:{monitoring.ports.prometheus}/api/v1/targets"
    wanted = {f"{view.cluster.hosts[view.cluster.node(node).host].address}:{monitoring.ports.gpu}" for node in gpu_nodes}

    def gpu_targets_up() -> bool:
        targets = json.loads(view.run(monitoring.host, f"{FETCH} {url}").stdout)["data"]["activeTargets"]
        return {target["labels"]["instance"] for target in targets
                if target["labels"]["job"] == "gpu" and target["health"] == "up"} == wanted

    view.wait_until("Prometheus scrapes every GPU exporter", gpu_targets_up, 120)


def test_every_gpu_dashboard_panel_has_data_with_a_slurm_job_on_a_gpu(
    view: ClusterView, gpu_nodes: dict[str, tuple[str, int]]
) -> None:
    """Every panel of the GPU dashboard (render/dashboards.py: the Grafana JSON's and the console
    page's queries) asked of the bed's Prometheus. A job holds one GPU; the emulated driver is told
    that the job's process uses GPU 0 of its host (NVML's process list, which the emulator reads from
    its file at each nvmlInit); the exporter's own code finds the job from that pid's cgroup."""
    monitoring = view.cluster.inventory.monitoring
    if monitoring.host is None:
        pytest.skip("this scenario's inventory has no monitoring host")
    node = min(gpu_nodes)
    host = view.cluster.node(node).host
    job = view.slurm(f"sbatch --parsable --gres=gpu:1 --nodelist={node} -o /dev/null --wrap 'sleep 600'")
    view.run(host, f"cp -p {EMULATOR_CONF} {EMULATOR_CONF}.before-job")
    try:
        view.wait_until(f"job {job} runs", lambda: view.job(job)["JobState"] == "RUNNING", timeout=60, every=1)
        pids = view.run(host, f"scontrol listpids {job} | awk 'NR > 1 {{print $1}}'").stdout.split()
        sleeper = next(pid for pid in pids if view.run(host, f"cat /proc/{pid}/comm", check=False).stdout.strip() == "sleep")
        view.run(host, f"sed -i 's/^\\[gpu 0\\]$/[gpu 0]\\nprocesses = {sleeper}:512/' {EMULATOR_CONF}")
        assert f"processes = {sleeper}:512" in view.run(host, f"cat {EMULATOR_CONF}").stdout
        wait = 3 * monitoring.scrape_interval_s + 5
        query = f'cluster_gpu_slurm_job{{slurm_job_id="{job}"}}'
        view.wait_until(f"Prometheus has job {job} on a GPU of {host}",
                        lambda: bool(view.prometheus(f"/api/v1/query?query={urllib.parse.quote(query)}")["result"]),
                        timeout=wait)
        empty = [panel.title for panel in GPUS.panels
                 if not view.prometheus(f"/api/v1/query?query={urllib.parse.quote(panel.expr)}")["result"]]
        assert empty == [], f"GPU panels without data on the bed: {empty}"
    finally:
        view.run(host, f"mv {EMULATOR_CONF}.before-job {EMULATOR_CONF}", check=False)
        view.slurm(f"scancel {job}")
    view.wait_nodes_idle()


def test_a_redeploy_reuses_the_built_plugin(view: ClusterView, gpu_nodes: dict[str, tuple[str, int]]) -> None:
    info_path = view.build_dir / "slurm-build" / "build-info.json"
    before = json.loads(info_path.read_text())
    view.deploy()
    after = json.loads(info_path.read_text())
    assert after == before, "the package was built again"
    print(f"FIGURE nvml plugin package: built in {before.get('build_time')} ({before.get('wanted', {}).get('mode')} mode)")


def test_a_host_whose_nvml_shows_fewer_gpus_fails_the_deploy_by_name(
    view: ClusterView, gpu_nodes: dict[str, tuple[str, int]]
) -> None:
    node, (_, count) = max(gpu_nodes.items(), key=lambda item: item[1][1])  # the node with the most GPUs
    conf = view.run(node, f"cat {EMULATOR_CONF}").stdout
    fewer = conf.split(f"[gpu {count - 1}]")[0]  # every GPU but the last
    view.run(node, f"cp {EMULATOR_CONF} {EMULATOR_CONF}.full && printf %s {shlex.quote(fewer)} > {EMULATOR_CONF}")
    try:
        view.run(node, f"systemctl restart slurmd@{node}")
        # slurmctld refuses the registration: INVALID_REG (sinfo: inval) and drained, never idle
        view.wait_until(f"slurmctld refuses {node}'s registration", lambda: view.node_state(node)[0] == "inval", 60)
        failed = view.cli("deploy", "--full", "--build-dir", str(view.build_dir), str(view.inventory_path), check=False)
        text = " ".join((failed.stdout + failed.stderr).split())
        assert failed.returncode != 0, text[-3000:]
        # the nvidia role's preflight (nvidia-smi, an NVML client) and the post-check (Slurm's reason)
        assert f"{node}: nvidia-smi shows {count - 1} GPU(s)" in text and f"the inventory gives it {count}" in text, text[-3000:]
        assert f"{node} (inval|slurm|gres/gpu count reported lower than configured ({count - 1} < {count}))" in text, text[-3000:]
    finally:
        view.run(node, f"mv {EMULATOR_CONF}.full {EMULATOR_CONF} && systemctl restart slurmd@{node}")
    # Slurm keeps its drain once the GPU is back: the operator resumes the node, then it runs jobs.
    view.wait_until(f"{node} registers again, drained", lambda: view.node_state(node)[0] == "drained", 60)
    view.cli("nodes", "resume", str(view.inventory_path), node, "--force")
    view.wait_nodes_idle()
