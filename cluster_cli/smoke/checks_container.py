"""The container check: Slurm's own container support (`srun --container`, the rendered oci.conf,
rootless runc) runs the DDP training in the cluster's image over two nodes, judged by the ddp
check's rules; then, in the same image on one node, a job with one GPU opens its GPU's device file
and has the task's CUDA_VISIBLE_DEVICES, a job without GPUs can open none and has none (the device
cgroup reaches into the container), the container holds that node's GPU files and no other's, and
the user's home and the work area are there, writable.

The test user makes the bundle (training/container_bundle.py: `runc spec --rootless` writes that
user's uid mapping) in the check's directory on the work area, from ``containers.image``, in a job on
the first node, with every GPU file of that host: on the single-host test cluster those are every
node's, and the container start (oci.conf's RunTimeRun, roles/slurmd/files/cluster-cli-oci-run)
must leave the node its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cluster_cli.smoke import judge
from cluster_cli.smoke.checks_training import _on_evidence, submit
from cluster_cli.smoke.context import CheckContext, read_json
from cluster_cli.smoke.report import CheckResult, Verdict
from cluster_cli.smoke.text import tail

BUNDLE_SCRIPT = "container_bundle.py"
NAME = "container"
# Run by the image's own python3 inside the container: which of the device files it may open, the
# image's marker (container_image.py), and whether home and the work area are there to write in.
PROBE = r"""
import errno, glob, json, os, sys
pattern, work = sys.argv[1:3]
home = os.path.expanduser("~")
seen = {"node": os.environ.get("SLURMD_NODENAME"), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "allowed": [], "denied": [], "home": home, "work": work}
for path in sorted(glob.glob(pattern)):
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))
        seen["allowed"].append(path)
    except OSError as error:
        (seen["denied"] if error.errno in (errno.EPERM, errno.EACCES) else seen["allowed"]).append(path)
try:
    seen["image"] = open("/etc/cluster-cli-image").read().strip()
except OSError:
    seen["image"] = None
for key, path in (("home_writable", home), ("work_writable", work)):
    seen[key] = os.path.isdir(path) and os.access(path, os.W_OK)
print("container-probe " + json.dumps(seen), flush=True)
"""
PROBE_MARK = "container-probe "


def check_container(ctx: CheckContext) -> CheckResult:
    """DDP in the image through srun --container over every node, then the device and home probes."""
    target = ctx.target
    if not target.containers:
        return CheckResult(NAME, Verdict.SKIP, "containers are off in the inventory (containers.enabled): no oci.conf")
    if target.container_image is None:
        return CheckResult(NAME, Verdict.SKIP, "no image to run (containers.image): make one with "
                           "training/container_image.py")
    if ctx.torch_problem:
        return CheckResult(NAME, Verdict.FAIL, ctx.torch_problem)
    work = ctx.check_dir(NAME)
    bundle = work / "bundle"
    # On the first node, where the image is (a node-local copy serves too), not the submit host.
    made = ctx.session.run(
        ["srun", *ctx.job_args(NAME), f"--nodelist={target.nodes[0]}", "--nodes=1", "--ntasks=1",
         "python3", str(ctx.training_dir / BUNDLE_SCRIPT), "--image", target.container_image, "--bundle", str(bundle),
         "--bind-home", "--bind", str(target.work_dir), "--devices", target.gpu_device_glob],
        timeout=min(120.0, ctx.remaining()), cwd=work,
    )
    if made.returncode != 0:
        return CheckResult(NAME, Verdict.FAIL, f"the test user could not make a bundle from {target.container_image} "
                           f"on {target.nodes[0]}", output_tail=tail(made.output))
    world = len(target.nodes) * target.ranks_per_node
    job, work, output = submit(ctx, NAME, {"DDP_BASELINE": "1" if world > 1 else "0", "CONTAINER_BUNDLE": str(bundle)},
                               script="ddp")
    info = ctx.session.wait(job, ctx.remaining())
    result = read_json(work / f"ddp-{job}.json")
    baseline = read_json(work / f"ddp-{job}-1rank.json")
    trained = _on_evidence(
        NAME, info, output, result is not None and (world == 1 or baseline is not None), "missing DDP result(s)",
        lambda: judge.judge_ddp(result or {}, baseline, ctx.thresholds()),
    )
    if trained.verdict is not Verdict.PASS:
        return trained
    probes = [_probe(ctx, str(bundle), work, gpus) for gpus in ((1, 0) if target.gpus_per_node else (0,))]
    return judge_container(trained, result or {}, probes, target.node_devices.get(target.nodes[0], []))


def _probe(ctx: CheckContext, bundle: str, work: Path, gpus: int) -> dict[str, Any]:
    """One task on the first node in the container, with ``gpus`` GPUs; its probe line (or the failure).
    ``work``: the check's own directory in the work area (the work area's root may be the site's, not
    writable by the test user: the test bed's is root's)."""
    done = ctx.session.run(
        ["srun", *ctx.job_args(NAME), f"--nodelist={ctx.target.nodes[0]}", "--nodes=1", "--ntasks=1",
         *([f"--gpus={gpus}"] if gpus else []), f"--container={bundle}",
         "python3", "-c", PROBE, ctx.target.gpu_device_glob, str(work)],
        timeout=min(120.0, ctx.remaining()),
    )
    for line in done.stdout.splitlines():
        if line.startswith(PROBE_MARK):
            try:
                found = json.loads(line.removeprefix(PROBE_MARK))
            except json.JSONDecodeError:
                break
            if isinstance(found, dict):
                return {**found, "gpus": gpus, "seconds": done.seconds}
    return {"gpus": gpus, "failed": f"srun --container exited {done.returncode}", "output": tail(done.output)}


def _device_problems(label: str, probe: dict[str, Any], own: set[str]) -> list[str]:
    """What the probe saw of the GPUs: the files it opens, the node's own files (and only those) in
    the container whatever the bundle's maker had, and the task's CUDA_VISIBLE_DEVICES (local
    indices: 0 for one GPU; none without a GPU)."""
    problems = []
    allowed = set(probe.get("allowed", []))
    opened = allowed & own if own else allowed
    if probe["gpus"] and len(opened) != probe["gpus"]:
        problems.append(f"{label}: opens {sorted(opened)} of the node's device files, expected {probe['gpus']}")
    if not probe["gpus"] and own and opened:
        problems.append(f"{label}: opens {sorted(opened)}: the device cgroup does not reach into the container")
    present = allowed | set(probe.get("denied", []))
    if own and present != own:
        problems.append(f"{label}: the container has the GPU files {sorted(present)}, the node's are {sorted(own)}")
    expected = ",".join(str(index) for index in range(probe["gpus"])) or None
    if probe.get("cuda_visible_devices") != expected:
        problems.append(f"{label}: CUDA_VISIBLE_DEVICES inside is {probe.get('cuda_visible_devices')!r}, the "
                        f"task's is {expected!r}")
    return problems


def judge_container(
    trained: CheckResult, result: dict[str, Any], probes: list[dict[str, Any]], own_devices: list[str]
) -> CheckResult:
    """The DDP verdict (passed), that it ran in the image, and each probe's evidence: the image, home
    and the check's directory in the work area writable; with a GPU its own device file opens, without
    one none of the node's; the task's GPU variable inside; the node's own GPU files there and no other's."""
    problems: list[str] = []
    if not result.get("env", {}).get("image"):
        problems.append("the DDP ranks did not run in the image (no /etc/cluster-cli-image inside)")
    own = set(own_devices)
    for probe in probes:
        label = f"job with {probe['gpus']} GPU(s)"
        if "failed" in probe:
            problems.append(f"{label}: {probe['failed']}: {probe.get('output', '')[-300:]}")
            continue
        if not probe.get("image"):
            problems.append(f"{label}: not in the image")
        for key in ("home", "work"):
            if not probe.get(f"{key}_writable"):
                problems.append(f"{label}: {probe.get(key)} not there or not writable inside")
        problems += _device_problems(label, probe, own)
    details = {**trained.details, "image": result.get("env", {}).get("image"), "probes": probes}
    if problems:
        return CheckResult(NAME, Verdict.FAIL, "; ".join(problems), details=details, job_ids=trained.job_ids)
    gpu_part = (" a job's container has its node's GPU files, opens its GPU's only when it has the GPU, and"
                " gets the task's CUDA_VISIBLE_DEVICES;" if any(p["gpus"] for p in probes)
                else "")
    return CheckResult(
        NAME, Verdict.PASS,
        f"DDP in the image via srun --container: {trained.reason};{gpu_part} home and the work area writable inside",
        trained.figure, trained.figure_name, trained.unit, trained.threshold, trained.comparison,
        details=details, warnings=trained.warnings,
        job_ids=trained.job_ids,
    )
