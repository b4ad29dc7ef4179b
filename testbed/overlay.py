"""A small flat repository of a newer Debian release's packages, to lay over a release's mirror.

Debian forky/sid carry Slurm 26.05; trixie carries 24.11. To upgrade a trixie cluster to 26.05
from packages (no rebuild), the hosts need the newer Slurm packages and exactly those of their
dependencies that the base release cannot satisfy (for 26.05.5: ``libhwloc15`` >= 2.15 and
``libllhttp9.4``), and nothing else: libc6 and the rest stay the base release's. apt's own
solver, asked from an empty dpkg status, pulls the newer libc too, so the set is computed
here from the two releases' package lists, one dependency at a time::

    a dependency the base release satisfies -> taken from the base release (not copied)
    otherwise                               -> the newer release's package, and its own dependencies

Dependencies the base release satisfies but its mirror (``<out>/../Packages``) does not hold
(26.05 needs libhttp-parser2.9 and libibmad5, which 24.11 did not) come from the base release.
The result is ``<out>/pool/*.deb``, ``<out>/Packages(.gz)`` and ``<out>/overlay.json``: served as
a second flat suite beside the base mirror (``/mirror/<release>/``), so a deploy pinned to the
old version never sees the newer packages unless the inventory adds that suite.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from .mirror import ARCH, KEYRING, make_apt_root, release_sources
from .proc import TestbedError, Timer, run
from .rootfs import DEFAULT_DEBIAN_MIRROR

# "libc6 (>= 2.38)", "systemd | systemd-sysusers", "foo:any"
_RELATION = re.compile(r"^(?P<name>[^\s(:]+)(?::\S+)?(?:\s*\((?P<op><<|<=|=|>=|>>)\s*(?P<version>[^)\s]+)\))?")
_DPKG_OPS = {"<<": "lt", "<=": "le", "=": "eq", ">=": "ge", ">>": "gt"}


@dataclass(frozen=True)
class Stanza:
    name: str
    version: str
    depends: list[list[str]]  # each entry: the alternatives of one dependency
    provides: list[str]


def prepare_apt_pair(cache_dir: Path, base: str, newer: str) -> tuple[list[str], Path]:
    """A private apt root with both releases' sources; returns its options and lists directory."""
    root = cache_dir / "apt" / f"{base}+{newer}"
    newer_main = f"deb [signed-by={KEYRING}] {DEFAULT_DEBIAN_MIRROR} {newer} main"
    return make_apt_root(root, [*release_sources(base), newer_main]), root / "state" / "lists"


def parse_stanzas(text: str) -> dict[str, list[Stanza]]:
    """Package stanzas by name (a name may have several versions)."""
    found: dict[str, list[Stanza]] = {}
    for block in text.split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): (.*)$", block, re.MULTILINE))
        if "Package" not in fields:
            continue
        relations = ", ".join(fields[key] for key in ("Pre-Depends", "Depends") if key in fields)
        depends = [[alt.strip() for alt in dep.split("|")] for dep in relations.split(",") if dep.strip()]
        provides = [item.strip().split()[0] for item in fields.get("Provides", "").split(",") if item.strip()]
        found.setdefault(fields["Package"], []).append(Stanza(fields["Package"], fields["Version"], depends, provides))
    return found


def release_stanzas(lists_dir: Path, release: str) -> dict[str, list[Stanza]]:
    """Every package of ``release`` (its main, -updates and -security lists)."""
    pattern = re.compile(rf"_dists_{re.escape(release)}(-updates|-security)?_main_binary-{ARCH}_Packages")
    texts = [run(["/usr/lib/apt/apt-helper", "cat-file", str(path)], timeout=120).stdout
             for path in sorted(lists_dir.iterdir()) if pattern.search(path.name)]
    if not texts:
        raise TestbedError(f"no package lists for {release} in {lists_dir}")
    return parse_stanzas("\n\n".join(texts))


def version_satisfies(have: str, op: str | None, want: str | None) -> bool:
    if op is None or want is None:
        return True
    return run(["dpkg", "--compare-versions", have, _DPKG_OPS[op], want], check=False).returncode == 0


def satisfier(stanzas: dict[str, list[Stanza]], relation: str) -> Stanza | None:
    """The newest stanza of ``stanzas`` that satisfies one relation (a real or provided name)."""
    found = _RELATION.match(relation)
    if found is None:
        return None
    name, op, version = found.group("name"), found.group("op"), found.group("version")
    candidates = [s for s in stanzas.get(name, []) if version_satisfies(s.version, op, version)]
    if not candidates and op is None:
        candidates = [s for group in stanzas.values() for s in group if name in s.provides]
    return candidates[-1] if candidates else None


def overlay_closure(base: dict[str, list[Stanza]], newer: dict[str, list[Stanza]], packages: list[str],
                    mirror: dict[str, list[Stanza]] | None = None) -> list[Stanza]:
    """What the hosts need beyond the base mirror: the newer release's ``packages``, each of their
    dependencies the base release cannot satisfy (the newer release's), and each the base release
    satisfies but the base ``mirror`` does not hold (the base release's), recursively."""
    held = mirror or {}
    todo = [satisfier(newer, name) for name in packages]
    if None in todo:
        raise TestbedError(f"not all of {packages} are in the newer release")
    chosen: dict[str, Stanza] = {}
    while todo:
        stanza = todo.pop()
        if stanza is None or stanza.name in chosen:
            continue
        chosen[stanza.name] = stanza
        for alternatives in stanza.depends:
            picked = _pick(alternatives, chosen, held, base, newer)
            if picked is not None:
                todo.append(picked)
    return sorted(chosen.values(), key=lambda s: s.name)


def _pick(alternatives: list[str], chosen: dict[str, Stanza], held: dict[str, list[Stanza]],
          base: dict[str, list[Stanza]], newer: dict[str, list[Stanza]]) -> Stanza | None:
    """The stanza one dependency adds to the overlay; None when the mirror or the overlay has it."""
    if any(alt.split()[0] in chosen or satisfier(held, alt) for alt in alternatives):
        return None
    for source in (base, newer):
        picked = next((s for s in (satisfier(source, alt) for alt in alternatives) if s), None)
        if picked is not None:
            return picked
    raise TestbedError(f"no release satisfies {' | '.join(alternatives)}")


def deb_prefix(stanza: Stanza) -> str:
    """How apt-get download names the file of a stanza, up to the architecture."""
    return f"{stanza.name}_{stanza.version.replace(':', '%3a')}_"


def download_pinned(opts: list[str], stanzas: list[Stanza], pool: Path) -> None:
    """Fetch exactly these versions into ``pool`` (a file already there is kept, others removed)."""
    pool.mkdir(parents=True, exist_ok=True)
    wanted = {deb_prefix(s) for s in stanzas}
    for path in pool.glob("*.deb"):
        if not any(path.name.startswith(prefix) for prefix in wanted):
            path.unlink()
    missing = [f"{s.name}={s.version}" for s in stanzas
               if not any(pool.glob(f"{deb_prefix(s)}*.deb"))]
    if missing:
        run(["apt-get", *opts, "download", *missing], cwd=pool, timeout=1800)


def index_suite(out: Path) -> None:
    """Packages(.gz) of a flat suite in a subdirectory of the mirror: apt fetches a flat suite's
    files from the mirror's root URI + Filename, so Filename is ``<suite>/pool/...``."""
    scanned = run(["dpkg-scanpackages", "--multiversion", f"{out.name}/pool", "/dev/null"], cwd=out.parent, timeout=600)
    (out / "Packages").write_text(scanned.stdout)
    run(["gzip", "-9nkf", "Packages"], cwd=out)


def build_overlay(out: Path, newer: str, base: str, packages: list[str], cache_dir: Path) -> list[str]:
    """Build the overlay repository in ``out``; returns name=version of every package in it."""
    with Timer() as total:
        opts, lists_dir = prepare_apt_pair(cache_dir, base, newer)
        mirror_index = out.parent / "Packages"
        held = parse_stanzas(mirror_index.read_text()) if mirror_index.is_file() else {}
        stanzas = overlay_closure(release_stanzas(lists_dir, base), release_stanzas(lists_dir, newer), packages, held)
        pins = [f"{s.name}={s.version}" for s in stanzas]
        out.mkdir(parents=True, exist_ok=True)
        download_pinned(opts, stanzas, out / "pool")
        index_suite(out)
    meta = {"release": newer, "over": base, "packages": sorted(packages), "resolved": pins,
            "seconds": round(total.seconds, 1), "built_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
    (out / "overlay.json").write_text(json.dumps(meta, indent=2) + "\n")
    out.chmod(0o755)
    return pins
