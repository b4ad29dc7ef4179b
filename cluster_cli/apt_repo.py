"""A flat apt repository (and pip wheelhouse) for hosts with no route out.

The packages and the closure of their dependencies are resolved with a private apt
configuration (its own sources, lists and cache) for the target release, so a bookworm control
node can build a trixie repository too and the machine's own apt state is never touched. The
result is a flat repository::

    <out>/Packages, Packages.gz   (dpkg-scanpackages)
    <out>/pool/*.deb

that a host reads with ``deb [trusted=yes] file:<out> ./``. Used by ``cluster-cli bundle`` and
by the test bed's mirror (testbed/mirror.py).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from cluster_cli.errors import ClusterCliError

ARCH = "amd64"
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
DEFAULT_DEBIAN_MIRROR = "http://deb.debian.org/debian"
DEFAULT_SECURITY_MIRROR = "http://deb.debian.org/debian-security"
#: The hosts' Python of each release: the wheels' ABI.
PYTHON_VERSION = {"bookworm": "3.11", "trixie": "3.13"}


class AptRepoError(ClusterCliError):
    """A command of the repository build failed, or the archive lacks a package."""


def run(argv: Sequence[str], cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` (a list, no shell); AptRepoError with the output's tail when it fails."""
    argv = [str(arg) for arg in argv]
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise AptRepoError(f"timed out after {timeout:.0f} s: {' '.join(argv)}") from None
    except FileNotFoundError:
        raise AptRepoError(f"{argv[0]} is not installed") from None
    if done.returncode != 0:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-15:])
        raise AptRepoError(f"command failed (rc={done.returncode}): {' '.join(argv)}\n{tail}")
    return done


def apt_options(root: Path) -> list[str]:
    """apt -o options that make apt use only the private state under ``root``."""
    return [
        "-o", f"Dir::Etc::SourceList={root / 'sources.list'}",
        "-o", f"Dir::Etc::SourceParts={root / 'sources.list.d'}",
        "-o", f"Dir::Etc::Preferences={root / 'preferences'}",
        "-o", f"Dir::Etc::PreferencesParts={root / 'preferences.d'}",
        "-o", f"Dir::State={root / 'state'}",
        "-o", f"Dir::State::Status={root / 'state' / 'status'}",
        "-o", f"Dir::Cache={root / 'cache'}",
        "-o", f"APT::Architecture={ARCH}",
        "-o", f"APT::Architectures={ARCH}",
        "-o", "APT::Sandbox::User=root",
        "-o", "Acquire::Languages=none",
        "-o", "Debug::NoLocking=1",
    ]  # fmt: skip


def release_sources(
    release: str, debian_mirror: str = DEFAULT_DEBIAN_MIRROR, security_mirror: str = DEFAULT_SECURITY_MIRROR
) -> list[str]:
    """The sources.list lines of a release: main, its updates and its security suite."""
    return [
        f"deb [signed-by={KEYRING}] {debian_mirror} {release} main",
        f"deb [signed-by={KEYRING}] {debian_mirror} {release}-updates main",
        f"deb [signed-by={KEYRING}] {security_mirror} {release}-security main",
    ]


def make_apt_root(root: Path, sources: list[str]) -> list[str]:
    """A private apt root at ``root`` with these sources, its lists updated; apt's options for it."""
    for sub in ("sources.list.d", "preferences.d", "state/lists/partial", "cache/archives/partial"):
        (root / sub).mkdir(parents=True, exist_ok=True)
    (root / "state" / "status").touch()
    (root / "sources.list").write_text("".join(f"{line}\n" for line in sources))
    options = apt_options(root)
    run(["apt-get", *options, "update"], timeout=900)
    return options


def resolve_closure(options: list[str], packages: list[str]) -> list[str]:
    """Every real package the given ones depend on (Depends + Pre-Depends), recursively, all
    alternatives included."""
    done = run(
        ["apt-cache", *options, "depends", "--recurse", "--no-recommends", "--no-suggests",
         "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *packages],
    )  # fmt: skip
    names: set[str] = set()
    for line in done.stdout.splitlines():
        if not line or line[0].isspace() or line.startswith("<"):
            continue  # indented: a relation; <x>: a virtual package
        names.add(line.strip().split(":")[0])
    missing = [package for package in packages if package not in names]
    if missing:
        raise AptRepoError(f"not found in the archive: {missing}")
    return sorted(names)


_URI_RE = re.compile(r"^'(?P<uri>[^']+)' (?P<file>\S+) (?P<size>\d+) (?P<hash>\S+)")


def download(options: list[str], names: list[str], pool: Path) -> int:
    """Fetch the candidate .deb of every name into ``pool``, skipping files already there, and
    remove the .debs the closure no longer wants. Returns how many were downloaded now."""
    pool.mkdir(parents=True, exist_ok=True)
    done = run(["apt-get", *options, "download", "--print-uris", *names])
    wanted = {match.group("file") for match in map(_URI_RE.match, done.stdout.splitlines()) if match}
    todo = [name for name in wanted if not (pool / name).exists()]
    # apt-get download takes package names; a file name is name_version_arch.deb
    packages = [name.split("_")[0] for name in todo]
    for start in range(0, len(packages), 200):
        run(["apt-get", *options, "download", *packages[start : start + 200]], cwd=pool, timeout=1800)
    for old in pool.glob("*.deb"):
        if old.name not in wanted:
            old.unlink()
    return len(todo)


def index(out: Path) -> None:
    """Write Packages and Packages.gz for the flat repository in ``out`` (its debs in out/pool)."""
    if shutil.which("dpkg-scanpackages") is None:
        raise AptRepoError("dpkg-scanpackages is missing (apt-get install dpkg-dev)")
    done = run(["dpkg-scanpackages", "--multiversion", "pool", "/dev/null"], cwd=out)
    (out / "Packages").write_text(done.stdout)
    run(["gzip", "-9nkf", "Packages"], cwd=out)


def pip_download(wheels: Path, requirements: list[str], find_links: list[Path], python_version: str) -> None:
    """``pip download`` binary wheels of ``requirements`` for the hosts' Python and platform."""
    argv = ["python3", "-m", "pip", "download", "--dest", str(wheels),
            "--only-binary=:all:", "--python-version", python_version,
            "--implementation", "cp", "--platform", "manylinux_2_28_x86_64",
            "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
            "--find-links", str(wheels)]  # fmt: skip
    for link in find_links:
        argv += ["--find-links", str(link)]
    run(argv + requirements, timeout=3600)
