"""The container tools of training/ (docs/containers.md): launch.sh's `srun --container`, the bundle
a user makes from an image (container_bundle.py, run for real with runc where it is installed) and
the image's content key (container_image.py; the build itself runs in tests/deploy/test_50_smoke.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import container_bundle
import container_image

LAUNCH = Path(__file__).resolve().parents[2] / "training" / "launch.sh"
BUSYBOX = Path("/bin/busybox")
# srun and scontrol stand-ins: srun_torchrun's command line is what the test reads.
STAND_INS = """
scontrol() { echo node1; }
srun() { echo "srun $*"; }
"""


def _srun_line(**env: str) -> str:
    done = subprocess.run(
        ["bash", "-c", f'set -euo pipefail; source "{LAUNCH}"\n{STAND_INS}\nsrun_torchrun ddp.py --steps 1'],
        capture_output=True, text=True, timeout=30, check=True,
        env={"PATH": "/usr/bin:/bin", "SLURM_JOB_ID": "7", "SLURM_NNODES": "2", "SLURM_JOB_NODELIST": "node[1-2]",
             "RDZV_PORT": "29500", "SLURM_SUBMIT_DIR": "/tmp", **env},
    )
    return next(line for line in done.stdout.splitlines() if line.startswith("srun "))


def test_launch_runs_each_agent_in_the_bundle_only_where_one_is_given():
    assert "--container=/w/bundle" in _srun_line(CONTAINER_BUNDLE="/w/bundle").split()
    assert "--container" not in _srun_line()


def _image(tmp_path: Path) -> Path:
    """A small root filesystem: busybox as /bin/sh, a non-empty /usr and /opt, an empty /home."""
    image = tmp_path / "image"
    for name in ("bin", "usr/share", "opt/env", "home", "srv/work", "etc", "dev", "proc", "sys", "tmp", "root"):
        (image / name).mkdir(parents=True)
    (image / "usr/share/marker").write_text("from the image\n")
    (image / "opt/env/python").write_text("#!/bin/sh\n")
    (image / "lib").symlink_to("usr/lib")
    if BUSYBOX.exists():
        shutil.copy2(BUSYBOX, image / "bin" / "busybox")
        for applet in ("sh", "cat", "ls", "touch", "id"):
            (image / "bin" / applet).symlink_to("busybox")
    return image


def test_the_bundle_is_a_skeleton_of_the_image_with_its_directories_bound_read_only(tmp_path: Path):
    image = _image(tmp_path)
    rootfs = tmp_path / "bundle" / "rootfs"
    rootfs.parent.mkdir()
    binds = container_bundle.skeleton(image, rootfs)
    assert os.readlink(rootfs / "lib") == "usr/lib" and (rootfs / "usr").is_dir() and not any((rootfs / "usr").iterdir())
    bound = {mount["destination"]: mount for mount in binds}
    # runc's own (dev, proc, sys, tmp) and the empty /home are not bound: the user's skeleton takes mount points
    assert sorted(bound) == ["/bin", "/opt", "/srv", "/usr"]
    assert all("ro" in mount["options"] and mount["source"].startswith(str(image)) for mount in binds)


def test_a_bind_under_an_image_directory_needs_its_mount_point_in_the_image(tmp_path: Path):
    image = _image(tmp_path)
    rootfs = tmp_path / "rootfs"
    binds = container_bundle.skeleton(image, rootfs)
    container_bundle.check_bind_points(image, ["/srv/work", "/home/someone"], binds)  # in the image; in the skeleton
    with pytest.raises(container_bundle.BundleError, match="container_image.py --mount-point /opt/data"):
        container_bundle.check_bind_points(image, ["/opt/data"], binds)


def test_a_bundle_directory_of_another_user_is_refused(tmp_path: Path):
    if os.geteuid() != 0:
        pytest.skip("needs root to make a directory another user owns")
    image = _image(tmp_path)
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, 65534, 65534)
    with pytest.raises(container_bundle.BundleError, match="not yours"):
        container_bundle.make_bundle(image, theirs, [], [])
    assert not (theirs / "config.json").exists()


def test_a_rootfs_with_files_of_its_own_is_not_replaced(tmp_path: Path):
    image = _image(tmp_path)
    bundle = tmp_path / "bundle"
    container_bundle.make_bundle(image, bundle, [], [], runtime=_runtime())  # a skeleton: replaced on a second run
    container_bundle.make_bundle(image, bundle, [], [], runtime=_runtime())
    (bundle / "rootfs" / "usr" / "my-results.txt").write_text("not the bundle's\n")
    with pytest.raises(container_bundle.BundleError, match="holds usr"):
        container_bundle.make_bundle(image, bundle, [], [], runtime=_runtime())
    assert (bundle / "rootfs" / "usr" / "my-results.txt").exists()


def _runtime() -> str:
    if shutil.which("runc") is None:
        pytest.skip("needs runc (Debian package runc): its rootless spec")
    return "runc"


def test_runc_runs_the_bundle_with_the_binds_and_devices_and_a_read_only_image(tmp_path: Path):
    """Real runc, rootless: the image's file is there, the bound work directory is writable, the
    image is not, the device file is there, and the host's name is the container's."""
    if shutil.which("runc") is None or not BUSYBOX.exists():
        pytest.skip("needs runc and busybox-static (Debian packages runc, busybox-static)")
    image = _image(tmp_path)
    work = tmp_path / "work"
    work.mkdir(mode=0o777)
    bundle = container_bundle.make_bundle(image, tmp_path / "bundle", [str(work)], ["/dev/nul[l]"])
    config = json.loads((bundle / "config.json").read_text())
    config["process"]["args"] = [
        "/bin/sh", "-c",
        f"cat /usr/share/marker && touch {work}/made && ls /dev/null && (touch /usr/x 2>/dev/null && echo image-writable"
        " || echo image-read-only) && cat /proc/sys/kernel/hostname && pwd",
    ]
    (bundle / "config.json").write_text(json.dumps(config))
    done = subprocess.run(
        ["runc", "--rootless=true", f"--root={tmp_path / 'state'}", "run", "-b", str(bundle), f"t{os.getpid()}"],
        capture_output=True, text=True, timeout=60, check=False,
    )
    if done.returncode != 0 and "unprivileged" in done.stderr + done.stdout:
        pytest.skip(f"this host cannot run rootless containers: {done.stderr.strip()[-300:]}")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "from the image" and (work / "made").exists()
    assert lines[1:] == ["/dev/null", "image-read-only", os.uname().nodename, str(work)]


OCI_RUN = Path(__file__).resolve().parents[2] / "roles" / "slurmd" / "files" / "cluster-cli-oci-run"


def test_one_bundle_runs_on_a_node_whose_gpu_files_differ_from_its_makers(tmp_path: Path):
    """Real runc, through the cluster's RunTimeRun program: the bundle was made where GPU file
    ``gpu1`` existed (another kind of node); on this node, whose gres.conf names ``gpu0``, runc alone
    refuses to start it, and the program makes the step's copy start with this node's file instead."""
    if shutil.which("runc") is None or not BUSYBOX.exists():
        pytest.skip("needs runc and busybox-static (Debian packages runc, busybox-static)")
    devices = tmp_path / "gpus"
    devices.mkdir()
    for name in ("gpu0", "gpu1"):
        (devices / name).write_text(name)
    bundle = container_bundle.make_bundle(_image(tmp_path), tmp_path / "bundle", [], [str(devices / "gpu1")])
    (devices / "gpu1").unlink()
    config = json.loads((bundle / "config.json").read_text())
    config["process"]["args"] = ["/bin/sh", "-c", f"ls {devices}; echo $SLURMD_NODENAME"]
    (bundle / "config.json").write_text(json.dumps(config))
    gres = tmp_path / "gres.conf"
    gres.write_text(f"NodeName=node1 Name=gpu File={devices}/gpu0\nNodeName=node2 Name=gpu File={devices}/gpu1\n")
    runc = ["runc", "--rootless=true", f"--root={tmp_path / 'state'}", "run", "-b", str(bundle), f"t{os.getpid()}"]
    alone = subprocess.run(runc, capture_output=True, text=True, timeout=60, check=False)
    if alone.returncode != 0 and "unprivileged" in alone.stderr + alone.stdout:
        pytest.skip(f"this host cannot run rootless containers: {alone.stderr.strip()[-300:]}")
    assert alone.returncode != 0 and "gpu1" in alone.stderr
    done = subprocess.run(
        [str(OCI_RUN), "--bundle", str(bundle), "--node", "node1", "--gres-conf", str(gres), "--", *runc],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["gpu0", "node1"]


def test_the_image_key_follows_the_environment_and_the_mount_points(tmp_path: Path):
    venv = tmp_path / "venv"
    site = venv / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.2\n")
    (site / "torch-2.13.0+cpu.dist-info").mkdir()
    key = container_image.image_key("bookworm", "http://deb.debian.org/debian", venv, ["/srv/w"])
    assert key == container_image.image_key("bookworm", "http://deb.debian.org/debian", venv, ["/srv/w"])
    assert key != container_image.image_key("bookworm", "http://deb.debian.org/debian", venv, ["/srv/x"])
    assert key != container_image.image_key("trixie", "http://deb.debian.org/debian", venv, ["/srv/w"])
    (site / "torch-2.13.0+cpu.dist-info").rename(site / "torch-2.14.0+cpu.dist-info")
    assert key != container_image.image_key("bookworm", "http://deb.debian.org/debian", venv, ["/srv/w"])


def test_the_mirror_is_the_hosts_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    real_path = Path

    def fake(path: str = "", *rest: str) -> Path:
        return real_path(str(tmp_path) + path, *rest) if path.startswith("/etc/apt") else real_path(path, *rest)

    (tmp_path / "etc/apt/sources.list.d").mkdir(parents=True)
    (tmp_path / "etc/apt/sources.list.d/debian.sources").write_text(
        "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n\n"
        "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n"
    )
    monkeypatch.setattr(container_image, "Path", fake)
    assert container_image.host_mirror() == "http://mirror.example/debian"
