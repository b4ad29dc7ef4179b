"""Verdict logic of the training checks, from result documents to pass/fail/skip."""

from __future__ import annotations

import pytest
import smoke_fixtures as fx

from cluster_cli.smoke import judge, thresholds
from cluster_cli.smoke.report import Verdict

H100 = thresholds.resolve("H100")
H200 = thresholds.resolve("H200")
CPU = thresholds.resolve(None)


# -- helpers --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "threshold", "comparison", "ok"),
    [
        (350.0, 350.0, ">=", True),  # bounds are inclusive
        (349.9, 350.0, ">=", False),
        (30.0, 30.0, "<=", True),
        (30.1, 30.0, "<=", False),
        (0.0, None, ">=", True),  # no bound: figure only
    ],
)
def test_meets(value, threshold, comparison, ok):
    assert judge.meets(value, threshold, comparison) is ok


def test_scaling_efficiency_is_thr_n_over_n_times_thr_1():
    assert judge.scaling_efficiency(300.0, 3, 100.0) == pytest.approx(1.0)
    assert judge.scaling_efficiency(4713.0, 3, 4297.0) == pytest.approx(4713 / (3 * 4297))
    with pytest.raises(ValueError):
        judge.scaling_efficiency(1.0, 2, 0.0)


@pytest.mark.parametrize(
    ("nbytes", "text"), [(2**30, "1GiB"), (64 * 2**20, "64MiB"), (4096, "4KiB"), (1000, "1000B")]
)
def test_human_bytes(nbytes, text):
    assert judge.human_bytes(nbytes) == text


# -- allreduce ------------------------------------------------------------------------------------


def test_allreduce_on_cpu_reports_the_figure_without_a_threshold():
    result = judge.judge_allreduce(fx.allreduce(1.28, "cpu"), H100)
    assert result.verdict is Verdict.PASS
    assert result.figure == pytest.approx(1.28)
    assert result.threshold is None and result.comparison is None
    assert result.figure_name == "busbw@1GiB" and result.unit == "GB/s"
    assert "CPU run" in result.reason


def test_allreduce_on_h100_passes_at_the_floor_and_fails_below():
    name = "NVIDIA H100 80GB HBM3"
    good = judge.judge_allreduce(fx.allreduce(371.0, "cuda", 16, gpu_name=name), H100)
    assert good.verdict is Verdict.PASS and good.threshold == 350.0 and good.comparison == ">="
    bad = judge.judge_allreduce(fx.allreduce(210.0, "cuda", 16, gpu_name=name), H100)
    assert bad.verdict is Verdict.FAIL
    assert "below the required >= 350 GB/s" in bad.reason and "1GiB" in bad.reason


def test_allreduce_with_wrong_sums_fails_even_when_fast():
    result = judge.judge_allreduce(fx.allreduce(900.0, "cuda", 8, correct=False), H100)
    assert result.verdict is Verdict.FAIL
    assert "wrong sums at 1MiB" in result.reason


def test_allreduce_with_one_rank_is_not_held_to_a_bus_bandwidth():
    result = judge.judge_allreduce(fx.allreduce(0.0, "cuda", 1), H100)
    assert result.verdict is Verdict.PASS and result.threshold is None
    assert "one rank" in result.reason


# -- ddp ------------------------------------------------------------------------------------------


def test_ddp_reports_scaling_efficiency_from_one_and_n_ranks():
    result = judge.judge_ddp(fx.ddp(4713.0), fx.ddp(4297.0, world=1), CPU)
    assert result.verdict is Verdict.PASS
    assert result.figure == pytest.approx(4713 / (3 * 4297))
    assert result.threshold is None  # CPU ranks share cores
    assert result.details["baseline_samples_per_s"] == 4297.0


def test_ddp_on_gpu_is_held_to_the_scaling_floor():
    ok = judge.judge_ddp(fx.ddp(2700.0, "cuda", 3), fx.ddp(1000.0, "cuda", 1), H100)
    assert ok.verdict is Verdict.PASS and ok.figure == pytest.approx(0.9) and ok.threshold == 0.8
    slow = judge.judge_ddp(fx.ddp(1500.0, "cuda", 3), fx.ddp(1000.0, "cuda", 1), H100)
    assert slow.verdict is Verdict.FAIL and slow.figure == pytest.approx(0.5)


def test_ddp_fails_when_loss_does_not_fall_or_ranks_disagree():
    flat = judge.judge_ddp(fx.ddp(100.0, loss_decreased=False, loss_last=2.4), None, CPU)
    assert flat.verdict is Verdict.FAIL and "loss did not fall (2.3 -> 2.4)" in flat.reason
    split = judge.judge_ddp(fx.ddp(100.0, params_identical=False, param_digests=["a", "b", "a"]), None, CPU)
    assert split.verdict is Verdict.FAIL and "parameters differ across ranks" in split.reason


def test_ddp_without_a_baseline_reports_throughput():
    result = judge.judge_ddp(fx.ddp(123.0, world=1), None, CPU)
    assert result.verdict is Verdict.PASS and result.figure == 123.0 and result.unit == "samples/s"


# -- fsdp -----------------------------------------------------------------------------------------


def test_fsdp_passes_with_an_equal_reload():
    result = judge.judge_fsdp(fx.fsdp())
    assert result.verdict is Verdict.PASS
    assert result.figure == 120.0 and result.unit == "ms"
    assert "reload bitwise equal" in result.reason


def test_fsdp_names_the_rank_whose_reload_differs():
    data = fx.fsdp(reload_equal=False)
    data["digests"][2]["loaded"] = {**data["digests"][2]["loaded"], "local_shards": "zz"}
    result = judge.judge_fsdp(data)
    assert result.verdict is Verdict.FAIL and "rank(s) [2]" in result.reason


@pytest.mark.parametrize(
    ("overrides", "phrase"),
    [
        ({"reload_was_needed": False}, "proved nothing"),
        ({"checkpoint_files": [".metadata"]}, "no .distcp shard files"),
        ({"loss_decreased": False}, "loss did not fall"),
    ],
)
def test_fsdp_other_failures(overrides, phrase):
    result = judge.judge_fsdp(fx.fsdp(**overrides))
    assert result.verdict is Verdict.FAIL and phrase in result.reason


# -- preempt --------------------------------------------------------------------------------------


def test_preempt_passes_when_requeued_resumed_and_bitwise_equal():
    result = judge.judge_preempt(fx.preempt(5), 1, 5, 2.5)
    assert result.verdict is Verdict.PASS
    assert result.figure == 2.5 and result.unit == "s"
    assert "resumed at step 5" in result.reason and "bitwise equal" in result.reason


@pytest.mark.parametrize(
    ("args", "phrase"),
    [
        ((fx.preempt(5), 0, 5, None), "never requeued"),
        ((None, 1, 5, None), "wrote no result"),
        ((fx.preempt(None, 0, "preempted", None), 1, 5, None), "not a completed run"),
        ((fx.preempt(3), 1, 5, None), "checkpointed at step 5 but resumed at step 3"),
        ((fx.preempt(5, bitwise=None), 1, 5, None), "no comparison"),
        ((fx.preempt(5, bitwise=False, diff=1e-9), 1, 5, None), "CPU runs must match bitwise"),
    ],
)
def test_preempt_failures(args, phrase):
    result = judge.judge_preempt(*args)
    assert result.verdict is Verdict.FAIL and phrase in result.reason


PREEMPTION = {"qos": "low", "by": "high", "account": "team-a"}


def test_preempt_by_a_higher_qos_names_the_preemptor_and_needs_it_to_have_run():
    passed = judge.judge_preemptor(judge.judge_preempt(fx.preempt(5), 1, 5, 9.0), "42", "COMPLETED", PREEMPTION)
    assert passed.verdict is Verdict.PASS
    assert passed.reason.startswith("preempted (QoS low) by job 42 (QoS high); ")
    assert passed.details["trigger"] == "preemption" and passed.details["preemptor_job"] == "42"
    stuck = judge.judge_preemptor(judge.judge_preempt(fx.preempt(5), 1, 5, 9.0), "42", "PENDING", PREEMPTION)
    assert stuck.verdict is Verdict.FAIL and "job 42 (QoS high) ended PENDING" in stuck.reason
    never = judge.judge_preemptor(judge.judge_preempt(fx.preempt(5), 0, 5, None), "42", "COMPLETED", PREEMPTION)
    assert never.verdict is Verdict.FAIL and "never requeued" in never.reason


def test_preempt_on_gpu_tolerates_tiny_differences_only():
    close = judge.judge_preempt(fx.preempt(5, bitwise=False, diff=1e-7, device="cuda"), 1, 5, None)
    assert close.verdict is Verdict.PASS and "within" in close.reason
    far = judge.judge_preempt(fx.preempt(5, bitwise=False, diff=1e-2, device="cuda"), 1, 5, None)
    assert far.verdict is Verdict.FAIL


# -- gpu ------------------------------------------------------------------------------------------


def test_gpu_skip_carries_the_job_reason():
    result = judge.judge_gpu({"check": "gpu", "skipped": True, "reason": "no usable CUDA device"}, H100)
    assert result.verdict is Verdict.SKIP and result.reason == "no usable CUDA device"


def test_gpu_h100_floors():
    ok = judge.judge_gpu(fx.gpu([(760.0, 2.95), (740.0, 2.9)]), H100)
    assert ok.verdict is Verdict.PASS
    assert ok.figure == 740.0 and ok.threshold == 715.0 and ok.unit == "TFLOP/s"
    slow = judge.judge_gpu(fx.gpu([(760.0, 2.95), (700.0, 2.5)]), H100)
    assert slow.verdict is Verdict.FAIL
    assert "g1 gpu1: matmul 700 TFLOP/s < 715" in slow.reason
    assert "g1 gpu1: copy 2.5 TB/s < 2.85" in slow.reason
    assert "gpu0" not in slow.reason


def test_gpu_h200_needs_more_memory_bandwidth_than_h100():
    figures = [(760.0, 3.5)]
    assert judge.judge_gpu(fx.gpu(figures), H100).verdict is Verdict.PASS
    result = judge.judge_gpu(fx.gpu(figures, "NVIDIA H200"), H200)
    assert result.verdict is Verdict.FAIL and "copy 3.5 TB/s < 4.1" in result.reason


def test_gpu_of_an_unknown_type_reports_figures_only():
    result = judge.judge_gpu(fx.gpu([(100.0, 1.0)], "NVIDIA L4"), thresholds.resolve("NVIDIA L4"))
    assert result.verdict is Verdict.PASS and result.threshold is None


def test_gpu_without_figures_fails():
    assert judge.judge_gpu({"check": "gpu", "skipped": False, "gpus": []}, H100).verdict is Verdict.FAIL
