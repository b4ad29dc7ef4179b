"""cluster_cli.ansible.forks: ansible-playbook's forks from the control node's cores and memory."""

from __future__ import annotations

from pathlib import Path

from cluster_cli.ansible.forks import MAX_FORKS, MIN_FORKS, available_mib, forks_environment, sized_forks


def test_eight_workers_per_core_for_a_big_cluster() -> None:
    assert sized_forks(1000, 16, 64 * 1024) == 128
    assert sized_forks(1000, 2, 24 * 1024) == 16


def test_never_more_workers_than_hosts_nor_fewer_than_ansibles_default() -> None:
    assert sized_forks(3, 16, 64 * 1024) == MIN_FORKS
    assert sized_forks(12, 16, 64 * 1024) == 12


def test_memory_caps_the_workers_at_half_of_what_is_available() -> None:
    assert sized_forks(1000, 64, 2 * 1024) == 2 * 1024 // 2 // 60
    assert sized_forks(10_000, 128, None) == MAX_FORKS


def test_the_users_ansible_forks_wins() -> None:
    assert forks_environment(1000, {"ANSIBLE_FORKS": "7"}) == {}
    assert int(forks_environment(1000, {})["ANSIBLE_FORKS"]) >= MIN_FORKS


def test_available_memory_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24576000 kB\nMemAvailable:   2097152 kB\n")
    assert available_mib(str(meminfo)) == 2048
    assert available_mib(str(tmp_path / "missing")) is None
