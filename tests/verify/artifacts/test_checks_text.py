"""Text results read strictly: JSON without NaN/Infinity, JSONL line by line, CSV/TSV row widths,
and the top-level numbers a metrics JSON hands to the per-cell table."""

from __future__ import annotations

import pytest

from tests.verify.artifacts.test_checks import run


def test_a_metrics_json_hands_over_its_top_level_numbers_and_nothing_else(tmp_path) -> None:
    v = run(tmp_path, "metrics.json", b'{"psnr": 31.42, "epoch": 0, "best": true, "name": "a", "val": {"loss": 1},'
                                      b' "big": 1e400, "huge": ' + b"9" * 400 + b"}")
    assert v.ok and v.scalars == {"psnr": 31.42, "epoch": 0.0}


@pytest.mark.parametrize("text", [b"[1, 2]", b'{"name": "run-1"}', b'"done"'])
def test_json_without_top_level_numbers_has_no_scalars(tmp_path, text) -> None:
    v = run(tmp_path, "x.json", text)
    assert v.ok and v.scalars is None


def test_every_non_standard_literal_is_counted_and_the_first_is_named_by_key_path(tmp_path) -> None:
    v = run(tmp_path, "m.json", b'{"train": {"loss": [0.5, NaN]}, "val": {"loss": Infinity}, "note": "NaN"}')
    assert v.finding == "non_finite"
    assert "NaN literal at $.train.loss[1] (and 1 more)" in v.detail


def test_the_string_nan_is_just_a_string(tmp_path) -> None:
    assert run(tmp_path, "m.json", b'{"status": "NaN", "x": "Infinity"}').ok


def test_json_that_never_closes_is_called_cut_short_and_bad_syntax_is_not(tmp_path) -> None:
    cut = run(tmp_path, "a.json", b'{"psnr": 31.4, "curve": [1, 2')
    broken = run(tmp_path, "b.json", b'{"psnr": 31.4,, "x": 1}')
    assert "cut short" in cut.detail and "line 1" in cut.detail
    assert broken.finding == "load_error" and "cut short" not in broken.detail


def test_jsonl_skips_blank_lines_and_counts_records(tmp_path) -> None:
    v = run(tmp_path, "ev.jsonl", b'{"a": 1}\n\n  \n{"a": 2}\r\n[3]\n')
    assert v.ok and v.detail.startswith("3 records")


def test_a_broken_middle_jsonl_line_is_named_and_not_called_cut(tmp_path) -> None:
    v = run(tmp_path, "ev.jsonl", b'{"a": 1}\n{"a": 2,}\n{"a": 3}\n')
    assert v.finding == "load_error" and v.detail.startswith("line 2 does not parse") and "cut" not in v.detail


def test_a_jsonl_line_that_is_not_utf8_is_named(tmp_path) -> None:
    v = run(tmp_path, "ev.jsonl", b'{"a": 1}\n{"a": "\xff"}\n')
    assert v.finding == "load_error" and "line 2" in v.detail and "UTF-8" in v.detail


def test_a_jsonl_of_blank_lines_is_empty(tmp_path) -> None:
    v = run(tmp_path, "ev.jsonl", b"\n\n")
    assert v.finding == "empty"


def test_csv_fields_with_quoted_commas_and_newlines_keep_the_row_whole(tmp_path) -> None:
    v = run(tmp_path, "t.csv", b'id,text,score\n1,"a, b",0.5\n2,"line\nbreak",0.7\n')
    assert v.ok and v.detail.startswith("2 data rows x 3 columns")


def test_a_complete_last_row_without_a_final_newline_passes_with_a_note_when_written_by_hand(tmp_path) -> None:
    v = run(tmp_path, "t.csv", b"a,b\n1,2\n3,4", hand_made=["*.csv"])
    assert v.ok and "no final newline" in v.detail


def test_a_csv_cut_inside_a_quoted_field_is_named_by_line(tmp_path) -> None:
    v = run(tmp_path, "t.csv", b'a,b\n1,"unfinished\n')
    assert v.finding == "load_error" and "never closes" in v.detail and "line" in v.detail


def test_a_long_row_is_ragged_wherever_it_is(tmp_path) -> None:
    v = run(tmp_path, "t.csv", b"a,b\n1,2,3\n4,5\n")
    assert v.finding == "load_error" and "line 2 has 3 field(s), the header has 2" in v.detail


def test_a_cut_last_row_with_a_newline_is_still_cut(tmp_path) -> None:
    v = run(tmp_path, "t.csv", b"a,b,c\n1,2,3\n4\n")
    assert "the last row (line 3) has 1 of 3 fields" in v.detail and "newline" not in v.detail


def test_tsv_is_split_on_tabs_not_commas(tmp_path) -> None:
    v = run(tmp_path, "t.tsv", b"name\tvalue\nx,y\t1\n")
    assert v.ok and "1 data rows x 2 columns" in v.detail


def test_a_csv_that_is_not_utf8_says_so(tmp_path) -> None:
    v = run(tmp_path, "t.csv", b"a,b\n\xe9,1\n")
    assert v.finding == "load_error" and "not UTF-8" in v.detail


def test_a_header_only_csv_passes_with_zero_rows(tmp_path) -> None:
    v = run(tmp_path, "t.csv", b"a,b\n")
    assert v.ok and v.detail.startswith("0 data rows")
