"""Configless mode (scenario configless): hosts that only run slurmd hold no configuration files,
every slurmd fetches them from the controllers (--conf-server), a change reaches the slurmds
without a file pushed to those hosts, and a compute host joins the running cluster.

The last test adds the scenario's late hosts (CLUSTER_TB_LATE_HOSTS) to the inventory: it runs
last, and the smoke suite after verify then runs on the grown cluster.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex

import pytest
import yaml
from conftest import ClusterView

from cluster_cli import hostlist
from cluster_cli.ansible.variables import conf_server

CONFIGS = ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf")


@pytest.fixture(autouse=True)
def configless_cluster(view: ClusterView) -> None:
    if not view.cluster.inventory.slurm.configless:
        pytest.skip("slurm.configless is off in this scenario's inventory")
    view.wait_nodes_idle(timeout=120)


def _without_files(view: ClusterView) -> list[str]:
    found = [name for name in view.compute if not view.keeps_config_files(name)]
    assert found, "the scenario has no host that only runs slurmd"
    return found


def _instances(view: ClusterView, hosts: list[str]) -> list[tuple[str, str]]:
    return [(host, node.name) for host in hosts for node in view.cluster.hosts[host].slurmd_nodes]


def _slurmd_pid(view: ClusterView, host: str, node: str) -> str:
    pid = view.run(host, f"systemctl show -p MainPID --value slurmd@{node}").stdout.strip()
    assert pid not in ("", "0"), f"{host}: slurmd@{node} does not run"
    return pid


def _slurmd_argv(view: ClusterView, host: str, node: str) -> list[str]:
    pid = _slurmd_pid(view, host, node)
    return view.run(host, f"tr '\\0' '\\n' < /proc/{pid}/cmdline").stdout.splitlines()


def _present_configs(view: ClusterView, host: str) -> list[str]:
    conf_dir = view.cluster.inventory.slurm.paths.conf_dir
    listed = view.run(host, f"ls -A {shlex.quote(conf_dir)} 2>/dev/null || true").stdout.split()
    return [name for name in CONFIGS if name in listed]


def _conf_dir_fingerprint(view: ClusterView, host: str) -> str:
    conf_dir = shlex.quote(view.cluster.inventory.slurm.paths.conf_dir)
    return view.run(host, f"find {conf_dir} -printf '%p %m %s %T@\\n' | sort | sha256sum").stdout.split()[0]


def _sha256(view: ClusterView, host: str, path: str) -> str:
    return view.run(host, f"sha256sum {shlex.quote(path)}").stdout.split()[0]


def _changed_hosts(deploy_output: str) -> set[str]:
    """Hosts with a changed task in cluster-cli deploy's live progress ("  c1: changed: <task>")."""
    return set(re.findall(r"^\s+(\S+): changed: ", deploy_output, re.MULTILINE))


def _node_field(view: ClusterView, node: str, field: str) -> str:
    out = view.slurm(f"scontrol -o show node {node}")
    return dict(re.findall(r"(\S+?)=(\S*)", out))[field]


def test_compute_hosts_hold_no_config_files_and_slurmd_fetches_them(view: ClusterView) -> None:
    expected_server = conf_server(view.cluster)
    assert "," in expected_server or view.cluster.inventory.controllers.backup is None
    rendered = {path.name: hashlib.sha256(path.read_bytes()).hexdigest()
                for path in sorted((view.build_dir / "slurm").glob("*.conf")) if path.name in CONFIGS}
    for host, node in _instances(view, _without_files(view)):
        assert _present_configs(view, host) == [], f"{host}: config files in the config directory"
        argv = _slurmd_argv(view, host, node)
        assert argv == ["/usr/sbin/slurmd", "-D", "-s", "--conf-server", expected_server, "-N", node], argv
        for name, digest in rendered.items():
            assert _sha256(view, host, f"{view.conf_cache(node)}/{name}") == digest, f"{host}: cached {name} differs"
        link = view.run(host, "readlink /run/slurm/conf").stdout.strip()
        assert link == view.conf_cache(node), f"{host}: /run/slurm/conf -> {link}"
    for host in view.hosts:
        if view.keeps_config_files(host):
            assert "slurm.conf" in _present_configs(view, host), f"{host} lost its slurm.conf"


def test_a_batch_job_runs_client_commands_on_the_configless_nodes(view: ClusterView) -> None:
    """srun and scontrol inside a job on a node without slurm.conf read slurmd's cached copy."""
    every = len(view.nodes)
    job = view.slurm(f"sbatch --parsable -N{every} -o /tmp/configless-%j.out "
                     "--wrap 'srun hostname; scontrol show config | grep -i ^SlurmctldParameters'")
    view.wait_until(f"job {job} completes", lambda: view.job(job)["JobState"] == "COMPLETED", timeout=90)
    batch_host = view.job(job)["BatchHost"]
    out = view.run(batch_host, f"cat /tmp/configless-{job}.out").stdout
    assert sorted(out.split()[:every]) == sorted(view.compute), out
    assert "enable_configless" in out, out


def test_a_partition_change_reaches_every_slurmd_without_a_file_push(view: ClusterView) -> None:
    hosts = _without_files(view)
    instances = _instances(view, hosts)
    pids = {instance: _slurmd_pid(view, *instance) for instance in instances}
    fingerprints = {host: _conf_dir_fingerprint(view, host) for host in hosts}
    text = view.inventory_path.read_text()
    changed, count = re.subn(r'max_time: "01:00:00"', 'max_time: "02:00:00"', text)
    assert count == 1, "the scenario inventory has no partition with max_time 01:00:00"
    view.inventory_path.write_text(changed)

    deployed = view.deploy()

    assert not _changed_hosts(deployed.stdout) & set(hosts), deployed.stdout[-4000:]
    assert {host: _conf_dir_fingerprint(view, host) for host in hosts} == fingerprints
    for host, node in instances:
        cached = f"{view.conf_cache(node)}/slurm.conf"
        view.wait_until(f"{host}: slurmd {node} has MaxTime=02:00:00 in {cached}",
                        lambda host=host, cached=cached: view.run(
                            host, f"grep -c 'MaxTime=02:00:00' {cached}", check=False).stdout.strip() == "1",
                        timeout=60)
    # scontrol reconfigure, no restart: the same slurmd processes read the new copy
    assert {instance: _slurmd_pid(view, *instance) for instance in instances} == pids
    assert "MaxTime=02:00:00" in view.slurm("scontrol show partition debug", hosts[0])


def _controllers_up(view: ClusterView) -> dict[str, str]:
    """{controller: UP|DOWN} from `scontrol ping` on the submit host."""
    out = view.run(view.submit, "scontrol ping", check=False).stdout
    return {words[-3]: words[-1] for words in (line.split() for line in out.splitlines())
            if len(words) >= 4 and words[-2] == "is"}


def test_with_the_primary_stopped_a_slurmd_fetches_its_configuration_from_the_backup(view: ClusterView) -> None:
    backup = view.cluster.inventory.controllers.backup
    if backup is None:
        pytest.skip("no backup controller in this scenario's inventory")
    primary = view.controller
    host, node = _instances(view, _without_files(view))[0]
    started = _node_field(view, node, "SlurmdStartTime")
    view.run(primary, "systemctl stop slurmctld")
    try:
        view.wait_until("the backup is in control",
                        lambda: view.run(view.submit, "sinfo -h", check=False).rc == 0
                        and _controllers_up(view) == {primary: "DOWN", backup: "UP"}, timeout=90)
        # nothing left to read locally: the restarted slurmd must fetch every file again
        view.run(host, f"systemctl stop slurmd@{node} && rm -rf {shlex.quote(view.conf_cache(node))} "
                       f"&& systemctl start slurmd@{node}")
        view.wait_until(f"{node} registers again with the backup",
                        lambda: _node_field(view, node, "SlurmdStartTime") != started
                        and view.node_state(node) == ("idle", "none"), timeout=90)
        expected = hashlib.sha256((view.build_dir / "slurm" / "slurm.conf").read_bytes()).hexdigest()
        assert _sha256(view, host, f"{view.conf_cache(node)}/slurm.conf") == expected
        assert view.slurm(f"srun -N1 -w {node} hostname") == host
    finally:
        view.run(primary, "systemctl start slurmctld")
    view.wait_until("both controllers answer", lambda: _controllers_up(view) == {primary: "UP", backup: "UP"},
                    timeout=120)


def test_a_slurmd_started_while_no_controller_answers_comes_up_once_one_does(view: ClusterView) -> None:
    """Slurm 22.05's slurmd exits when it cannot fetch its configuration (a node booting before the
    controllers); the unit starts it again (RestartForceExitStatus=1) until a controller answers.

    A fetch that meets the backup in standby before the primary is up waits there: the minimal
    configuration slurmd fetches with has Slurm's default SlurmctldTimeout (120 s), and the client
    retries a standby controller for 1.5 times that, then slurmd exits and its unit tries again."""
    controllers = [view.controller] + ([view.cluster.inventory.controllers.backup]
                                       if view.cluster.inventory.controllers.backup else [])
    host, node = _instances(view, _without_files(view))[-1]
    started = _node_field(view, node, "SlurmdStartTime")
    unit = f"slurmd@{node}"
    restarts = int(view.run(host, f"systemctl show -p NRestarts --value {unit}").stdout.strip())
    for controller in controllers:
        view.run(controller, "systemctl stop slurmctld")
    try:
        view.run(host, f"systemctl restart {unit}")
        view.wait_until(f"{unit} failed to fetch its configuration and was started again",
                        lambda: int(view.run(host, f"systemctl show -p NRestarts --value {unit}").stdout.strip())
                        > restarts, timeout=60)
    finally:
        for controller in controllers:
            view.run(controller, "systemctl start slurmctld")
    took = view.wait_until(f"{node} registers again",
                           lambda: view.run(view.submit, "sinfo -h", check=False).rc == 0
                           and _node_field(view, node, "SlurmdStartTime") != started
                           and view.node_state(node) == ("idle", "none"), timeout=180 + 60 + 30)
    print(f"{node} registered {took:.0f} s after the controllers were started")
    assert view.run(host, f"systemctl is-active {unit}").stdout.strip() == "active"


def _late_hosts() -> list[str]:
    return [name for name in os.environ.get("CLUSTER_TB_LATE_HOSTS", "").split(",") if name]


def _add_compute_hosts(view: ClusterView, names: list[str]) -> None:
    """The inventory's first node group grows by ``names`` (hosts of the bed, by address)."""
    document = yaml.safe_load(view.inventory_path.read_text())
    group = document["node_groups"][0]
    nodes = hostlist.expand(group["nodes"]) + names
    addresses = group["addresses"].split(",") + [view.bed.host(name).address for name in names]
    group["nodes"] = hostlist.compress(nodes)
    group["addresses"] = ",".join(addresses)
    view.inventory_path.write_text(yaml.safe_dump(document, sort_keys=False))


def test_a_compute_host_joins_the_running_cluster_while_a_job_keeps_running(view: ClusterView) -> None:
    late = _late_hosts()
    if not late:
        pytest.skip("the scenario has no late host to add (CLUSTER_TB_LATE_HOSTS)")
    if set(late) & set(view.nodes):
        pytest.skip(f"{late} are in the inventory already (verify run again on the same bed)")
    old = _instances(view, _without_files(view))
    pids = {instance: _slurmd_pid(view, *instance) for instance in old}
    first = view.nodes[0]
    running = view.slurm(f"sbatch --parsable -N1 -w {first} -o /dev/null --wrap 'sleep 900'")
    view.wait_until(f"job {running} runs", lambda: view.job(running)["JobState"] == "RUNNING", timeout=60, every=1)
    before = view.job(running)

    _add_compute_hosts(view, late)
    try:
        view.deploy()
        after = view.job(running)
        assert (after["JobState"], after["StartTime"], after["NodeList"]) == (
            "RUNNING", before["StartTime"], before["NodeList"]), after
        # a new node is a slurm.conf change slurmd must be restarted for: the hosts without files
        # took that from the controllers' decision
        restarted = {instance: _slurmd_pid(view, *instance) for instance in old}
        assert all(restarted[instance] != pids[instance] for instance in old), (pids, restarted)
        expected_server = conf_server(view.cluster)
        for name in late:
            assert _present_configs(view, name) == [], f"{name}: config files in the config directory"
            assert _slurmd_argv(view, name, name)[3:5] == ["--conf-server", expected_server]
            view.wait_until(f"{name} is idle", lambda name=name: view.node_state(name) == ("idle", "none"),
                            timeout=120)
            job = view.slurm(f"sbatch --parsable -N1 -w {name} -o /dev/null --wrap 'hostname'")
            view.wait_until(f"job {job} completes on {name}",
                            lambda job=job: view.job(job)["JobState"] == "COMPLETED", timeout=90)
        assert view.job(running)["JobState"] == "RUNNING"
    finally:
        view.slurm(f"scancel {running}")
    view.wait_until(f"job {running} has ended", lambda: view.job(running)["JobState"] != "RUNNING", timeout=90)
