"""A deploy of an invalid inventory stops at validation: no SSH connection, no file touched."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import ClusterView

from testbed import Testbed
from testbed.ssh import close_masters, control_path_dir

WATCHED = "/etc/slurm /etc/munge /etc/systemd/system /etc/passwd /etc/group"


def _accepted_logins(bed: Testbed, host: str) -> int:
    """sshd's "Accepted publickey" lines, read through nsenter (not SSH, which would add one)."""
    journal = bed.exec(host, ["journalctl", "-u", "ssh.service", "-o", "cat", "--no-pager"]).stdout
    return journal.count("Accepted publickey")


def _fingerprint(bed: Testbed, host: str) -> str:
    listing = bed.exec(host, ["sh", "-c", f"find {WATCHED} -xdev -printf '%p %m %U %T@\\n' | sort | sha256sum"])
    return listing.stdout.split()[0]


def test_an_invalid_inventory_is_rejected_before_any_host_is_touched(view: ClusterView, tmp_path: Path) -> None:
    text = view.inventory_path.read_text()
    bad_text, replaced = re.subn(r"real_memory_mb: \d+", "real_memory_mb: lots", text, count=1)
    assert replaced == 1, "the scenario inventory has no real_memory_mb to break"
    bad = tmp_path / "cluster.yaml"
    bad.write_text(bad_text)
    line = next(number for number, content in enumerate(bad_text.splitlines(), 1) if "lots" in content)

    close_masters(view.bed.run_dir)  # any Ansible connection must now log in afresh
    control_path_dir(view.bed.run_dir).mkdir(mode=0o700, exist_ok=True)  # close_masters removes it
    before = {host: (_accepted_logins(view.bed, host), _fingerprint(view.bed, host)) for host in view.hosts}
    done = view.cli("deploy", "--build-dir", str(tmp_path / "build"), str(bad), check=False)
    after = {host: (_accepted_logins(view.bed, host), _fingerprint(view.bed, host)) for host in view.hosts}

    assert done.returncode == 2, done.stdout + done.stderr
    assert re.search(rf"{re.escape(str(bad))}:{line}(:\d+)?: node_groups\[0\]\.real_memory_mb: ", done.stderr), done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert not (tmp_path / "build").exists(), "the build directory was written for an invalid inventory"
    assert after == before, "a host was contacted or changed"

    # the watch is not blind: one real SSH command shows up in the count
    view.run(view.controller, "true")
    view.wait_until("sshd logged the new login",
                    lambda: _accepted_logins(view.bed, view.controller) > before[view.controller][0],
                    timeout=10, every=0.5)
