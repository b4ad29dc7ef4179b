"""cluster_cli/exporters/text_format.py: the exposition the exporters serve, read back by samples_of
(which the deploy and test-bed tests read the exporters' answers with)."""

from __future__ import annotations

from cluster_cli.exporters.text_format import exposition, samples_of

METRICS = {"nodes": ("gauge", "Nodes by state."), "up": ("gauge", "Slurm answered.")}


def test_samples_read_back_equal_what_was_exposed_whatever_the_label_values_hold():
    samples = [
        ("nodes", {"partition": "gpu,big", "state": "drained"}, 2),
        ("nodes", {"partition": 'say "hi" {now}', "state": "a\\b\nc"}, 0.25),
        ("up", {}, 1),
    ]
    text = exposition("cluster_slurm_", METRICS, samples)
    assert samples_of(text) == [("cluster_slurm_" + name, labels, float(value)) for name, labels, value in samples]


def test_comments_blank_lines_timestamps_and_special_values():
    text = '# HELP m x\n\nm{a="1"} 5 1700000000000\nn NaN\no +Inf\n'
    found = samples_of(text)
    assert found[0] == ("m", {"a": "1"}, 5.0)
    assert found[1][0] == "n" and found[1][2] != found[1][2]  # NaN
    assert found[2] == ("o", {}, float("inf"))
