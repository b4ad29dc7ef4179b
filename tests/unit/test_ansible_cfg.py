"""ansible.cfg: the settings a deploy's cost per host rests on (docs/operations.md, "Deploying
at scale"). Each is a protection of that cost: taking one away makes every host-task dearer."""

from __future__ import annotations

import configparser
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def settings() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    config.read(REPO / "ansible.cfg")
    return config


def test_modules_run_through_ssh_without_temporary_files() -> None:
    """pipelining: one SSH exchange per module, not a copy, a run and a cleanup."""
    assert settings().getboolean("ssh_connection", "pipelining")


def test_ssh_connections_are_kept_open_between_tasks() -> None:
    args = settings().get("ssh_connection", "ssh_args").split()
    assert "ControlMaster=auto" in args
    assert any(arg.startswith("ControlPersist=") and arg != "ControlPersist=no" for arg in args)


def test_facts_are_gathered_only_where_a_play_asks() -> None:
    assert settings().get("defaults", "gathering") == "explicit"


def test_facts_stay_under_ansible_facts() -> None:
    """Injected as variables too, every fact is one more variable for every task of the host."""
    assert settings().getboolean("defaults", "inject_facts_as_vars") is False


def test_the_playbooks_gather_only_the_service_manager_facts() -> None:
    import yaml

    for playbook in ("site.yml", "teardown.yml", "upgrade.yml"):
        plays = yaml.safe_load((REPO / "playbooks" / playbook).read_text(encoding="utf-8"))
        subsets = [play["gather_subset"] for play in plays if play.get("gather_facts")]
        assert subsets and all(subset == ["!all", "!min", "service_mgr"] for subset in subsets), playbook


def test_the_main_process_does_not_poll_its_workers_a_thousand_times_a_second() -> None:
    """Ansible's default 0.001 s cost the main process about 0.02 CPU-s per second of a deploy."""
    assert 0.005 <= settings().getfloat("defaults", "internal_poll_interval") <= 0.05


def test_the_roles_find_the_collection_they_name_their_plugins_from() -> None:
    """The roles name their modules and plugins cluster_cli.slurm.NAME: the collections path holds a
    link to the repository root under that name, and no plugin folder is configured beside it."""
    assert settings().get("defaults", "collections_path") == "collections"
    link = REPO / "collections" / "ansible_collections" / "cluster_cli" / "slurm"
    assert link.is_symlink() and link.resolve() == REPO.resolve()
    assert (link / "plugins" / "lookup" / "role_template.py").is_file()
    for setting in ("library", "action_plugins", "filter_plugins", "lookup_plugins"):
        assert not settings().has_option("defaults", setting), setting
