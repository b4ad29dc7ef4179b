"""Command line: python -m testbed {up,down,status,exec,mirror}."""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from pathlib import Path

from .core import APT_SOURCES, DEFAULT_CACHE_DIR, DEFAULT_SUBNET, Testbed, TestbedConfig
from .mirror import DEFAULT_MIRROR_PACKAGES, AptRepoError, build_mirror, default_mirror_dir
from .overlay import build_overlay
from .proc import TestbedError
from .rootfs import COPY_MODES, RELEASES


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default="tb", help="test bed name (default tb)")
    p.add_argument("--run-dir", type=Path, help="state dir (default /var/lib/cluster-testbed/NAME)")
    p.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR,
                   help=f"base rootfs and mirror cache (default {DEFAULT_CACHE_DIR})")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m testbed",
                                 description="Debian systemd hosts in nspawn for multi-host tests")
    ap.add_argument("-v", "--verbose", action="store_true")
    sub = ap.add_subparsers(dest="cmd", required=True)

    up = sub.add_parser("up", help="create and boot the hosts")
    _common(up)
    g = up.add_mutually_exclusive_group()
    g.add_argument("--hosts", help="comma-separated host names (default host1..hostN)")
    g.add_argument("--count", type=int, default=2, help="number of hosts when --hosts is absent")
    up.add_argument("--release", choices=RELEASES, default="bookworm")
    up.add_argument("--subnet", default=DEFAULT_SUBNET)
    up.add_argument("--copy-mode", choices=COPY_MODES, default="overlay")
    up.add_argument("--mirror", help="apt repository dir bound at /mirror; 'auto' = the cached "
                    "mirror of the release if built; 'none' = no mirror (default auto)",
                    default="auto")
    up.add_argument("--bind-ro", action="append", default=[], metavar="SRC:DST",
                    help="extra read-only bind mount into every host")
    up.add_argument("--shared", action="append", default=[], metavar="DST[=HOST,...]",
                    help="a directory shared read-write at DST by the listed hosts (default every "
                    "host), like an NFS export; kept under the run dir until down")
    up.add_argument("--fuse", action="append", default=[], metavar="HOST[,HOST...]",
                    help="bind the control node's /dev/fuse into these hosts (FUSE mounts, e.g. sshfs)")
    up.add_argument("--apt-sources", choices=APT_SOURCES, default="mirror",
                    help="'mirror': the bound mirror is the hosts' only apt source and pip index; "
                    "'none': no source, the deploy's package_mirror must set it (default mirror)")
    up.add_argument("--json", action="store_true", help="print the state as JSON")

    down = sub.add_parser("down", help="stop the hosts and remove everything up made")
    _common(down)
    down.add_argument("--purge", action="store_true", help="delete the cache dir as well")

    st = sub.add_parser("status", help="show hosts, systemd state and files")
    _common(st)
    st.add_argument("--json", action="store_true")

    rs = sub.add_parser("restart", help="reboot one host (power off, boot the same root)")
    _common(rs)
    rs.add_argument("host")
    for verb, what in (("stop", "power one host off (start boots it again)"),
                       ("start", "boot a host that stop powered off")):
        sp = sub.add_parser(verb, help=what)
        _common(sp)
        sp.add_argument("host")

    ex = sub.add_parser("exec", help="run a command inside a host (nsenter, not ssh)")
    _common(ex)
    ex.add_argument("host")
    ex.add_argument("--ssh", action="store_true", help="go through ssh instead of nsenter")
    ex.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ARGS...")

    mi = sub.add_parser("mirror", help="build a local apt repository for the hosts")
    mi.add_argument("--cache-dir", type=Path, default=DEFAULT_CACHE_DIR)
    mi.add_argument("--release", choices=RELEASES, default="bookworm")
    mi.add_argument("--packages", nargs="+", default=list(DEFAULT_MIRROR_PACKAGES))
    mi.add_argument("--out", type=Path, help="default CACHE/mirror/RELEASE")
    mi.add_argument("--wheel", type=Path, action="append", default=[],
                    help="a wheel file to put in the wheelhouse (repeatable)")
    mi.add_argument("--pip", action="append", default=[], metavar="REQ",
                    help="a requirement to pip download (binary, hosts' python) into the wheelhouse")
    mi.add_argument("--find-links", type=Path, action="append", default=[])
    mi.add_argument("--over", choices=RELEASES, metavar="BASE",
                    help="build only an overlay: the packages of --release (and the dependencies BASE "
                         "cannot satisfy) to serve beside BASE's mirror, e.g. --release forky --over trixie")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="testbed: %(message)s")
    try:
        return _dispatch(args)
    except (TestbedError, AptRepoError) as exc:
        print(f"testbed: error: {exc}", file=sys.stderr)
        if args.cmd in ("up", "restart"):
            print("testbed: what was made is recorded in the run dir; "
                  f"`python -m testbed down --name {args.name}` removes it", file=sys.stderr)
        return 1


def _dispatch(args: argparse.Namespace) -> int:
    if args.cmd == "mirror" and args.over:
        out = args.out or default_mirror_dir(args.cache_dir, args.over) / args.release
        pins = build_overlay(out, args.release, args.over, args.packages, args.cache_dir)
        print(f"overlay {out}: {', '.join(pins)}")
        return 0
    if args.cmd == "mirror":
        out = args.out or default_mirror_dir(args.cache_dir, args.release)
        r = build_mirror(out, args.release, args.packages, args.cache_dir, args.wheel,
                         args.pip, args.find_links)
        print(f"mirror {r.path}: {r.debs} packages, {r.wheels} wheels, {r.seconds:.1f}s")
        return 0

    tb = Testbed.for_name(args.name, args.run_dir)
    if args.cmd == "up":
        hosts = ([h.strip() for h in args.hosts.split(",") if h.strip()] if args.hosts
                 else [f"host{i + 1}" for i in range(args.count)])
        mirror: Path | None
        if args.mirror == "none":
            mirror = None
        elif args.mirror == "auto":
            cand = default_mirror_dir(args.cache_dir, args.release)
            mirror = cand if (cand / "Packages").exists() else None
        else:
            mirror = Path(args.mirror)
        binds = []
        for spec in args.bind_ro:
            src, _, dst = spec.partition(":")
            binds.append((Path(src).resolve(), dst or src))
        shared = [parse_shared(spec) for spec in args.shared]
        cfg = TestbedConfig(hosts=hosts, name=args.name, release=args.release,
                            subnet=args.subnet, cache_dir=args.cache_dir, run_dir=args.run_dir,
                            mirror=mirror, copy_mode=args.copy_mode, binds_ro=binds,
                            shared=shared, apt_sources=args.apt_sources,
                            fuse=parse_fuse(args.fuse))
        state = tb.up(cfg)
        if args.json:
            print(json.dumps(state, indent=2))
        else:
            _print_status(tb.status())
        return 0
    if args.cmd == "down":
        for line in tb.down(purge=args.purge, cache_dir=args.cache_dir):
            print(line)
        return 0
    if args.cmd == "status":
        st = tb.status()
        if args.json:
            print(json.dumps(st, indent=2))
        else:
            _print_status(st)
        return 0 if st["hosts"] else 3
    if args.cmd in ("restart", "stop", "start"):
        res = getattr(tb, args.cmd)(args.host)
        print(f"{res['name']}: {res['systemd']} after {res['seconds']}s")
        return 0
    if args.cmd == "exec":
        cmd = list(args.command)
        if cmd and cmd[0] == "--":
            cmd = cmd[1:]
        if not cmd:
            raise TestbedError("no command given (exec HOST -- CMD ...)")
        argv = tb.ssh_host(args.host).argv(cmd) if args.ssh else tb.exec_argv(args.host, cmd)
        # output goes straight to our terminal; the host command's status is ours
        return subprocess.run(argv, check=False).returncode
    raise TestbedError(f"unknown command {args.cmd}")


def parse_shared(spec: str) -> tuple[str, list[str] | None]:
    """``/srv/x`` -> ("/srv/x", None); ``/srv/x=a,b`` -> ("/srv/x", ["a", "b"])."""
    dst, sep, hosts = spec.partition("=")
    names = [h.strip() for h in hosts.split(",") if h.strip()]
    if sep and not names:
        raise TestbedError(f"--shared {spec}: no host names after '='")
    return dst, names if sep else None


def parse_fuse(specs: list[str]) -> list[str]:
    """``["login", "c1,c2"]`` (each --fuse) -> ``["login", "c1", "c2"]``."""
    return [name.strip() for spec in specs for name in spec.split(",") if name.strip()]


def _print_status(st: dict) -> None:
    if not st["hosts"]:
        print(f"no test bed in {st['run_dir']}")
        return
    print(f"test bed {st['name']} ({st['release']}) in {st['run_dir']}")
    for h in st["hosts"]:
        print(f"  {h['name']:<12} {h['address']:<15} {h['systemd']:<10} netns {h['netns']}")
    if "ssh_config" in st:
        print(f"ssh:       ssh -F {st['ssh_config']} <host>")
        print(f"inventory: {st['inventory']}")
    t = st.get("timings") or {}
    if t:
        print("timings:   " + ", ".join(f"{k}={v}" for k, v in t.items()))
