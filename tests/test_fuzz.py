"""The CI profile of the fuzz campaign (benchmarks/fuzz.py): every family against its reference at
batch sizes 1, 7, 64 and 1000 on random, adversarial and real text, a few long lines, and every
named mutation of every base file once, with a fixed seed. Any mismatch, gputok exception, hang
(a stage over 60 s), unclean load error or silently loaded bad file fails it; the message lists
each finding with the ``--replay`` spec that reruns it. The long campaign is
``python benchmarks/fuzz.py --minutes N``."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import fuzz  # noqa: E402


def test_fuzz_ci_profile():
    campaign = fuzz.Campaign(seed=22, hang_seconds=60, verbose=False)
    report = campaign.run_jobs(fuzz.ci_jobs(seed=22), seconds=600)
    fuzz.print_tables(report)
    assert not report["harness_errors"], report["harness_errors"]
    assert report["strings"] > 10_000 and report["files"] > 100
    assert not report["findings"], "\n" + fuzz.summarize(report["findings"])
