"""The container check's verdict (cluster_cli/smoke/checks_container.py): the DDP verdict, that the
ranks ran in the image, and the probes of a job with and without a GPU inside the container."""

from __future__ import annotations


from cluster_cli.smoke.checks_container import check_container, judge_container
from cluster_cli.smoke.report import CheckResult, Verdict
import smoke_fixtures as fx

IMAGE = "cluster-cli container image: bookworm from http://deb.debian.org/debian, /opt/cluster-training/venv"
TRAINED = CheckResult("ddp", Verdict.PASS, "loss fell", 120.0, "samples_per_s", "samples/s", job_ids=["7"])
RESULT = {"env": {"image": IMAGE, "world_size": 2}}
OWN = ["/dev/fake-gpu/nvidia0"]
ALL = ["/dev/fake-gpu/nvidia0", "/dev/fake-gpu/nvidia1", "/dev/fake-gpu/nvidia2"]


def _probe(gpus: int, allowed: list[str], present: list[str] = OWN, **changes: object) -> dict:
    """A probe's line: the GPU files it opens of those ``present`` in the container, the task's variable."""
    return {"gpus": gpus, "allowed": allowed, "denied": sorted(set(present) - set(allowed)), "image": IMAGE,
            "cuda_visible_devices": "0" if gpus else None,
            "home": "/home/smoke", "work": "/srv/w", "home_writable": True, "work_writable": True, **changes}


def test_ddp_in_the_image_with_the_gpu_file_only_when_allocated_passes_with_the_ddp_figure():
    result = judge_container(TRAINED, RESULT, [_probe(1, OWN), _probe(0, [])], OWN)
    assert result.verdict is Verdict.PASS, result.reason
    assert (result.figure, result.unit, result.job_ids) == (120.0, "samples/s", ["7"])
    assert "opens its GPU's only when it has the GPU" in result.reason
    assert "gets the task's CUDA_VISIBLE_DEVICES" in result.reason


def test_ranks_that_did_not_run_in_the_image_fail():
    result = judge_container(TRAINED, {"env": {"image": None}}, [_probe(1, OWN), _probe(0, [])], OWN)
    assert result.verdict is Verdict.FAIL and "did not run in the image" in result.reason


def test_a_job_without_gpus_that_opens_the_nodes_gpu_inside_fails():
    result = judge_container(TRAINED, RESULT, [_probe(1, OWN), _probe(0, OWN)], OWN)
    assert result.verdict is Verdict.FAIL
    assert "opens ['/dev/fake-gpu/nvidia0']: the device cgroup does not reach into the container" in result.reason


def test_a_job_with_a_gpu_that_cannot_open_it_fails():
    result = judge_container(TRAINED, RESULT, [_probe(1, []), _probe(0, [])], OWN)
    assert result.verdict is Verdict.FAIL and "opens [] of the node's device files, expected 1" in result.reason


def test_the_bundle_makers_gpu_files_left_in_the_container_fail():
    """On the single-host cluster the other nodes' files are not this node's GRES: the cgroup lets
    the container open them, so they must not be there (the container start removes them)."""
    result = judge_container(TRAINED, RESULT, [_probe(1, ALL, present=ALL), _probe(0, ALL[1:], present=ALL)], OWN)
    assert result.verdict is Verdict.FAIL
    assert ("job with 1 GPU(s): the container has the GPU files ['/dev/fake-gpu/nvidia0', '/dev/fake-gpu/nvidia1', "
            "'/dev/fake-gpu/nvidia2'], the node's are ['/dev/fake-gpu/nvidia0']") in result.reason


def test_the_tasks_gpu_variable_missing_or_left_behind_inside_fails():
    """Slurm 22.05 passes the job's environment into the container, not the task's."""
    result = judge_container(TRAINED, RESULT, [_probe(1, OWN, cuda_visible_devices=None),
                                               _probe(0, [], cuda_visible_devices="0")], OWN)
    assert result.verdict is Verdict.FAIL
    assert "job with 1 GPU(s): CUDA_VISIBLE_DEVICES inside is None, the task's is '0'" in result.reason
    assert "job with 0 GPU(s): CUDA_VISIBLE_DEVICES inside is '0', the task's is None" in result.reason


def test_home_or_work_area_missing_inside_and_a_failed_step_fail():
    result = judge_container(TRAINED, RESULT, [_probe(1, OWN, home_writable=False), {"gpus": 0, "failed": "srun "
                             "--container exited 1", "output": "fchown fd 7: operation not permitted"}], OWN)
    assert result.verdict is Verdict.FAIL
    assert "/home/smoke not there or not writable inside" in result.reason
    assert "job with 0 GPU(s): srun --container exited 1: fchown fd 7" in result.reason


def _skipped(**target: object) -> str:
    return fx.skip_reason(check_container, **target)


def test_the_check_skips_with_its_reason_where_it_cannot_run():
    assert "containers are off" in _skipped()
    assert "no image to run (containers.image)" in _skipped(containers=True)
