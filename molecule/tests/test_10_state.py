"""The deployed cluster on its systemd hosts: units enabled and running, nodes idle."""

from __future__ import annotations

import pytest
from conftest import ClusterView, hosts_with


def _units(view: ClusterView, host: str) -> list[str]:
    roles = view.cluster.hosts[host].roles
    units = ["munge"]
    if "database" in roles:
        units += ["mariadb", "slurmdbd"]
    if "controller" in roles:
        units.append("slurmctld")
    if "compute" in roles:
        units += [f"slurmd@{node.name}" for node in view.cluster.hosts[host].slurmd_nodes]
    if view.cluster.inventory.monitoring.host is not None:  # roles/node_exporter, slurm_exporter, prometheus
        units.append("prometheus-node-exporter")
        units += ["cluster-slurm-exporter"] if host == view.cluster.inventory.controllers.primary else []
        units += ["prometheus"] if "monitoring" in roles else []
    return units


def test_every_daemon_is_enabled_and_running_under_systemd(view: ClusterView) -> None:
    problems = []
    for name, host in view.hosts.items():
        assert host.run("cat /proc/1/comm").stdout.strip() == "systemd", f"{name}: PID 1 is not systemd"
        for unit in _units(view, name):
            service = host.service(unit)
            if not (service.is_running and service.is_enabled):
                problems.append(f"{name}: {unit} running={service.is_running} enabled={service.is_enabled}")
    assert not problems, problems


def test_daemons_run_only_where_their_role_puts_them(view: ClusterView) -> None:
    for name, host in view.hosts.items():
        roles = view.cluster.hosts[name].roles
        for process, role in (("slurmctld", "controller"), ("slurmdbd", "database"), ("slurmd", "compute")):
            running = bool(host.process.filter(comm=process))
            assert running == (role in roles), f"{name}: {process} running={running}, roles {sorted(roles)}"


def test_every_node_is_idle_with_no_drain_reason(view: ClusterView) -> None:
    view.wait_nodes_idle(timeout=60)


def test_accounting_records_a_job_from_the_login_host(view: ClusterView) -> None:
    if not view.cluster.inventory.accounting.enabled:
        pytest.skip("accounting is disabled in this scenario's inventory")
    job = view.slurm(f"sbatch --parsable -N{len(view.nodes)} --wrap 'srun hostname'")
    view.wait_until(f"job {job} is COMPLETED in sacct",
                    lambda: view.slurm(f"sacct -X -n -P -j {job} -o State") == "COMPLETED", timeout=90)
    assert view.slurm(f"sacct -X -n -P -j {job} -o Cluster") == view.cluster.name


def test_login_hosts_run_no_slurm_daemon_but_reach_the_controller(view: ClusterView) -> None:
    for name in hosts_with(view.cluster, "login"):
        if view.cluster.hosts[name].roles != {"login"}:
            continue
        assert "UP" in view.slurm("scontrol ping", name)
        assert not view.hosts[name].process.filter(comm="slurmd")
