"""Helpers shared by the unit tests: a base inventory, exact problem lists, line lookup.

Line numbers in expectations are found by searching the test's own YAML text for the line the
problem must point at (``line_of(text, "  base_port: 17001")``): an oracle independent of the
loader, so a wrong line in cluster-cli fails the test.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

from cluster_cli.cluster import Cluster
from cluster_cli.errors import InventoryError
from cluster_cli.loader import load_cluster, load_cluster_text

REPO = Path(__file__).resolve().parents[2]
SHIPPED_INVENTORIES = {
    "local": REPO / "inventories" / "local" / "inventory.yaml",
    **{path.stem: path for path in sorted((REPO / "inventories" / "examples").glob("*.yaml"))},
}
FILE = "inv.yaml"


def module_from_file(name: str, path: Path) -> ModuleType:
    """The Python file at ``path`` imported as the module ``name``, registered in sys.modules before
    it runs (its dataclasses look their module up there)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def benchmark_module(name: str) -> Iterator[ModuleType]:
    """benchmarks/NAME.py imported as the module NAME (its dataclasses look themselves up in
    sys.modules), with benchmarks/ on sys.path for what it imports from beside it; both undone after."""
    benchmarks = str(REPO / "benchmarks")
    before = set(sys.modules)
    sys.path.insert(0, benchmarks)
    try:
        yield module_from_file(name, REPO / "benchmarks" / f"{name}.py")
    finally:
        sys.path.remove(benchmarks)
        for imported in set(sys.modules) - before:
            if getattr(sys.modules[imported], "__file__", "") and str(sys.modules[imported].__file__).startswith(benchmarks):
                sys.modules.pop(imported)

# A small cluster with both kinds of node group: four multi-host GPU nodes reached by address and
# two slurmd instances on one host ("box") with fake GPUs. Tests edit it with str.replace.
BASE = """\
cluster_name: test
hosts:
  - name: head
    address: 10.0.0.1
  - name: box
    address: 10.0.0.2
controllers:
  primary: head
accounting:
  host: head
login: [head]
node_groups:
  - name: gpu
    nodes: gpu[1-4]
    addresses: 10.0.1.[1-4]
    sockets: 2
    cores_per_socket: 8
    real_memory_mb: 64000
    gpus:
      count: 2
      type: a100
      devices: /dev/nvidia[0-1]
  - name: dev
    nodes: dev[1-2]
    host: box
    base_port: 17001
    cores_per_socket: 2
    real_memory_mb: 1000
    gpus:
      count: 1
      devices: /dev/fake[0-1]
      fake: true
partitions:
  - name: all
    nodes: [gpu, dev]
    default: true
"""


def line_of(text: str, snippet: str) -> int:
    """1-based line of the only line of ``text`` that contains ``snippet`` (that ends with it,
    when the snippet ends with ``$``)."""
    if snippet.endswith("$"):
        found = [
            number for number, line in enumerate(text.splitlines(), start=1) if line.endswith(snippet[:-1])
        ]
    else:
        found = [number for number, line in enumerate(text.splitlines(), start=1) if snippet in line]
    assert len(found) == 1, f"{snippet!r} is on lines {found} of the test inventory"
    return found[0]


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
    return text.replace(old, new)


def edit_all(text: str, edits: list[tuple[str, str]]) -> str:
    """``text`` with each ``(old, new)`` edit made in turn."""
    for old, new in edits:
        text = edit(text, old, new)
    return text


def problems(text: str, file: str = FILE) -> list[str]:
    """Every problem reported for ``text`` as ``file:line: field: message``; [] if it is valid."""
    try:
        load_cluster_text(text, file)
    except InventoryError as error:
        return [str(problem) for problem in error.problems]
    return []


def load(text: str, file: str = FILE) -> Cluster:
    return load_cluster_text(text, file)


def local_cluster(directory: Path, change: Callable[[str], str] = lambda text: text) -> Cluster:
    """The local inventory with ``change`` made to its text, loaded from DIRECTORY/inventory.yaml."""
    path = directory / "inventory.yaml"
    path.write_text(change(SHIPPED_INVENTORIES["local"].read_text()))
    return load_cluster(path)


def problem(text: str, snippet: str, field: str, message: str) -> str:
    """The expected problem string at the line of ``snippet``."""
    return f"{FILE}:{line_of(text, snippet)}: {field}: {message}"


def expected_problems(text: str, expected: list[tuple[str, str, str]]) -> list[str]:
    """The expected problem string of each ``(snippet, field, message)``, in the order given."""
    return [problem(text, snippet, field, message) for snippet, field, message in expected]


def all_paths(node: Any, prefix: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every path into a parsed YAML document (keys and list indexes), the root's () first."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += all_paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += all_paths(value, prefix + (index,))
    return found


def debian_program(program: str, package: str, cache: Path) -> Path | None:
    """``program`` on PATH, else Debian's ``package`` unpacked once into ``cache`` (no daemon, nothing
    installed; as root, where apt-get can download it); None when neither can be had."""
    found = shutil.which(program)
    if found:
        return Path(found)
    binary = cache / "x" / "usr" / "bin" / program
    if not binary.is_file() and os.geteuid() == 0 and shutil.which("apt-get"):
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", "-qq", package], cwd=cache, capture_output=True, check=False)
        for deb in sorted(cache.glob(f"{package}_*.deb")):
            subprocess.run(["dpkg-deb", "-x", str(deb), str(cache / "x")], check=False)
    return binary if binary.is_file() else None


def started(argv: list[str], timeout_s: float = 5.0, **options: Any) -> subprocess.Popen[bytes]:
    """``argv`` started, returned once its command line shows in /proc: right after the fork the
    child's /proc/PID/cmdline can still be empty on a loaded machine, and a probe looking for the
    program there would find nothing."""
    process = subprocess.Popen(argv, **options)
    cmdline = Path(f"/proc/{process.pid}/cmdline")
    deadline = time.monotonic() + timeout_s
    while not cmdline.read_bytes():
        if time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"{argv[0]} showed no command line in /proc after {timeout_s:g} s")
        time.sleep(0.01)
    return process
