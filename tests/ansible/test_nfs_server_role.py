"""roles/nfs_server run for real with ansible-playbook on localhost (as root).

This machine's kernel has no NFS server (no nfsd), but Debian's exportfs runs without one: it
parses the exports and writes them to /var/lib/nfs/etab. The role's exportfs here is the real one,
run through a wrapper in a mount namespace of its own whose /etc/exports is the file the role
wrote and whose /var/lib/nfs is the test's directory (the host's own exports and state are never touched). So: the rendered exports
file written and applied by exportfs's own parser (root_squash and sync in what it applied), the
exported directories and a managed user's home made with their owner and mode, a second run that
changes nothing, a broken exports file failing the host with exportfs's file:line; without systemd
the run stops at the kernel's missing nfsd, naming it; under systemd (a stub systemctl) the
nfs-server unit started, enabled and waited for."""

from __future__ import annotations

import os
import re
import shutil
import socket
from pathlib import Path
from typing import Any

import pytest
from role_runner import HOST, PlaybookRun, ansible_playbook, is_root, run_play, systemctl_stub

EXPORTFS = shutil.which("exportfs") or "/usr/sbin/exportfs"

pytestmark = [
    pytest.mark.skipif(ansible_playbook() is None, reason="ansible-playbook is not installed"),
    pytest.mark.skipif(not is_root(), reason="the role makes directories for other owners; the wrapper needs mounts"),
    pytest.mark.skipif(not Path(EXPORTFS).is_file() or not Path("/var/lib/nfs").is_dir() or not Path("/etc/exports").is_file(),
                       reason="exportfs is not installed (apt-get install nfs-kernel-server)"),
    pytest.mark.skipif(shutil.which("unshare") is None, reason="unshare (util-linux) is not installed"),
]

# exportfs in a mount namespace of its own: the file the role wrote as /etc/exports (the host's own
# /etc/exports.d may not exist: nothing is bound there), the test's state as /var/lib/nfs
EXPORTFS_WRAPPER = """#!/bin/sh
exec unshare -m sh -c 'mount --bind ROOT/exports.d/cluster-cli.exports /etc/exports \\
  && mount --bind ROOT/nfs-state /var/lib/nfs && exec EXPORTFS "$@"' exportfs "$@"
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    for name in ("exports.d", "nfs-state", "bin", "src"):
        (tmp_path / name).mkdir()
    for name in ("etab", "rmtab"):
        (tmp_path / "nfs-state" / name).write_text("")
    wrapper = tmp_path / "bin" / "exportfs"
    wrapper.write_text(EXPORTFS_WRAPPER.replace("ROOT", str(tmp_path)).replace("EXPORTFS", EXPORTFS))
    wrapper.chmod(0o755)
    return tmp_path


def _exports(root: Path, lines: list[str]) -> Path:
    src = root / "src" / "cluster-cli.exports"
    src.write_text("# cluster-cli\n" + "".join(f"{line}\n" for line in lines))
    return src


def _settings(root: Path, **overrides: Any) -> dict[str, Any]:
    home = root / "srv" / "home"
    shared = root / "srv" / "shared"
    options = "(rw,sync,root_squash,no_subtree_check)"
    src = _exports(root, [f"{home} \\", f"    10.0.0.1{options} \\", f"    10.0.1.0/24{options}",
                          f"{shared} 10.0.0.1{options}"])
    return {
        "nfs_server_exports": [{"path": str(home), "owner": "root", "group": "root", "mode": "0755"},
                               {"path": str(shared), "owner": "root", "group": "root", "mode": "1777"}],
        "nfs_server_exports_src": str(src),
        "nfs_server_exports_file": str(root / "exports.d" / "cluster-cli.exports"),
        # a user that exists on this machine stands for a managed one (roles/common makes those first)
        "nfs_server_homes": [{"path": str(home / "alice"), "owner": "daemon", "group": "daemon", "mode": "0700"}],
        # and one for the test user (training.work_dir in the work area)
        "nfs_server_work_dirs": [{"path": str(shared / "cluster-training"), "owner": "daemon", "group": "daemon",
                                  "mode": "0755"}],
        **overrides,
    }


def _deploy(root: Path, settings: dict[str, Any], manager: str = "standalone", env: dict[str, str] | None = None,
            entry: str = "main") -> PlaybookRun:
    tasks = [{"name": "nfs_server", "ansible.builtin.include_role": {"name": "nfs_server", "tasks_from": entry}}]
    path = {"PATH": f"{root / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    work = root / f"work-{len(list(root.glob('work-*')))}"
    return run_play(work, {"name": "nfs", "tasks": tasks}, {HOST: {}},
                    {"cluster_service_manager": manager, **settings}, env={**path, **(env or {})})


def _mode(path: Path) -> str:
    return oct(path.stat().st_mode & 0o7777)


def test_exports_are_written_applied_by_exportfs_and_the_run_stops_at_the_missing_kernel_server(root: Path) -> None:
    if "nfsd" in Path("/proc/filesystems").read_text():
        pytest.skip("this kernel has an NFS server: the run would start it (not this test's machine)")
    settings = _settings(root)
    run = _deploy(root, settings)
    # configure did everything; run stops at the kernel, naming what is missing
    assert run.returncode != 0
    assert "this host's kernel has no NFS server" in run.text, run.explain()
    written = Path(settings["nfs_server_exports_file"])
    assert written.read_text() == Path(settings["nfs_server_exports_src"]).read_text()
    etab = (root / "nfs-state" / "etab").read_text().splitlines()
    home = str(root / "srv" / "home")
    applied = [line for line in etab if line.startswith(f"{home}\t")]
    assert {line.split("\t")[1].split("(")[0] for line in applied} == {"10.0.0.1", "10.0.1.0/24"}, etab
    assert all(",root_squash," in line and "(rw,sync," in line for line in etab), etab
    assert _mode(root / "srv" / "home") == "0o755"
    assert _mode(root / "srv" / "shared") == "0o1777"
    alice = root / "srv" / "home" / "alice"
    assert _mode(alice) == "0o700"
    assert (alice.stat().st_uid, alice.stat().st_gid) == (1, 1)  # daemon:daemon
    work = root / "srv" / "shared" / "cluster-training"
    assert (_mode(work), work.stat().st_uid, work.stat().st_gid) == ("0o755", 1, 1)


def test_a_second_run_changes_nothing_up_to_the_kernel(root: Path) -> None:
    settings = _settings(root)
    first = _deploy(root, settings)
    assert first.recap()["changed"] > 0, first.explain()
    again = _deploy(root, settings)
    assert again.recap()["changed"] == 0, again.explain()


def test_an_existing_export_keeps_its_mode_and_an_existing_home_is_made_private_and_its_users(root: Path) -> None:
    shared = root / "srv" / "shared"
    shared.mkdir(parents=True)
    shared.chmod(0o750)
    # as useradd --create-home left it on the server in roles/common (Debian's UMASK 022)
    alice = root / "srv" / "home" / "alice"
    alice.mkdir(parents=True)
    alice.chmod(0o755)
    work = shared / "cluster-training"
    work.mkdir()
    work.chmod(0o700)  # the site's: left as it is
    _deploy(root, _settings(root))
    assert _mode(shared) == "0o750"
    assert (_mode(work), work.stat().st_uid) == ("0o700", 0)
    assert _mode(alice) == "0o700"
    assert (alice.stat().st_uid, alice.stat().st_gid) == (1, 1)


def test_exportfs_refuses_a_broken_exports_file_at_its_line(root: Path) -> None:
    settings = _settings(root)
    src = _exports(root, [f"{root / 'srv' / 'home'} 10.0.0.1(rw,sync,bogus_option)"])
    run = _deploy(root, {**settings, "nfs_server_exports_src": str(src)})
    assert run.returncode != 0
    # exportfs's own message, its file and line (its count skips the comments above the entry)
    assert re.search(r'exportfs: /etc/exports:\d+: unknown keyword "bogus_option"', run.text), run.explain()


def test_under_systemd_the_nfs_server_unit_is_started_enabled_and_waited_for(root: Path) -> None:
    state = root / "systemd"
    systemctl_stub(root / "bin", state)
    with socket.socket() as listener:  # stands for the kernel's server on its port
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        settings = _settings(root, nfs_server_port=listener.getsockname()[1], nfs_server_wait_timeout=5)
        run = _deploy(root, settings, manager="systemd")
        assert run.returncode == 0, run.explain()
        assert {path.name for path in state.glob("*.nfs-server*")} == {"active.nfs-server", "enabled.nfs-server"}
        again = _deploy(root, settings, manager="systemd")
        assert again.returncode == 0 and again.recap()["changed"] == 0, again.explain()
    assert Path(settings["nfs_server_exports_file"]).is_file()
    # teardown (playbooks/teardown.yml, after the clients unmounted): stopped and disabled, the files kept
    down = _deploy(root, settings, manager="systemd", entry="teardown")
    assert down.returncode == 0, down.explain()
    assert not list(state.glob("*.nfs-server*")), sorted(path.name for path in state.iterdir())
    assert Path(settings["nfs_server_exports_file"]).is_file() and (root / "srv" / "home" / "alice").is_dir()


def test_without_systemd_teardown_stops_nothing_where_no_server_runs(root: Path) -> None:
    """This kernel has no nfsd: no rpc.mountd runs and no thread count to set; teardown changes nothing."""
    down = _deploy(root, _settings(root), entry="teardown")
    assert down.returncode == 0 and down.recap()["changed"] == 0, down.explain()
