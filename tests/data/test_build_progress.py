"""The per-round verdict counts shown on the filter progress bar of long builds."""

from __future__ import annotations

from collections import Counter

from cuda_agent.training.synthesis.pipeline import verdict_counts


def test_verdict_counts_list_drop_reasons_most_frequent_first():
    counts = Counter({"kept": 12, "informative": 2, "runtime_window": 30})
    assert verdict_counts(counts) == "kept 12 | runtime_window 30, informative 2"
    assert verdict_counts(Counter({"runs": 1})) == "kept 0 | runs 1"
    assert verdict_counts(Counter({"kept": 3})) == "kept 3"
