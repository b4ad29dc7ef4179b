"""``python -m cluster_cli.gpu_proof OUT_DIR --kit KIT --python PY [--work DIR] [--fake-gpus]``:
the proof's steps after ``run``'s first one (docs/gpu-validation.md). Exit 0 when every step
passed, was skipped or adapted for a reason written down; 1 otherwise."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from cluster_cli.gpu_proof import daemons
from cluster_cli.gpu_proof.record import FAIL, PASS, STOP, Record, Step
from cluster_cli.gpu_proof.steps import Proof


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="gpu-kit/run", description=__doc__)
    parser.add_argument("out", type=Path, help="results directory (at most 8 files are written)")
    parser.add_argument("--kit", type=Path, required=True, help="the kit directory")
    parser.add_argument("--python", required=True, help="the Python with torch the jobs use")
    parser.add_argument("--work", type=Path, default=Path("/var/tmp"), help="where the run's directory is made")
    parser.add_argument("--fake-gpus", action="store_true",
                        help="the GPUs are emulated (NVML emulator, device files): figures skip")
    parser.add_argument("--machine-check", default="", help="what run's first step found (from run)")
    parser.add_argument("--keep", action="store_true", help="leave the daemons running and the work directory")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    record = Record(args.out)
    kit = json.loads((args.kit / "kit.json").read_text())
    record.machine.update(kit=f"{kit['release']}, Slurm {kit['slurm_version']}, glibc >= {kit['glibc_floor']}",
                          kit_bytes=kit["total_bytes"])
    if args.machine_check:
        record.add(Step("machine-check", PASS, args.machine_check, 0.0))
    args.work.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cluster-gpu-proof.", dir=args.work))
    work.chmod(0o755)  # the test user's jobs work below it
    started = time.monotonic()
    with tarfile.open(args.kit / "root.tar.gz") as archive:
        archive.extractall(work, filter="tar") if sys.version_info >= (3, 12) else archive.extractall(work)
    layout = daemons.Layout(work / "root", work)
    record.add(Step("kit", PASS, f"unpacked into {work}", time.monotonic() - started))
    original_cgroup = daemons.own_cgroup()
    proof = Proof(args, record, layout)
    try:
        proof.run()
    finally:
        if not args.keep:
            killed = daemons.stop_all(layout)
            if killed:
                record.add(Step("stop", FAIL, f"daemons killed after 20 s of SIGTERM: {killed}", 0.0))
            daemons.leave_proof_scope(original_cgroup)
            if proof.made_slice:
                daemons.remove_system_slice()
            else:
                daemons.remove_proof_scope()
        proof.collect_logs()
        record.write()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    failed = [step.name for step in record.steps if step.verdict in (FAIL, STOP)]
    print(f"verdict: {'PASS' if not failed else 'FAIL (' + ', '.join(failed) + ')'}; results in {args.out}")
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
