"""Container jobs as inventory data (cluster_cli/containers.py): oci.conf, the runtime's package on
compute and login hosts, and the refusals at file:line."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml
from unit_helpers import BASE, REPO, SHIPPED_INVENTORIES, load, problem, problems

from cluster_cli.ansible.variables import cluster_variables
from cluster_cli.bundle.packages import debian_packages
from cluster_cli.containers import OCI_CONF_KEYS, OCI_RUN_PROGRAM, container_images
from cluster_cli.host_files import files_by_host
from cluster_cli.loader import load_cluster
from cluster_cli.render import render_configs
from cluster_cli.render.oci_conf import render_oci_conf
from cluster_cli.secrets_store import ClusterSecrets

ON = "containers:\n  enabled: true\n"
OCI_CONF_HTML = Path("/usr/share/doc/slurm-wlm/html/oci.conf.html")


def _variables(text: str, tmp_path: Path) -> dict:
    secrets = tmp_path / "secrets"
    return cluster_variables(load(text), tmp_path, ClusterSecrets(secrets, secrets / "munge.key", secrets / "db"))


def test_off_by_default_no_oci_conf_no_runtime(tmp_path: Path) -> None:
    cluster = load(BASE)
    assert render_oci_conf(cluster) is None
    assert "slurm/oci.conf" not in {item.path for item in render_configs(cluster, None)}
    variables = _variables(BASE, tmp_path)
    assert variables["slurmd_container_packages"] == variables["login_container_packages"] == []
    assert "runc" not in debian_packages(cluster)


def test_on_runc_rootless_in_the_steps_own_directory_on_compute_and_login_hosts(tmp_path: Path) -> None:
    cluster = load(BASE + ON)
    text = render_oci_conf(cluster)
    assert text is not None
    lines = dict(line.split("=", 1) for line in text.splitlines() if not line.startswith("#"))
    as_user = "[ $(id -u) != 0 ] || exec setpriv --reuid=%u --regid=$(id -g %u) --init-groups {0}; exec {0}"
    # as root (22.05's end of a step), after the delete: the empty cgroup directories and %b a cancelled step leaves
    delete = ("[ $(id -u) != 0 ] || { setpriv --reuid=%u --regid=$(id -g %u) --init-groups {0}; status=$?; "
              "for job in /sys/fs/cgroup/*/slurm_%n/uid_$(id -u %u)/job_%j; do rmdir $job/step_%s/task_* $job/step_%s "
              "$job $(dirname $job) 2>/dev/null; done; rmdir %b 2>/dev/null; exit $status; }; exec {0}")
    runc = "runc --rootless=true --root=%b"
    assert lines == {
        "RunTimeDelete": '"' + delete.replace("{0}", f"{runc} delete --force %n.%u.%j.%s.%t") + '"',
        "RunTimeKill": '"' + as_user.format(f"{runc} kill -a %n.%u.%j.%s.%t") + '"',
        "RunTimeQuery": '"' + as_user.format(f"{runc} state %n.%u.%j.%s.%t") + '"',
        "RunTimeRun": f'"{OCI_RUN_PROGRAM} --bundle %b --node %n --gres-conf /etc/slurm/gres.conf --gpu-env -- '
                      f'{runc} run %n.%u.%j.%s.%t -b %b"',
    }
    # never a state directory another user can make first (Slurm's examples use /tmp)
    assert "/tmp" not in text
    variables = _variables(BASE + ON, tmp_path)
    assert variables["slurmd_container_packages"] == variables["login_container_packages"] == ["runc"]
    assert "runc" in debian_packages(cluster)


def _run_line(text: str) -> str:
    rendered = render_oci_conf(load(text)) or ""
    return next(line for line in rendered.splitlines() if line.startswith("RunTimeRun="))


def test_the_container_start_reads_the_gres_conf_its_nodes_slurmd_reads() -> None:
    """Configless: each slurmd's copy in its spool directory (%n is the node in oci.conf as in slurm.conf)."""
    assert " --gres-conf /var/lib/slurm/slurmd/%n/conf-cache/gres.conf " in _run_line(BASE + ON + "slurm:\n  configless: true\n")
    assert " --gres-conf /etc/slurm/gres.conf " in _run_line(BASE + ON)


@pytest.mark.parametrize("extra", ["cgroup:\n  overrides:\n    ConstrainDevices: false\n",
                                   "slurm:\n  conf:\n    TaskPlugin: task/affinity\n"])
def test_gpu_variables_only_where_tasks_get_local_gpu_indices(extra: str) -> None:
    """Without task/cgroup and ConstrainDevices=yes Slurm gives global indices, which the program cannot know."""
    assert " --gpu-env " in _run_line(BASE + ON)
    assert " --gpu-env " not in _run_line(BASE + ON + extra)


def test_the_role_installs_the_program_where_oci_conf_starts_it() -> None:
    role_vars = yaml.safe_load((REPO / "roles" / "slurmd" / "vars" / "main.yml").read_text(encoding="utf-8"))
    assert role_vars["__slurmd_oci_run_program"] == OCI_RUN_PROGRAM


def test_every_host_holds_oci_conf_where_containers_are_on_and_none_where_off() -> None:
    for text, wanted in ((BASE + ON, True), (BASE, False)):
        cluster = load(text)
        rendered = {item.path: item.content for item in render_configs(cluster, None)}
        for host, files in files_by_host(cluster, rendered, b"key").items():
            oci = [item for item in files if item.path == "/etc/slurm/oci.conf"]
            assert len(oci) == 1, host
            assert (oci[0].sha256 is not None) is wanted, host  # None: the host must not have it


def test_overrides_are_merged_and_quoted() -> None:
    text = BASE + ON + "  oci_conf:\n    runtimerun: null\n    RunTimeCreate: runc create %n -b %b\n    CreateEnvFile: true\n"
    rendered = render_oci_conf(load(text)) or ""
    assert 'RunTimeCreate="runc create %n -b %b"' in rendered and 'CreateEnvFile="true"' in rendered
    assert "RunTimeRun" not in rendered


def test_an_oci_conf_key_the_series_does_not_know_is_refused_at_its_line() -> None:
    text = BASE + ON + "  oci_conf:\n    EnvExclude: '^SLURM_CONF='\n"
    assert problems(text) == [problem(text, "EnvExclude: '^SLURM_CONF='", "containers.oci_conf.EnvExclude",
                                      "not a oci.conf key of Slurm 22.05 (oci.conf(5))")]
    # 24.11 has it
    assert problems(text + "slurm:\n  version: 24.11.5-4+deb13u1\n") == []
    typo = BASE + ON + "  oci_conf:\n    RunTimeRunn: runc run\n"
    assert problems(typo) == [problem(typo, "RunTimeRunn: runc run", "containers.oci_conf.RunTimeRunn",
                                      "not a oci.conf key of Slurm 22.05 (oci.conf(5)): did you mean RunTimeRun?")]


def test_an_unknown_runtime_a_quote_and_a_repeated_key_are_refused_at_their_lines() -> None:
    runtime = BASE + ON + "  runtime: docker\n"
    assert problems(runtime) == [problem(runtime, "runtime: docker", "containers.runtime", "Input should be 'runc'")]
    quoted = BASE + ON + "  oci_conf:\n    RunTimeRun: 'runc run \"x\"'\n"
    assert len(problems(quoted)) == 1 and "cannot hold '\"'" in problems(quoted)[0]
    assert problems(quoted)[0].startswith(problem(quoted, "RunTimeRun: 'runc run", "containers.oci_conf.RunTimeRun", ""))
    repeated = BASE + ON + "  oci_conf:\n    RunTimeRun: a\n    runtimerun: b\n"
    assert problems(repeated) == [problem(repeated, "runtimerun: b", "containers.oci_conf.runtimerun",
                                          "the same key as 'RunTimeRun': Slurm ignores case in keys")]


def test_an_image_path_must_be_absolute() -> None:
    text = BASE + ON + "  image: images/training\n"
    assert len(problems(text)) == 1 and "containers.image" in problems(text)[0]


def test_the_local_cluster_runs_containers_with_an_image() -> None:
    cluster = load_cluster(SHIPPED_INVENTORIES["local"])
    assert cluster.inventory.containers.enabled
    assert cluster.inventory.containers.image == "/var/cache/cluster-cli/images/training/rootfs"


@pytest.mark.skipif(not OCI_CONF_HTML.is_file(), reason="slurm-wlm-doc is not installed (its oci.conf.html)")
def test_the_22_05_keys_are_the_installed_oci_conf_pages() -> None:
    """Debian 12's slurm-wlm-doc is 22.05's: its oci.conf(5) lists exactly these keys."""
    page = OCI_CONF_HTML.read_text(encoding="utf-8")
    if "Version 22.05" not in page:
        pytest.skip("the installed slurm-wlm-doc is not 22.05's")
    keys = {match.split("=", 1)[0] for match in re.findall(r"<dt><B>([A-Za-z]+(?:=[^<]*)?)</B>", page)}
    assert keys == set(OCI_CONF_KEYS["22.05"])


def test_the_end_of_step_commands_drop_to_the_jobs_user_when_slurmstepd_runs_them_as_root(tmp_path: Path) -> None:
    """Slurm 22.05 runs RunTimeQuery/Kill/Delete as root at the step's end: each must run runc as
    the job's user (setpriv), never as root on a state that user wrote; as the user it runs as is.
    The pattern is run by /bin/sh as Slurm runs it, with stand-ins for id, setpriv and runc."""
    text = render_oci_conf(load(BASE + ON)) or ""
    kill = next(line for line in text.splitlines() if line.startswith("RunTimeKill="))
    pattern = kill.split("=", 1)[1].strip('"').replace("%u", "alice").replace("%b", "/spool/b").replace(
        "%n.alice.%j.%s.%t", "c1")
    assert '"' not in pattern
    runs = _as_root_and_as_the_user(pattern, tmp_path, setpriv='echo "setpriv $*"', runc='echo "runc $*"')
    assert runs["0"] == (0, ["setpriv --reuid=alice --regid=5000 --init-groups runc --rootless=true --root=/spool/b"
                             " kill -a c1"])
    assert runs["5001"] == (0, ["runc --rootless=true --root=/spool/b kill -a c1"])


def _as_root_and_as_the_user(pattern: str, tmp_path: Path, **stand_ins: str) -> dict[str, tuple[int, list[str]]]:
    """``pattern`` run by /bin/sh as Slurm runs it, once as root (uid 0) and once as the job's user
    (5001): exit status and output lines of each, with stand-ins for `id` and ``stand_ins``."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {"id": 'if [ "$1" = -u ]; then echo "$FAKE_UID"; else echo 5000; fi', **stand_ins}.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    runs = {}
    for uid in ("0", "5001"):
        done = subprocess.run(["/bin/sh", "-c", pattern], capture_output=True, text=True, check=False,
                              env={"PATH": f"{bin_dir}:/usr/bin:/bin", "FAKE_UID": uid})
        runs[uid] = (done.returncode, done.stdout.splitlines())
    return runs


def test_the_delete_clears_a_cancelled_steps_leftovers_as_root_only_and_keeps_its_status(tmp_path: Path) -> None:
    """Run by /bin/sh as Slurm runs it (stand-ins for id, setpriv, runc and rmdir): as root, the
    delete as the user, then rmdir of the step's, job's and user's cgroup directories and of %b,
    the delete's exit status kept; as the user, the delete alone (it may not remove root's
    directories). Removing real leftovers: tests/deploy/test_50_smoke.py."""
    text = render_oci_conf(load(BASE + ON)) or ""
    line = next(line for line in text.splitlines() if line.startswith("RunTimeDelete="))
    pattern = (line.split("=", 1)[1].strip('"').replace("%u", "alice").replace("%b", "/spool/b")
               .replace("%n.alice.%j.%s.%t", "c1").replace("%n", "c1").replace("%j", "7").replace("%s", "0"))
    assert "%" not in pattern
    runs = _as_root_and_as_the_user(pattern, tmp_path, setpriv='echo "setpriv $*"; exit 3',
                                    runc='echo "runc $*"; exit 3', rmdir='echo "rmdir $*"')
    job = "/sys/fs/cgroup/*/slurm_c1/uid_0/job_7"  # no such cgroup here: the glob stays as written
    assert runs["0"] == (3, [
        "setpriv --reuid=alice --regid=5000 --init-groups runc --rootless=true --root=/spool/b delete --force c1",
        f"rmdir {job}/step_0/task_* {job}/step_0 {job} /sys/fs/cgroup/*/slurm_c1/uid_0",
        "rmdir /spool/b",
    ])
    assert runs["5001"] == (3, ["runc --rootless=true --root=/spool/b delete --force c1"])


def test_a_probe_looks_for_the_image_on_compute_hosts_only() -> None:
    """Steps run in it there (plan's note where it is missing: tests/unit/test_plan.py)."""
    image = "/srv/images/training/rootfs"
    inventory = load(BASE + ON + f"  image: {image}\n").inventory
    assert container_images(inventory, frozenset({"compute"})) == [image]
    assert container_images(inventory, frozenset({"login", "controller"})) == []
    assert container_images(load(BASE + ON).inventory, frozenset({"compute"})) == []
    assert container_images(load(BASE).inventory, frozenset({"compute"})) == []


def test_on_24_11_slurm_keeps_the_tasks_variables_and_the_end_of_step_goes_over_every_task() -> None:
    """Run on Slurm 24.11.5 (Debian 13): the task's CUDA_VISIBLE_DEVICES reaches the container (the
    container start must not replace it); at the step's end Slurm names only the step's directory
    (%m; %b is the user's bundle, %t -1), so Query, Kill and Delete go over its tasks' containers,
    as the user, and no 22.05 cleanup (its rmdir would name the user's bundle)."""
    pinned = BASE + ON + "slurm:\n  version: 24.11.5-4+deb13u1\n"
    assert " --gpu-env " not in _run_line(pinned)
    assert _run_line(pinned).endswith('-- runc --rootless=true --root=%b run %n.%u.%j.%s.%t -b %b"')
    rendered = render_oci_conf(load(pinned)) or ""
    lines = dict(line.split("=", 1) for line in rendered.splitlines() if not line.startswith("#"))
    as_user = "[ $(id -u) != 0 ] || exec setpriv --reuid=%u --regid=$(id -g %u) --init-groups {0}; exec {0}"
    for key, operation in (("RunTimeQuery", "state"), ("RunTimeKill", "kill"), ("RunTimeDelete", "delete")):
        program = f"{OCI_RUN_PROGRAM} --step-dir %m --end {operation} -- runc --rootless=true"
        assert lines[key] == '"' + as_user.format(program) + '"'
    assert "rmdir" not in rendered and "rmdir" in (render_oci_conf(load(BASE + ON)) or "")  # unpinned: 22.05