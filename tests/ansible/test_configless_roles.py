"""Configless mode in the roles, run for real with ansible-playbook on localhost.

slurm_common's configure tasks run on three local hosts in the groups of a cluster (a controller, a
login host and a host that only runs slurmd), each with its own configuration, marker and profile
directories under a temporary root: which host gets which file, the stale files removed, and the
restart the compute host records from the controller's decision when it has no files to compare.
The slurmd unit is rendered from the role's own template and variables. Needs root (the tasks
write root-owned files); nothing outside the temporary directory is touched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from role_runner import REPO, PlaybookRun, ansible_playbook, is_root, role_vars_files, run_play

from cluster_cli.loader import load_cluster
from cluster_cli.render import render_configs

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="the role writes root-owned files (needs root)"),
]

CONFIGS = ("slurm.conf", "gres.conf", "cgroup.conf", "topology.conf")
HOSTS = ("ctl", "login", "node")
GROUPS = {"slurm_controller": ["ctl"], "slurm_login": ["login"], "slurm_compute": ["node"]}
MARKERS = ("restart-slurmctld", "restart-slurmd", "reconfigure")


class Hosts:
    """The three hosts' directories under ``root`` and a way to run slurm_common's configure tasks."""

    def __init__(self, root: Path):
        self.root = root
        self.src = root / "build" / "slurm"
        for host in HOSTS:
            for directory in ("etc", "pending", "profile.d"):
                (root / host / directory).mkdir(parents=True)
        # the shipped configless example: both controllers, gres.conf and a topology.conf
        for item in render_configs(load_cluster(REPO / "inventories/examples/gpu-cluster.yaml"), None):
            if item.path.startswith("slurm/"):
                (self.src / Path(item.path).name).parent.mkdir(parents=True, exist_ok=True)
                (self.src / Path(item.path).name).write_text(item.content)

    def configure(self, configless: bool) -> PlaybookRun:
        per_host = str(self.root / "{{ inventory_hostname }}")
        extra: dict[str, Any] = {
            "slurm_common_config_src": str(self.src),
            "slurm_common_configless": configless,
            "slurm_common_conf_dir": f"{per_host}/etc",
            "slurm_common_pending_dir": f"{per_host}/pending",
            "__slurm_common_profile_dir": f"{per_host}/profile.d",
        }
        include = {"name": "slurm_common", "tasks_from": "configure"}
        play = {"name": "slurm_common configure", "tasks": [{"name": "configure", "ansible.builtin.include_role": include}]}
        run = run_play(self.root / "work", play, {host: {} for host in HOSTS}, extra, groups=GROUPS)
        assert run.returncode == 0, run.explain()
        return run

    def files(self, host: str) -> list[str]:
        return sorted(path.name for path in (self.root / host / "etc").iterdir())

    def markers(self) -> dict[str, list[str]]:
        return {host: sorted(path.name for path in (self.root / host / "pending").iterdir()) for host in HOSTS}

    def clear_markers(self) -> None:
        for host in HOSTS:
            for marker in MARKERS:
                (self.root / host / "pending" / marker).unlink(missing_ok=True)

    def change(self, name: str, old: str, new: str) -> None:
        path = self.src / name
        text = path.read_text()
        assert text.count(old) == 1, f"{old!r} in {name}"
        path.write_text(text.replace(old, new))


@pytest.fixture
def hosts(tmp_path: Path) -> Hosts:
    return Hosts(tmp_path)


def test_configless_leaves_the_compute_only_host_without_files(hosts: Hosts) -> None:
    node = hosts.root / "node"
    for name in CONFIGS:
        (node / "etc" / name).write_text("# stale copy from before configless\nClusterName=old\n")
    (node / "profile.d" / "slurm_conf.sh").write_text("export SLURM_CONF=/elsewhere/slurm.conf\n")
    hosts.configure(configless=True)
    assert hosts.files("node") == []
    assert not (node / "profile.d" / "slurm_conf.sh").exists(), "SLURM_CONF would hide /run/slurm/conf"
    for host in ("ctl", "login"):
        assert hosts.files(host) == sorted(CONFIGS)
        for name in CONFIGS:
            assert (hosts.root / host / "etc" / name).read_bytes() == (hosts.src / name).read_bytes()
        assert (hosts.root / host / "profile.d" / "slurm_conf.sh").is_file()
    # the removed stale slurm.conf was itself a change that restarts slurmd, now with --conf-server
    assert "restart-slurmd" in hosts.markers()["node"]


def test_without_configless_every_host_gets_the_files(hosts: Hosts) -> None:
    hosts.configure(configless=False)
    for host in HOSTS:
        assert hosts.files(host) == sorted(CONFIGS), host


def test_the_compute_only_host_takes_the_controllers_restart_decision(hosts: Hosts) -> None:
    hosts.configure(configless=True)
    hosts.clear_markers()
    unchanged = hosts.configure(configless=True)
    assert hosts.markers() == {"ctl": [], "login": [], "node": []}
    assert all(unchanged.recap(host)["changed"] == 0 for host in HOSTS), unchanged.stdout[-3000:]

    # a key slurm.conf(5) says needs slurmctld and slurmd restarted: every slurmd restarts too
    hosts.change("slurm.conf", "SelectType=select/cons_tres\n", "SelectType=select/cons_res\n")
    hosts.configure(configless=True)
    assert hosts.markers() == {"ctl": ["restart-slurmctld"], "login": [], "node": ["restart-slurmd"]}
    assert hosts.files("node") == []

    # a partition line: scontrol reconfigure on the controller sends the files to the slurmds
    hosts.clear_markers()
    hosts.change("slurm.conf", "MaxTime=01:00:00", "MaxTime=02:00:00")
    hosts.configure(configless=True)
    assert hosts.markers() == {"ctl": ["reconfigure"], "login": [], "node": []}

    # gres.conf: slurmd restarts, slurmctld is only reconfigured (it reads gres.conf too)
    hosts.clear_markers()
    hosts.change("gres.conf", "File=/dev/nvidia[0-7]\n", "File=/dev/nvidia[0-3]\n")
    hosts.configure(configless=True)
    assert hosts.markers() == {"ctl": ["reconfigure"], "login": [], "node": ["restart-slurmd"]}
    assert hosts.files("node") == []


def render_unit(tmp_path: Path, conf_server: str) -> tuple[str, list[str]]:
    """slurmd@.service rendered from the role's template with its defaults and vars, and the
    options slurmd's standalone start and restart handler put before -N."""
    unit = tmp_path / "slurmd@.service"
    options = tmp_path / "options.json"
    play = {
        "name": "render the slurmd unit",
        "vars_files": role_vars_files("slurmd"),
        "tasks": [
            {
                "name": "Render the unit",
                "ansible.builtin.template": {
                    "src": str(REPO / "roles/slurmd/templates/slurmd@.service.j2"),
                    "dest": str(unit),
                    "mode": "0644",
                },
            },
            {
                "name": "Write the options",
                "ansible.builtin.copy": {
                    "content": "{{ __slurmd_options | to_json }}",
                    "dest": str(options),
                    "mode": "0644",
                },
            },
        ],
    }
    run = run_play(tmp_path / "work", play, {"node": {}}, {"slurmd_conf_server": conf_server})
    assert run.returncode == 0, run.explain()
    return unit.read_text(), json.loads(options.read_text())


def test_configless_slurmd_is_started_with_conf_server(tmp_path: Path) -> None:
    unit, options = render_unit(tmp_path, "10.0.0.1:6817,10.0.0.2:6817")
    assert options == ["-D", "-s", "--conf-server", "10.0.0.1:6817,10.0.0.2:6817"]
    assert "ExecStart=/usr/sbin/slurmd -D -s --conf-server 10.0.0.1:6817,10.0.0.2:6817 -N %i $SLURMD_OPTIONS\n" in unit
    # Slurm's configless guide: a ConditionPathExists keeps the unit from starting without slurm.conf
    settings = [line for line in unit.splitlines() if not line.startswith("#")]
    assert not [line for line in settings if line.startswith("ConditionPathExists=")]
    assert not [line for line in settings if "SLURM_CONF" in line]
    # slurmd exits 1 when no controller answers its configuration request: tried again, not when killed
    assert {"RestartForceExitStatus=1", "RestartSec=10"} <= set(settings)
    assert not [line for line in settings if line.startswith("Restart=")]


def test_without_configless_the_unit_reads_the_local_files_as_before(tmp_path: Path) -> None:
    unit, options = render_unit(tmp_path, "")
    assert options == ["-D", "-s"]
    body = [line for line in unit.splitlines() if line and not line.startswith("#")]
    assert body[body.index("Wants=network-online.target") + 1 :][:7] == [
        "ConditionPathExists=/etc/slurm/slurm.conf",
        "[Service]",
        "Type=simple",
        "Environment=SLURM_CONF=/etc/slurm/slurm.conf",
        "EnvironmentFile=-/etc/default/slurmd",
        "ExecStart=/usr/sbin/slurmd -D -s -N %i $SLURMD_OPTIONS",
        "ExecReload=/bin/kill -HUP $MAINPID",
    ]


def slurmctld_decisions(tmp_path: Path, configless: bool) -> dict[str, list[bool]]:
    """[restart, reconfigure] that the slurmctld role's own variables decide on each of two
    controllers (primary ctl1, backup ctl2) for a change slurm_common found reconfigurable."""
    play = {
        "name": "slurmctld decisions",
        "vars_files": role_vars_files("slurmctld"),
        "tasks": [
            {
                "name": "Write the decision",
                "ansible.builtin.copy": {
                    "content": "{{ [__slurmctld_need_restart | bool, __slurmctld_need_reconfigure | bool] | to_json }}",
                    "dest": str(tmp_path / "{{ inventory_hostname }}.json"),
                    "mode": "0644",
                },
            }
        ],
    }
    extra = {"slurm_common_configless": configless, "slurm_common_reconfigure": True}
    controllers = {"slurm_controller": ["ctl1", "ctl2"]}
    run = run_play(tmp_path / "work", play, {"ctl1": {}, "ctl2": {}}, extra, groups=controllers)
    assert run.returncode == 0, run.explain()
    return {host: json.loads((tmp_path / f"{host}.json").read_text()) for host in ("ctl1", "ctl2")}


def test_configless_backup_restarts_where_the_primary_reconfigures(tmp_path: Path) -> None:
    """A standby backup serves the files it read at its start: it restarts to serve the new ones."""
    assert slurmctld_decisions(tmp_path, configless=True) == {"ctl1": [False, True], "ctl2": [True, False]}


def test_without_configless_both_controllers_reconfigure(tmp_path: Path) -> None:
    assert slurmctld_decisions(tmp_path, configless=False) == {"ctl1": [False, True], "ctl2": [False, True]}
