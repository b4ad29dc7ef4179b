"""The proof's steps in order, each writing its verdict as it ends; a step that cannot go on
stops the run (``Stopped``) with what it found."""

from __future__ import annotations

import argparse
import dataclasses
import os
import socket
import time
from functools import partial
from pathlib import Path
from typing import Any

from cluster_cli.gpu_proof import autodetect, daemons, gpu_steps, inventory, machine
from cluster_cli.gpu_proof.record import ADAPTED, FAIL, PASS, SKIP, STOP, Record, Step

#: The smoke suite's checks the proof runs; the last two only with two GPUs or more.
GPU_CHECKS = ("srun", "gpu-binding", "gpu")
NCCL_CHECKS = ("allreduce", "ddp")
CHECK_TIMEOUT_S = 150.0
LOG_BYTES = 2_000_000

class Stopped(Exception):
    """A step found what the rest cannot run without."""


class Proof:
    def __init__(self, args: argparse.Namespace, record: Record, layout: daemons.Layout) -> None:
        self.args = args
        self.record = record
        self.layout = layout
        self.node = socket.gethostname().split(".")[0]
        self.gpus: list[machine.Gpu] = []
        self.gpu_type = "gpu"
        self.python = machine.PythonFacts(args.python)
        self.cgroups_reason: str | None = None
        self.cluster: Any = None
        self.made_slice = False
        self.cgroups_used = False
        self.device_files: list[str] = []

    def step(self, name: str, verdict: str, says: str, started: float, **details: Any) -> Step:
        return self.record.add(Step(name, verdict, says, time.monotonic() - started, details))

    def run(self) -> None:
        try:
            for step in (self.facts, self.render, self.start, self.autodetect,
                         partial(gpu_steps.device_cgroup, self), partial(gpu_steps.gpu_metrics, self), self.smoke):
                step()
        except Stopped:
            return

    def stop(self, name: str, says: str, started: float, **details: Any) -> None:
        self.step(name, STOP, says, started, **details)
        raise Stopped(says)

    # 2. the machine
    def facts(self) -> None:
        started = time.monotonic()
        self.gpus = machine.gpus()
        listed = machine.listed_gpu_count()
        self.python = machine.python_facts(self.args.python)
        self.cgroups_reason = machine.cgroup_v2_writable()
        first = self.gpus[0] if self.gpus else None
        self.gpu_type = machine.gpu_type(first.name) if first else "gpu"
        self.record.machine.update(
            description=(f"{listed} x {first.name} ({first.memory_mib} MiB), driver {first.driver}, "
                         f"{os.cpu_count()} CPUs, init {machine.init_system()}") if first else "no GPU",
            gpu_count=listed,
            gpus=[dataclasses.asdict(gpu) for gpu in self.gpus],
            python={"path": self.python.path, "version": self.python.version, "found": self.python.found,
                    "missing": self.python.missing, "cuda": self.python.cuda},
            init=machine.init_system(),
            cgroups=self.cgroups_reason or "cgroup v2, writable",
        )
        unresolvable = machine.unresolvable(self.node)
        if unresolvable:
            self.stop("machine", unresolvable, started)
        if not self.gpus or listed != len(self.gpus):
            self.stop("machine", f"nvidia-smi lists {listed} GPU(s) and queries {len(self.gpus)}: no driver to prove",
                      started)
        says = f"{listed} GPU(s) {self.gpu_type}; Python {self.python.version}"
        if self.python.missing:
            self.step("machine", ADAPTED, f"{says}; the training checks lack {', '.join(self.python.missing)}",
                      started)
        else:
            self.step("machine", PASS, f"{says} with {', '.join(f'{k} {v}' for k, v in self.python.found.items())}",
                      started)

    # 3. the inventory, rendered by cluster-cli
    def render(self, cgroups: bool | None = None) -> None:
        started = time.monotonic()
        # the wheels first: cluster_cli.errors is standard library, the loader is not
        from cluster_cli.errors import ClusterCliError

        use = self.cgroups_reason is None if cgroups is None else cgroups
        if use:
            self.made_slice = daemons.make_system_slice() or self.made_slice
        swap = not use or daemons.swap_accounting()
        unpacked = inventory.use_wheels(self.args.kit / "wheels", self.layout.work / "site")
        cpus = machine.cpus(Path(self.layout.sbin("slurmd")))
        data = inventory.inventory(self.node, self.layout, cpus, len(self.gpus), self.gpu_type,
                                   self.python.found.get("torch"), use, swap)
        data["secrets"] = {"dir": str(self.layout.work / "secrets")}
        path = self.args.out / "inventory.yaml"
        try:
            self.cluster = inventory.write_and_render(path, data, self.layout, self.node)
        except ClusterCliError as error:  # the product's message names the file, line and field
            self.stop("render", f"cluster-cli could not render the inventory: {error}", started)
        self.cgroups_used = use
        how = "cgroup v2 (IgnoreSystemd)" if use else f"no cgroups ({self.cgroups_reason or 'fallback'})"
        if not swap:
            how += "; ConstrainSwapSpace=no: the memory controller has no swap accounting here"
        self.step("render", PASS, f"cluster-cli rendered slurm.conf, gres.conf (AutoDetect=nvml), cgroup.conf; "
                  f"{how}; wheels unpacked: {len(unpacked)}", started, cgroups=use)

    # 4. the daemons, without systemd
    def start(self) -> None:
        started = time.monotonic()
        problem = daemons.start_munge(self.layout)
        if problem:
            self.stop("daemons", problem, started)
        why = self._start_slurm()
        if why and self.cgroups_reason is None:
            daemons.stop_all(self.layout, timeout=10)
            self.cgroups_reason = f"with cgroup v2 {why}"
            self.render(cgroups=False)
            problem = daemons.start_munge(self.layout)
            if problem:
                self.stop("daemons", problem, started)
            why = self._start_slurm()
            if not why:
                self.step("daemons", ADAPTED, f"munged, slurmctld, slurmd started without systemd and without "
                          f"cgroups ({self.cgroups_reason}); GPU binding is checked by CUDA_VISIBLE_DEVICES only",
                          started)
                return
        if why:
            self.stop("daemons", why, started)
        slice_note = f"; made {daemons.SYSTEM_SLICE} (no systemd to make it)" if self.made_slice else ""
        self.step("daemons", PASS, f"munged, slurmctld, slurmd started without systemd (init: "
                  f"{machine.init_system()}); node {self.node} IDLE; srun ran a task{slice_note}", started)

    def _start_slurm(self) -> str | None:
        problem = daemons.start_slurm(self.layout, self.node)
        if problem:
            return problem
        state = daemons.wait_idle(self.layout, self.node)
        if not state.startswith("IDLE"):
            said = daemons.last_errors(self.layout.log_dir / "slurmctld.log", count=2)
            return f"node {self.node} is {state} 60 s after slurmd started; slurmctld's last errors: {said}"
        done = daemons.run(self.layout, ["srun", "--nodes=1", "--ntasks=1", "--time=1", "true"], timeout=60)
        if done.returncode != 0:
            return f"srun true exited {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"
        return None

    # 5. AutoDetect=nvml
    def autodetect(self) -> None:
        started = time.monotonic()
        log = daemons.log_tail(self.layout.log_dir / f"slurmd-{self.node}.log", LOG_BYTES)
        found = autodetect.slurmd_gres(self.layout, self.node, log)
        problems = autodetect.problems(found, self.gpus, self.gpu_type)
        node = daemons.run(self.layout, ["scontrol", "show", "node", self.node, "--oneliner"]).stdout
        gres = next((pair for pair in node.split() if pair.startswith("Gres=")), "Gres=?")
        want = f"gpu:{self.gpu_type}"
        if not any(part.startswith(f"{want}") or f":{self.gpu_type}" in part for part in gres.split(",")):
            problems.append(f"slurmctld's node has {gres}, expected {want}:{len(self.gpus)}")
        details = {
            "found_by_nvml": len(found.nvml),
            "nvml": [dataclasses.asdict(gpu) for gpu in found.nvml],
            "slurmd_keeps": found.kept,
            "slurmctld": gres,
            "memory_mib_nvidia_smi": [gpu.memory_mib for gpu in self.gpus],
            "memory_note": "Slurm 22.05's gpu/nvml reads no memory size: memory is nvidia-smi's",
        }
        if found.returncode != 0 and not found.nvml:
            problems.append(f"slurmd -G exited {found.returncode}: {found.output.strip()[-300:]}")
        if problems:
            self.step("autodetect", FAIL, "; ".join(problems), started, **details)
            return
        self.device_files = sorted(gpu.file for gpu in found.nvml if gpu.file)
        names = sorted({gpu.name for gpu in found.nvml})
        self.step("autodetect", PASS, f"gpu/nvml found {len(found.nvml)} of {len(self.gpus)} GPU(s) "
                  f"({', '.join(names)}), every nvidia-smi UUID; slurmctld: {gres}", started, **details)

    # 8. the smoke suite's GPU checks under srun
    def smoke(self) -> None:
        from cluster_cli.smoke import report as smoke_report
        from cluster_cli.smoke import run_smoke
        from cluster_cli.smoke.suite_errors import SmokeSetupError
        from cluster_cli.smoke_control.inventory_targets import smoke_plan

        started = time.monotonic()
        only = list(GPU_CHECKS) + (list(NCCL_CHECKS) if len(self.gpus) >= 2 else [])
        # The emulated GPUs of a rehearsal are real to Slurm (NVML answers) and fake to torch.
        targets = [dataclasses.replace(target, python=self.args.python, check_timeout_s=CHECK_TIMEOUT_S,
                                       fake_gpus=self.args.fake_gpus, slurm_conf=self.layout.slurm_conf,
                                       node_devices={self.node: self.device_files} if target.scope == "group"
                                       else target.node_devices)
                   for target in smoke_plan(self.cluster, sample=None, check_timeout_s=CHECK_TIMEOUT_S)]
        env_path = f"{self.layout.kit_root / 'bin'}:{os.environ.get('PATH', '')}"
        os.environ.update(PATH=env_path, SLURM_CONF=str(self.layout.slurm_conf))
        try:
            report = run_smoke(targets, only, _progress)
        except SmokeSetupError as error:
            self.stop("smoke", f"the smoke suite could not start: {error}", started)
        smoke_report.write_json(report, self.args.out / "smoke.json")
        smoke_report.write_junit(report, self.args.out / "smoke.xml")
        self.record.figures = figures(report.results, len(self.gpus))
        verdicts = {result.name: str(result.verdict) for result in report.results}
        failed = [name for name, verdict in verdicts.items() if verdict.lower() in ("fail", "error")]
        says = ", ".join(f"{name} {verdict}" for name, verdict in verdicts.items())
        if len(self.gpus) < 2:
            says += "; allreduce and ddp not run: one GPU, NCCL is not exercised"
        self.step("smoke", FAIL if failed else PASS, says, started, checks=verdicts)

    def collect_logs(self) -> None:
        logs = self.layout.log_dir
        pairs = [("slurmctld.log", logs / "slurmctld.log"), ("munged.log", logs / "munged.log")]
        pairs.append(("slurmd.log", logs / f"slurmd-{self.node}.log"))
        for name, path in pairs:
            if path.is_file():
                (self.args.out / name).write_text(daemons.log_tail(path, LOG_BYTES))


def _progress(event: Any) -> None:
    if event.kind == "finish" and event.result is not None:
        result = event.result
        print(f"  smoke {result.name}: {result.verdict} {result.reason[:200]}", flush=True)


def figures(results: list[Any], gpu_count: int) -> list[dict[str, Any]]:
    """The figures against their thresholds, for summary.md and the results row."""
    rows: list[dict[str, Any]] = []
    for result in results:
        verdict = str(result.verdict)
        if result.name == "gpu":
            copy = [gpu.get("copy_tbps") for gpu in result.details.get("gpus", [])]
            rows.append(_row("gpu matmul", "min bf16 TFLOP/s", result.figure, result.threshold, verdict, result.reason))
            rows.append(_row("gpu copy", "min copy TB/s", min(copy) if copy else None,
                             result.details.get("copy_threshold_tbps"), verdict, result.reason))
        elif result.name in NCCL_CHECKS:
            rows.append(_row(result.name, result.figure_name, result.figure, result.threshold, verdict, result.reason))
    if gpu_count < 2:
        for name in NCCL_CHECKS:
            rows.append(_row(name, "", None, None, SKIP, "one GPU: NCCL is not exercised"))
    return rows


def _row(check: str, what: str, value: float | None, threshold: float | None, verdict: str, reason: str) -> dict[str, Any]:
    rounded = None if value is None else round(value, 3)
    if check == "gpu copy" and value is not None and threshold is not None:
        verdict = PASS if value >= threshold else FAIL
    return {"check": check, "what": what, "value": rounded, "threshold": threshold, "verdict": verdict,
            "reason": reason}
