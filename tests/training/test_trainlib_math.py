"""Bandwidth and rate arithmetic of the validation jobs (nccl-tests definitions)."""

from __future__ import annotations

import itertools

import pytest
import trainlib


def test_algbw_is_bytes_over_seconds_in_gb_per_s():
    assert trainlib.algbw_gbps(2 * 10**9, 0.5) == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("ranks", "factor"),
    [(1, 0.0), (2, 1.0), (4, 1.5), (8, 1.75), (16, 1.875)],
)
def test_allreduce_bus_factor_is_two_n_minus_one_over_n(ranks, factor):
    assert trainlib.allreduce_bus_factor(ranks) == pytest.approx(factor)


def test_busbw_scales_algbw_by_the_factor():
    # nccl-tests' README example: 8 ranks, algbw 100 GB/s -> busbw 175 GB/s.
    assert trainlib.busbw_gbps(100.0, 8) == pytest.approx(175.0)


def test_busbw_approaches_twice_algbw_for_many_ranks():
    assert trainlib.busbw_gbps(1.0, 1024) == pytest.approx(2.0, rel=1e-3)


def test_matmul_rate_counts_two_flops_per_multiply_add():
    # 8192^3 * 2 FLOP in 1.1 ms is ~1000 TFLOP/s (H100 bf16 dense peak is 989).
    assert trainlib.matmul_tflops(8192, 8192, 8192, 1.1e-3) == pytest.approx(2 * 8192**3 / 1.1e-3 / 1e12)
    assert trainlib.matmul_tflops(1000, 1000, 1000, 1.0) == pytest.approx(2e-3)


def test_copy_bandwidth_counts_read_and_write():
    assert trainlib.copy_tbps(10**12, 1.0) == pytest.approx(2.0)


@pytest.mark.parametrize("fn", [trainlib.algbw_gbps, trainlib.copy_tbps])
def test_rates_refuse_non_positive_time(fn):
    with pytest.raises(ValueError):
        fn(100, 0.0)


def test_rank_count_must_be_positive():
    with pytest.raises(ValueError):
        trainlib.allreduce_bus_factor(0)


def test_payload_ladder_is_geometric_and_ends_at_the_maximum():
    assert trainlib.payload_sizes(1024, 65536, 4) == [1024, 4096, 16384, 65536]
    # A maximum that is not on the ladder is still measured last: the verdict is judged there.
    sizes = trainlib.payload_sizes(1000, 10**6, 4)
    assert sizes[-1] == 10**6
    assert all(b == a * 4 for a, b in itertools.pairwise(sizes[:-1]))
    assert trainlib.payload_sizes(4096, 4096) == [4096]


def test_payload_ladder_rejects_nonsense():
    with pytest.raises(ValueError):
        trainlib.payload_sizes(0, 10)
    with pytest.raises(ValueError):
        trainlib.payload_sizes(10, 5)


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [("4096", 4096), ("4K", 4096), ("64M", 64 * 2**20), ("1G", 2**30), ("1GiB", 2**30), ("0.5G", 2**29)],
)
def test_parse_size_uses_binary_units(text, nbytes):
    assert trainlib.parse_size(text) == nbytes


def test_digest_sees_a_single_bit_and_ignores_order():
    torch = pytest.importorskip("torch")
    a = torch.arange(6, dtype=torch.float32)
    b = a.clone()
    same = trainlib.tensors_digest(iter([("x", a), ("y", b)]))
    assert same == trainlib.tensors_digest(iter([("y", b), ("x", a)]))
    flipped = a.clone()
    flipped.view(torch.int32)[3] ^= 1  # lowest mantissa bit of one element
    assert not torch.equal(flipped, a)
    assert trainlib.tensors_digest(iter([("x", flipped), ("y", b)])) != same
    # bf16 has no numpy dtype; the digest still works on its bytes.
    assert trainlib.tensors_digest(iter([("x", a.to(torch.bfloat16))])) != same


def test_loss_window_means_compare_the_first_and_last_steps():
    assert trainlib.loss_window_means([3.0, 2.0, 1.0, 1.0, 0.5, 0.0], window=3) == (2.0, 0.5)
    assert trainlib.loss_window_means([1.0, 1.0, 5.0, 5.0], window=2) == (1.0, 5.0)
    with pytest.raises(ValueError):
        trainlib.loss_window_means([1.0, 2.0, 3.0], window=2)
