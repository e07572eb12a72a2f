"""Row names and metric keywords on either side of a printed number: each form attributes
the number to the row it speaks of, two drifts in one sentence are both found, and numbers
that only stand near a row name (counts, settings, deltas) are left alone. Parametrized
tables over the deliver.md fixture (Ours 31.42 / Baseline 29.95 PSNR, w/o aux 30.81,
Ours top-1 0.7612)."""

from __future__ import annotations

import pytest

from mcp_server.deliver.reconcile import reconcile_texts
from tests.fixtures.deliver.project import base_evidence

Verdict = tuple[str, str, str]  # (category, number as printed, experiment it was given to)


def _verdicts(line: str) -> list[Verdict]:
    report = reconcile_texts(base_evidence(), {"README.md": line + "\n"})
    return [(f.category, f.text or "", f.exp_id or "") for f in report.findings
            if f.severity == "blocking" or f.category in ("match", "rounded_match", "scaled_match")]


@pytest.mark.parametrize(("line", "expected"), [
    # the keyword before the number, the row name after it
    ("PSNR of 31.50 for Ours.", [("stale", "31.50", "ours-full")]),
    ("The PSNR is 31.5 dB (Ours).", [("stale", "31.5", "ours-full")]),
    # the row name before the number, the keyword after it
    ("Ours reaches 31.50 PSNR.", [("stale", "31.50", "ours-full")]),
    ("Baseline gets 29.59 dB PSNR.", [("stale", "29.59", "baseline")]),
    # a row name and no keyword at all, on either side
    ("31.50 dB for Ours.", [("stale", "31.50", "ours-full")]),
    ("Ours reaches 31.50.", [("stale", "31.50", "ours-full")]),
    ("w/o aux: 30.18 (single seed).", [("stale", "30.18", "ours-no-aux")]),
    # a row name names its experiment: Ours (on the PSNR row) also means ours-full's top-1 row
    ("Ours reaches 0.7621 top-1 accuracy.", [("stale", "0.7621", "ours-full")]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_drift_anchored_from_either_side_is_attributed_to_its_row(line: str, expected: list[Verdict]) -> None:
    assert _verdicts(line) == expected


@pytest.mark.parametrize(("line", "expected"), [
    ("We get a PSNR of 31.24 for Ours and 29.90 for Baseline.",
     [("stale", "31.24", "ours-full"), ("stale", "29.90", "baseline")]),
    ("Ours reaches 31.52 while Baseline gets 30.95.",
     [("stale", "31.52", "ours-full"), ("stale", "30.95", "baseline")]),
    ("Ours reaches 31.5 dB and Baseline 29.90 dB PSNR.",
     [("stale", "31.5", "ours-full"), ("stale", "29.90", "baseline")]),
    ("Ours reaches 0.7621 top-1 accuracy and 31.44 dB PSNR.",
     [("stale", "0.7621", "ours-full"), ("stale", "31.44", "ours-full")]),
    ("PSNR: Ours 31.5, Baseline 29.90.", [("stale", "31.5", "ours-full"), ("stale", "29.90", "baseline")]),
], ids=lambda v: v if isinstance(v, str) else "")
def test_two_drifts_in_one_sentence_are_both_found(line: str, expected: list[Verdict]) -> None:
    assert _verdicts(line) == expected


@pytest.mark.parametrize(("line", "expected"), [
    ("Ours reaches 31.42 dB PSNR on the test split, against 29.95 dB for Baseline.",
     [("match", "31.42", "ours-full"), ("match", "29.95", "baseline")]),
    ("Ours (31.42 dB) outperforms Baseline (29.95 dB) by 1.47 dB.",
     [("match", "31.42", "ours-full"), ("match", "29.95", "baseline")]),
    ("PSNR improves from 29.95 for Baseline to 31.42 for Ours.",
     [("match", "29.95", "baseline"), ("match", "31.42", "ours-full")]),
    ("Ours reaches 31.42 PSNR and 76.12% top-1 accuracy.",
     [("match", "31.42", "ours-full"), ("scaled_match", "76.12%", "ours-full")]),
    ("Ours reaches 31.42 dB PSNR, beating Baseline (29.95 dB).",
     [("match", "31.42", "ours-full"), ("match", "29.95", "baseline")]),
    ("Baseline gets 29.95 dB; Ours gets 31.4 dB.",
     [("match", "29.95", "baseline"), ("rounded_match", "31.4", "ours-full")]),
    ("Ours reaches 31.42 PSNR at 0.25 s per image.", [("match", "31.42", "ours-full")]),
    ("Ours with 0.5 dropout reaches 31.42 dB PSNR.", [("match", "31.42", "ours-full")]),
    ("The baseline of 29.95 dB is beaten by Ours at 31.42 dB.",
     [("match", "29.95", "baseline"), ("match", "31.42", "ours-full")]),
    ("Ours-full: PSNR 31.42; Baseline: PSNR 29.95.", [("match", "31.42", "ours-full"), ("match", "29.95", "baseline")]),
    ("w/o aux reaches 30.81 PSNR (single seed), 0.61 dB below Ours.", [("match", "30.81", "ours-no-aux")]),
    ("Baseline, trained for 100 epochs, reaches 29.95.", []),
    ("Ours is trained with a learning rate of 0.001 and weight decay 0.05.", []),
    ("Compared with Baseline, Ours improves PSNR by 1.47 dB.", []),
    ("The table compares Ours with Baseline at 3 scales.", []),
    ("Ours wins in 30 of 40 cases and reaches 31 on average.", []),
    ("Ours has 12.5 M parameters and Baseline 11.2 M.", []),
], ids=lambda v: v if isinstance(v, str) else "")
def test_clean_sentences_raise_no_false_alarm(line: str, expected: list[Verdict]) -> None:
    assert _verdicts(line) == expected
