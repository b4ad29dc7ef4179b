"""roles/storage_client run for real with ansible-playbook on localhost.

On the path of a host without systemd (this machine's): a real tmpfs mount from the role's
/etc/fstab block (a file of the test's here), its mount point made with the inventory's mode, a
second run that changes nothing, a mount that left the inventory and is still used (a process's
working directory in it) kept mounted with its line while the host fails naming it, and taken down
once nothing uses it, its unit removed, the fstab's other lines untouched; a unit without the
marker never touched; teardown. On the systemd path, against a stub systemctl that keeps each
unit's state: reload, start and enable, the automount, idempotence, a removed mount's units
stopped, disabled and removed. Needs root (mount)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from role_runner import HOST, PlaybookRun, ansible_playbook, is_root, run_play, systemctl_stub

from cluster_cli.render.mount_units import UNIT_MARKER

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="mounts need root"),
]

OTHER_LINE = "proc /proc proc defaults 0 0\n"


def _mounted(path: Path) -> bool:
    return subprocess.run(["findmnt", "-rn", "--mountpoint", str(path)], capture_output=True, check=False).returncode == 0


@pytest.fixture
def root(tmp_path: Path):
    (tmp_path / "units-src").mkdir()
    (tmp_path / "units").mkdir()
    (tmp_path / "fstab").write_text(OTHER_LINE)
    yield tmp_path
    for path in sorted(tmp_path.glob("mnt/*"), reverse=True):
        if _mounted(path):
            subprocess.run(["umount", "-l", str(path)], check=False)


def _mount(root: Path, name: str, **settings: Any) -> dict[str, Any]:
    path = root / "mnt" / name
    unit = f"{name}.mount"
    (root / "units-src" / unit).write_text(f"{UNIT_MARKER}\n[Mount]\nWhere={path}\nWhat=tmpfs\nType=tmpfs\n")
    return {"path": str(path), "hosts_group": f"storage_mount_{name}", "unit": unit, "automount_unit": "",
            "packages": [], "fstab": f"tmpfs {path} tmpfs size=1m,nofail 0 0",
            "owner": "root", "group": "root", "mode": "0750", **settings}


def _deploy(root: Path, mounts: list[dict[str, Any]], entry: str = "main") -> PlaybookRun:
    tasks = [{"name": "storage_client", "ansible.builtin.include_role": {"name": "storage_client", "tasks_from": entry}}]
    groups = {mount["hosts_group"]: [HOST] for mount in mounts}
    extra = {
        "cluster_service_manager": "standalone",
        "storage_client_mounts": mounts,
        "storage_client_units_src": str(root / "units-src"),
        "storage_client_units_dir": str(root / "units"),
        "__storage_client_fstab": str(root / "fstab"),
    }
    work = root / f"work-{len(list(root.glob('work-*')))}"
    return run_play(work, {"name": "storage", "tasks": tasks}, {HOST: {}}, extra, groups=groups or None)


def test_a_mount_is_made_mounted_and_left_alone_the_second_time(root: Path) -> None:
    mount = _mount(root, "work")
    first = _deploy(root, [mount])
    assert first.returncode == 0, first.explain()
    assert _mounted(root / "mnt" / "work")
    fstab = (root / "fstab").read_text()
    assert fstab.startswith(OTHER_LINE)
    assert f"# BEGIN cluster-cli storage.mounts\n{mount['fstab']}\n# END cluster-cli storage.mounts\n" in fstab
    assert (root / "units" / "work.mount").read_text().startswith(UNIT_MARKER)
    again = _deploy(root, [mount])
    assert again.returncode == 0, again.explain()
    assert again.recap()["changed"] == 0, again.explain()


def test_the_mount_point_gets_the_inventorys_owner_and_mode(root: Path) -> None:
    mount = _mount(root, "data", mode="0710")
    run = _deploy(root, [mount])
    assert run.returncode == 0, run.explain()
    subprocess.run(["umount", mount["path"]], check=True)
    assert oct(Path(mount["path"]).stat().st_mode & 0o7777) == "0o710"


def test_a_removed_mount_in_use_stays_mounted_and_fails_the_host_until_nothing_uses_it(root: Path) -> None:
    kept, gone = _mount(root, "kept"), _mount(root, "gone")
    assert _deploy(root, [kept, gone]).returncode == 0
    user = subprocess.Popen(["sleep", "300"], cwd=gone["path"])
    try:
        busy = _deploy(root, [kept])
        assert busy.returncode != 0
        assert f"{HOST}: {gone['path']} left storage.mounts but processes use it" in busy.text, busy.explain()
        assert _mounted(Path(gone["path"]))
        assert gone["fstab"] in (root / "fstab").read_text()
        assert (root / "units" / "gone.mount").exists()
    finally:
        user.kill()
        user.wait()
    freed = _deploy(root, [kept])
    assert freed.returncode == 0, freed.explain()
    assert not _mounted(Path(gone["path"]))
    assert _mounted(Path(kept["path"]))
    assert gone["fstab"] not in (root / "fstab").read_text()
    assert not (root / "units" / "gone.mount").exists()
    assert (root / "units" / "kept.mount").exists()


def test_a_unit_without_the_marker_is_never_touched(root: Path) -> None:
    foreign = root / "units" / "site.mount"
    foreign.write_text("[Mount]\nWhere=/site\n")
    assert _deploy(root, []).returncode == 0
    assert foreign.exists()


def test_teardown_takes_every_mount_down_and_removes_its_units(root: Path) -> None:
    mount = _mount(root, "work")
    assert _deploy(root, [mount]).returncode == 0
    down = _deploy(root, [mount], entry="teardown")
    assert down.returncode == 0, down.explain()
    assert not _mounted(Path(mount["path"]))
    assert not (root / "units" / "work.mount").exists()
    assert (root / "fstab").read_text() == OTHER_LINE


def _systemd_deploy(root: Path, mounts: list[dict[str, Any]]) -> PlaybookRun:
    stub = systemctl_stub(root / "bin", root / "systemd")
    tasks = [{"name": "storage_client", "ansible.builtin.include_role": {"name": "storage_client"}}]
    extra = {"cluster_service_manager": "systemd", "storage_client_mounts": mounts,
             "storage_client_units_src": str(root / "units-src"), "storage_client_units_dir": str(root / "units")}
    work = root / f"work-{len(list(root.glob('work-*')))}"
    env = {"PATH": f"{stub.parent}{os.pathsep}{os.environ['PATH']}"}
    return run_play(work, {"name": "storage", "tasks": tasks}, {HOST: {}}, extra, env=env,
                    groups={mount["hosts_group"]: [HOST] for mount in mounts} or None)


def test_under_systemd_units_are_reloaded_started_and_enabled_and_a_removed_one_disabled(root: Path) -> None:
    home = _mount(root, "home")
    data = _mount(root, "data", automount_unit="data.automount")
    (root / "units-src" / "data.automount").write_text(f"{UNIT_MARKER}\n[Automount]\nWhere={data['path']}\n")
    run = _systemd_deploy(root, [home, data])
    assert run.returncode == 0, run.explain()
    state = root / "systemd"
    log = (state / "log").read_text().splitlines()
    assert "daemon-reload" in log
    # the automounted mount is started by its .automount unit, not at boot
    assert {p.name for p in state.glob("enabled.*")} == {"enabled.home.mount", "enabled.data.automount"}
    assert {p.name for p in state.glob("active.*")} == {"active.home.mount", "active.data.automount"}
    assert sorted(p.name for p in (root / "units").iterdir()) == ["data.automount", "data.mount", "home.mount"]
    assert not (root / "fstab").read_text().count("cluster-cli"), "no fstab block under systemd"
    again = _systemd_deploy(root, [home, data])
    assert again.returncode == 0 and again.recap()["changed"] == 0, again.explain()
    gone = _systemd_deploy(root, [home])
    assert gone.returncode == 0, gone.explain()
    assert {p.name for p in state.glob("enabled.*")} == {"enabled.home.mount"}
    assert sorted(p.name for p in (root / "units").iterdir()) == ["home.mount"]
