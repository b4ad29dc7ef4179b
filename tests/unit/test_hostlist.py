"""Hostlist expressions: Slurm's expansion rules, compression, and round-trip properties."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from cluster_cli import hostlist
from cluster_cli.hostlist import HostlistError, compress, expand
from cluster_cli.model import NAME_PATTERN

# -- expansion: examples ---------------------------------------------------------------------------


def test_zero_padding_follows_the_lower_bound():
    names = expand("gpu[001-128]")
    assert len(names) == 128
    assert names[:3] == ["gpu001", "gpu002", "gpu003"]
    assert names[98] == "gpu099"
    assert names[-1] == "gpu128"


def test_unpadded_range_crosses_a_digit_boundary():
    assert expand("n[9-10]") == ["n9", "n10"]
    assert expand("n[8-11]") == ["n8", "n9", "n10", "n11"]


def test_padded_range_that_outgrows_its_width():
    assert expand("n[98-100]") == ["n98", "n99", "n100"]
    assert expand("n[098-100]") == ["n098", "n099", "n100"]


def test_cartesian_product_in_written_order():
    assert expand("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    assert expand("rack[1-2]-n[01-02]-ib") == ["rack1-n01-ib", "rack1-n02-ib", "rack2-n01-ib", "rack2-n02-ib"]


def test_commas_between_names_and_inside_brackets():
    assert expand("a1,b[2-3]") == ["a1", "b2", "b3"]
    assert expand("n[1,3,5-6]") == ["n1", "n3", "n5", "n6"]
    assert expand("x[1-2],y,z[07]") == ["x1", "x2", "y", "z07"]


def test_names_without_brackets_and_surrounding_space():
    assert expand("head") == ["head"]
    assert expand("  head , login ") == ["head", "login"]


def test_text_around_a_bracket_is_kept_as_written():
    # no format string is made of it: braces and percent signs are text like any other
    assert expand("a{0}%d[8-10]}") == ["a{0}%d8}", "a{0}%d9}", "a{0}%d10}"]
    assert expand("{x}[1-2]{y}[1]") == ["{x}1{y}1", "{x}2{y}1"]


def test_expansion_keeps_duplicates_and_order_as_written():
    # expand is a reader, not a set: the model's cross-checks catch duplicates
    assert expand("n2,n1,n2") == ["n2", "n1", "n2"]


def test_addresses_and_paths_are_hostlists_too():
    assert expand("10.0.1.[1-3]") == ["10.0.1.1", "10.0.1.2", "10.0.1.3"]
    assert expand("/dev/nvidia[0-1]") == ["/dev/nvidia0", "/dev/nvidia1"]


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("n[1-", "unclosed '[' in 'n[1-'"),
        ("n[1-2", "unclosed '[' in 'n[1-2'"),
        ("n1]", "unmatched ']' in 'n1]'"),
        ("n[[1-2]]", "nested '[' in 'n[[1-2]]'"),
        ("n[a-b]", "bad range 'a-b' in 'n[a-b]'"),
        ("n[]", "bad range '' in 'n[]'"),
        ("n[1-2-3]", "bad range '1-2-3' in 'n[1-2-3]'"),
        ("n[-1]", "bad range '-1' in 'n[-1]'"),
        ("n[3-1]", "range '3-1' goes backwards in 'n[3-1]'"),
        ("n[10-09]", "range '10-09' goes backwards in 'n[10-09]'"),
        ("n[1-1000001]", "range '1-1000001' in 'n[1-1000001]' has more than 1000000 names"),
        ("a[1-1000]b[1-1001]", "'a[1-1000]b[1-1001]' expands to more than 1000000 names"),
        ("", "empty hostlist"),
        ("   ", "empty hostlist"),
        ("a,,b", "empty name in 'a,,b'"),
        ("a,", "empty name in 'a,'"),
        ("a b", "white space inside name 'a b'"),
        ("n[1-2] x", "white space inside name 'n[1-2] x'"),
    ],
)
def test_bad_expressions_are_refused_with_a_reason(expression, message):
    with pytest.raises(HostlistError) as caught:
        expand(expression)
    assert str(caught.value) == message


def test_hostlist_error_is_a_value_error():
    # pydantic turns ValueError raised by validators into field errors
    assert issubclass(HostlistError, ValueError)


@pytest.mark.parametrize("value", [None, 5, ["n1"], b"n1"])
def test_non_strings_are_refused(value):
    with pytest.raises(HostlistError, match="a hostlist must be a string"):
        expand(value)  # type: ignore[arg-type]


def test_huge_expansions_are_refused_before_they_are_built():
    # one bracket of many ranges, each under the limit: the total is what counts, and it must be
    # counted before 200 million names are built (that took a minute and gigabytes of memory)
    expression = "n[" + ",".join(["1-999999"] * 200) + "]"
    started = time.perf_counter()
    with pytest.raises(HostlistError) as caught:
        expand(expression)
    assert time.perf_counter() - started < 5
    assert str(caught.value) == f"{expression!r} expands to more than 1000000 names"
    # several comma-separated names, each under the limit
    with pytest.raises(HostlistError, match="more than 1000000 names"):
        expand("a[1-600000],b[1-600000]")


def test_the_limit_itself_is_allowed():
    assert len(expand(f"n[1-{hostlist.MAX_EXPANSION}]")) == hostlist.MAX_EXPANSION


def test_an_expansion_met_again_is_a_new_list_of_the_same_names():
    first = expand("cache-test[1-3]")
    first.append("changed")
    assert expand("cache-test[1-3]") == ["cache-test1", "cache-test2", "cache-test3"]
    for _ in range(2):  # a refused expression is refused every time
        with pytest.raises(HostlistError, match="goes backwards"):
            expand("cache-test[3-1]")


# -- compression: examples -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([f"gpu{i:03d}" for i in range(1, 129)], "gpu[001-128]"),
        (["n9", "n10"], "n[9-10]"),
        (["n10", "n9", "n11"], "n[9-11]"),
        (["n098", "n099", "n100"], "n[098-100]"),
        (["a1", "b2", "b3"], "a1,b[2-3]"),
        (["b3", "a1", "b2"], "a1,b[2-3]"),
        (["n1", "n3", "n4", "n5", "n7"], "n[1,3-5,7]"),
        (["n1", "n1", "n2"], "n[1-2]"),
        (["head"], "head"),
        (["login", "head"], "head,login"),
        (["n5"], "n5"),
        (["n01", "n1"], "n[1,01]"),
        (["n9", "n010"], "n[9,010]"),
        (["r1n1", "r1n2", "r2n1"], "r1n[1-2],r2n1"),
        (["h100-001", "h100-002", "a100-001"], "a100-001,h100-[001-002]"),
        (["n1-ib", "n2-ib", "n3"], "n3,n[1-2]-ib"),
        (["10.0.1.1", "10.0.1.2", "10.0.1.3"], "10.0.1.[1-3]"),
        (["10.1.10.1", "10.1.2.1", "10.1.9.1"], "10.1.2.1,10.1.9.1,10.1.10.1"),
        (["rack10-n1", "rack2-n1", "rack2-n2"], "rack2-n[1-2],rack10-n1"),
        ([], ""),
    ],
)
def test_compress_examples(names, expected):
    assert compress(names) == expected
    if names:
        assert sorted(expand(expected)) == sorted(set(names))


@given(st.integers(0, 300), st.integers(2, 400), st.sampled_from(["10.0.7.", "n", "rack2-n"]))
def test_unpadded_numbers_without_a_gap_are_one_range_across_widths(low, count, prefix):
    names = [f"{prefix}{number}" for number in range(low, low + count)]
    assert compress(names) == f"{prefix}[{low}-{low + count - 1}]"
    padded = names + [f"{prefix}0{low + count}"]  # written with a leading zero: not the run's
    expanded = expand(compress(padded))
    assert sorted(expanded) == sorted(padded)


# -- properties ------------------------------------------------------------------------------------

_VALID = re.compile(NAME_PATTERN)

letters = st.text(alphabet="abcxyz", min_size=1, max_size=3)
separators = st.sampled_from(["", "", "-", "_", "."])


@st.composite
def numbered_names(draw) -> str:
    """Names shaped like real node names: prefix, a number (maybe zero-padded), optional suffix,
    sometimes two numbers (rack1-n07)."""
    parts = [draw(letters)]
    for _ in range(draw(st.integers(1, 2))):
        number = draw(st.integers(0, 130))
        width = draw(st.sampled_from([0, 0, 2, 3]))
        parts.append(draw(separators) + str(number).zfill(width))
    if draw(st.booleans()):
        parts.append(draw(st.sampled_from(["-ib", "x", ".a"])))
    return "".join(parts)


any_valid_name = st.from_regex(NAME_PATTERN, fullmatch=True).filter(lambda name: len(name) <= 20)
node_names = st.one_of(numbered_names(), numbered_names(), any_valid_name)
name_lists = st.lists(node_names, min_size=1, max_size=40)


@given(name_lists)
def test_expand_of_compress_is_the_set_of_names_without_repeats(names):
    text = compress(names)
    expanded = expand(text)
    assert len(expanded) == len(set(expanded)), text
    assert set(expanded) == set(names), text


@given(name_lists, st.randoms(use_true_random=False))
def test_compress_does_not_depend_on_order_or_repeats(names, random):
    shuffled = list(names) + random.sample(names, k=min(3, len(names)))
    random.shuffle(shuffled)
    assert compress(shuffled) == compress(names)


@given(st.lists(name_lists, min_size=1, max_size=4))
def test_pieces_of_parts_join_to_the_compress_of_all_their_names(parts):
    pieces = [hostlist.compressed_pieces(part) for part in parts]
    joined = hostlist.join_pieces(pieces)
    every_name = [name for part in parts for name in part]
    if joined is None:  # two parts have a piece of one prefix: their runs could have merged
        keys = [key for part in pieces for key in part]
        assert len(keys) != len(set(keys))
    else:
        assert joined == compress(every_name)


def test_parts_of_one_prefix_are_left_to_compress():
    # gpu[1-4] and gpu[5-8] are one run, gpu[1-8]: no part's pieces say so
    parts = [hostlist.compressed_pieces(expand("gpu[1-4]")), hostlist.compressed_pieces(expand("gpu[5-8]"))]
    assert hostlist.join_pieces(parts) is None
    parts = [hostlist.compressed_pieces(expand("a[1-4]")), hostlist.compressed_pieces(expand("b[1-2],c"))]
    assert hostlist.join_pieces(parts) == "a[1-4],b[1-2],c"


@given(name_lists)
def test_compress_is_canonical(names):
    text = compress(names)
    assert compress(expand(text)) == text


@given(name_lists)
def test_compressed_names_are_valid_hostlists_of_valid_names(names):
    assume(all(_VALID.match(name) for name in names))
    for name in expand(compress(names)):
        assert _VALID.match(name)


@st.composite
def bracket(draw) -> str:
    items = []
    for _ in range(draw(st.integers(1, 3))):
        low = draw(st.integers(0, 120))
        high = low + draw(st.integers(0, 15))
        width = draw(st.sampled_from([1, 2, 3]))
        low_text = str(low).zfill(width)
        items.append(low_text if high == low else f"{low_text}-{high}")
    return "[" + ",".join(items) + "]"


@st.composite
def hostlist_expressions(draw) -> str:
    names = []
    for _ in range(draw(st.integers(1, 3))):
        pieces = [draw(letters)]
        for _ in range(draw(st.integers(0, 2))):
            pieces.append(draw(bracket()))
            pieces.append(draw(st.sampled_from(["", "n", "-", "-ib"])))
        names.append("".join(pieces))
    return ",".join(names)


@given(hostlist_expressions())
def test_compress_of_expand_expands_back_to_the_same_set(expression):
    names = expand(expression)
    text = compress(names)
    assert set(expand(text)) == set(names)
    assert len(expand(text)) == len(set(names))


@given(hostlist_expressions())
def test_expansion_follows_slurm_padding(expression):
    # every number that came out of a bracket is at least as wide as the lower bound written
    for name in expand(expression):
        assert "[" not in name and "]" not in name and "," not in name


@given(st.integers(0, 5000), st.integers(0, 200), st.integers(1, 5))
def test_one_range_matches_a_reference_expansion(low, span, width):
    high = low + span
    expected = [f"n{str(number).zfill(width)}" for number in range(low, high + 1)]
    assert expand(f"n[{str(low).zfill(width)}-{high}]") == expected
    assert compress(expected) == (
        f"n{str(low).zfill(width)}" if span == 0 else f"n[{str(low).zfill(width)}-{str(high).zfill(width)}]"
    )


@given(st.text(max_size=30))
def test_any_text_either_expands_or_raises_hostlist_error(text):
    try:
        names = expand(text)
    except HostlistError:
        return
    assert names and all(names)


def test_addresses_over_several_subnets_expand_in_written_order():
    # Slurm pairs NodeName and NodeAddr lists by position: the compressed form must keep the order
    addresses = [f"10.1.{high}.{low}" for high in range(16) for low in range(256)]
    text = compress(addresses)
    assert expand(text) == addresses
    assert text.count(",") == 15
