"""The validation jobs run for real under `torchrun --standalone --nproc_per_node=2` on CPU (gloo).

Select with ``-m training``; each job takes a few seconds on a 2-core machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.training,
    pytest.mark.skipif(
        subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, check=False).returncode
        != 0,
        reason="torch is not installed in this interpreter (pip install torch==2.13.0)",
    ),
]

# A guard against a hung job, not a speed check (speeds are benchmarks/): each job takes 5-60 s on
# a quiet 2-core machine, but a launch that first imports torch in two ranks while other work
# loads the machine took more than 90 s once (CI, 2026-11-24, the preempt job's first launch).
JOB_TIMEOUT_S = 300
TRAINING_DIR = Path(__file__).resolve().parents[2] / "training"


def torchrun(
    script: str, *args: str, nproc: int = 2, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for key in [key for key in env if key.startswith("SLURM_")]:
        del env[key]  # a test run inside a Slurm job must not look like a launch by srun
    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            str(TRAINING_DIR / script), *args]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=JOB_TIMEOUT_S, env=env, cwd=cwd,
                              check=False)
    except subprocess.TimeoutExpired as hung:
        pytest.fail(f"{script} still ran after {JOB_TIMEOUT_S} s:\n{_text(hung.stdout)[-3000:]}\n"
                    f"{_text(hung.stderr)[-3000:]}")
    assert done.returncode == 0, f"{script} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def result(path: Path) -> dict[str, Any]:
    data = json.loads(path.read_text())
    assert data["schema_version"] == 1
    return data


def test_allreduce_reports_correct_sums_and_nccl_tests_bandwidths(tmp_path):
    out = tmp_path / "allreduce.json"
    torchrun("allreduce.py", "--out", str(out), "--min-bytes", "4K", "--max-bytes", "1M", "--iters", "3")
    data = result(out)
    assert data["env"]["backend"] == "gloo" and data["env"]["world_size"] == 2
    assert [row["bytes"] for row in data["sizes"]] == [4096, 16384, 65536, 262144, 1048576]
    assert data["all_correct"] and all(row["correct"] for row in data["sizes"])
    for row in data["sizes"]:
        assert row["algbw_gbps"] == pytest.approx(row["bytes"] / (row["time_us"] * 1e-6) / 1e9)
        assert row["busbw_gbps"] == pytest.approx(row["algbw_gbps"] * 2 * (2 - 1) / 2)
    assert data["largest"] == data["sizes"][-1]


def test_ddp_loss_falls_and_ranks_end_bitwise_identical(tmp_path):
    out = tmp_path / "ddp.json"
    torchrun("ddp.py", "--out", str(out), "--steps", "20")
    data = result(out)
    assert data["env"]["world_size"] == 2
    assert len(data["losses"]) == 20
    assert data["loss_last"] < data["loss_first"] and data["loss_decreased"]
    assert data["params_identical"] and len(set(data["param_digests"])) == 1
    assert data["samples_per_s"] > 0 and data["step_time_ms"] > 0
    # samples/s counts every rank's batch over the timed (post-warm-up) steps.
    expected = 2 * data["batch_size_per_rank"] / (data["step_time_ms"] / 1e3)
    assert data["samples_per_s"] == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("impl", ["fsdp2", "fsdp1"])
def test_fsdp_sharded_checkpoint_reloads_bitwise(tmp_path, impl):
    out = tmp_path / "fsdp.json"
    torchrun(
        "fsdp.py", "--impl", impl, "--ckpt-dir", str(tmp_path / "ckpt"), "--out", str(out), "--steps", "6"
    )
    data = result(out)
    assert data["impl"] == impl
    assert data["reload_equal"], data["digests"]
    # The comparison has teeth: the fresh model differed from the checkpoint before loading it.
    assert data["reload_was_needed"]
    for rank in data["digests"]:
        assert rank["before"]["model_full"] != rank["saved"]["model_full"]
        assert rank["loaded"] == rank["saved"]
    # One shard file per rank plus the metadata, all in the shared directory.
    assert sorted(data["checkpoint_files"]) == [".metadata", "__0_0.distcp", "__1_0.distcp"]
    assert sorted(os.listdir(tmp_path / "ckpt")) == data["checkpoint_files"]


def _raise_flag_when_holding(run_dir: Path, stop: threading.Event) -> None:
    while not stop.is_set():
        if (run_dir / "holding").exists():
            (run_dir / "preempt.flag").touch()
            return
        time.sleep(0.1)


def test_preempt_checkpoint_resume_matches_an_uninterrupted_run(tmp_path):
    run_dir = tmp_path / "run"
    stop = threading.Event()
    watcher = threading.Thread(target=_raise_flag_when_holding, args=(run_dir, stop), daemon=True)
    watcher.start()
    try:
        torchrun(
            "preempt.py",
            "--run-dir",
            str(run_dir),
            "--hold-at-step",
            "4",
            "--hold-timeout",
            "60",
            "--steps",
            "12",
            "--out",
            str(tmp_path / "first.json"),
        )
    finally:
        stop.set()
    first = result(tmp_path / "first.json")
    assert first["status"] == "preempted" and first["preempted_at_step"] == 4
    assert "bitwise_equal" not in first  # only a completed run compares
    assert (run_dir / "preempted").read_text().strip() == "4"
    assert (run_dir / "checkpoint.pt").exists()

    (run_dir / "preempt.flag").unlink()
    torchrun("preempt.py", "--run-dir", str(run_dir), "--steps", "12", "--out", str(tmp_path / "second.json"))
    second = result(tmp_path / "second.json")
    assert second["status"] == "completed"
    assert second["resumed_from_step"] == 4 and second["start_step"] == 4
    assert sorted(int(step) for step in second["losses"]) == list(range(4, 12))
    assert second["bitwise_equal"] is True and second["max_abs_diff"] == 0.0
    assert second["reference_digest"] == second["final_digest"]

    # Negative control: the same resume compared with another seed's run differs, so the
    # equality above is not vacuous.
    torchrun(
        "preempt.py",
        "--run-dir",
        str(run_dir),
        "--steps",
        "12",
        "--reference-seed",
        "99",
        "--out",
        str(tmp_path / "other.json"),
    )
    other = result(tmp_path / "other.json")
    assert other["resumed_from_step"] == 4 and other["final_digest"] == second["final_digest"]
    assert other["bitwise_equal"] is False and other["max_abs_diff"] > 0


def test_gpu_job_skips_with_a_reason_without_cuda(tmp_path):
    torch = pytest.importorskip("torch")
    out = tmp_path / "gpu.json"
    torchrun(
        "gpu.py",
        "--out",
        str(out),
        "--iters",
        "3",
        "--warmup",
        "1",
        "--copy-bytes",
        "64M",
        "--matmul-size",
        "1024",
    )
    data = result(out)
    if torch.cuda.is_available():
        assert data["skipped"] is False
        assert len(data["gpus"]) == 2
        assert all(gpu["matmul_bf16_tflops"] > 0 and gpu["copy_tbps"] > 0 for gpu in data["gpus"])
    else:
        assert data["skipped"] is True
        assert "torch.cuda.is_available() is False" in data["reason"]


FINALIZATION_ABORT = """
import atexit
import os

import trainlib


def main():
    # Stands in for gloo's teardown race (trainlib.exit_without_finalization): anything that
    # aborts while the interpreter finalizes, after the job's work and results are done.
    atexit.register(os.abort)
    print("result written", flush=True)
    if os.environ.get("FAIL_IN_MAIN"):
        raise RuntimeError("the job itself failed")


trainlib.run(main)
"""


def _run_finalization_job(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "job.py"
    script.write_text(FINALIZATION_ABORT)
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(TRAINING_DIR), **env},
        timeout=JOB_TIMEOUT_S,
        check=False,
    )


def test_a_finished_job_exits_0_without_running_interpreter_finalization(tmp_path: Path) -> None:
    done = _run_finalization_job(tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "result written" in done.stdout


def test_a_job_whose_main_raises_still_fails(tmp_path: Path) -> None:
    done = _run_finalization_job(tmp_path, FAIL_IN_MAIN="1")
    assert done.returncode != 0 and "the job itself failed" in done.stderr
