"""leakage (VP6): overlap of ids and content hashes across prepared splits (exact and
normalised), duplicate ingestion, groups, time order, selection on test."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from mcp_server.verify.probes import ProbeInputs, ProbeResult, run_probe
from tests.conftest import error_text, structured

ADAPTER = TypeAdapter(ProbeInputs)


def h(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


async def probe(**inputs: Any) -> ProbeResult:
    return await run_probe(ADAPTER.validate_python({"probe": "leakage", **inputs}))


@pytest.fixture
def gpu1(env, box, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    env.write_inventory({"gpu1": {"destination": "testbox"}})
    return tmp_path


async def test_disjoint_splits_are_clean() -> None:
    r = await probe(splits={"train": {"ids": [f"s{i}" for i in range(100)]},
                            "test": {"ids": [f"t{i}" for i in range(20)]}})
    assert r.verdict == "clean"
    assert r.measurements["pairs"]["train|test"]["id_overlap_exact"] == 0


async def test_a_sample_id_in_train_and_test_is_a_leak_with_its_share() -> None:
    r = await probe(splits={"train": {"ids": [f"s{i}" for i in range(100)]},
                            "test": {"ids": ["s3", "s7", "t1", "t2"]}})
    assert r.verdict == "leak"
    assert r.measurements["pairs"]["train|test"]["id_examples"] == ["s3", "s7"]
    assert "50.0% of the smaller split" in r.reason
    assert "only clean splits" in r.disclosure


async def test_ids_that_differ_only_in_case_and_whitespace_overlap_when_normalised() -> None:
    r = await probe(splits={"train": {"ids": ["IMG_01.PNG", "img_02.png"]},
                            "val": {"ids": [" img_01.png", "img_09.png"]}})
    p = r.measurements["pairs"]["train|val"]
    assert (p["id_overlap_exact"], p["id_overlap_normalised"]) == (0, 1)
    assert r.verdict == "leak"


async def test_the_same_bytes_under_another_name_are_a_leak() -> None:
    r = await probe(splits={"train": {"ids": ["a.png", "b.png"], "hashes": [h("A"), h("B")]},
                            "test": {"ids": ["copy_of_a.png"], "hashes": ["SHA256:" + h("A").upper()]}},
                    id_kind="file_name")
    assert r.verdict == "leak" and r.measurements["pairs"]["train|test"]["hash_overlap"] == 1


async def test_name_collisions_with_distinct_bytes_are_not_leakage() -> None:
    names = [f"{i}.png" for i in range(50)]
    r = await probe(splits={"train": {"ids": [f"train/{n}" for n in names], "hashes": [h("tr" + n) for n in names]},
                            "test": {"ids": [f"test/{n}" for n in names], "hashes": [h("te" + n) for n in names]}},
                    id_kind="file_name")
    p = r.measurements["pairs"]["train|test"]
    assert p["id_overlap_normalised"] == 50 and p["name_collisions_distinct_bytes"] == 50
    assert r.verdict == "clean" and "not leakage" in p["note"]


async def test_name_collisions_without_hashes_are_unverified_until_the_bytes_are_compared() -> None:
    r = await probe(splits={"train": {"ids": ["train/1.png"]}, "test": {"ids": ["test/1.png"]}}, id_kind="file_name")
    assert r.verdict == "unverified" and "content hashes" in r.disclosure


async def test_an_item_listed_twice_in_one_split_is_duplicate_ingestion() -> None:
    r = await probe(splits={"train": {"ids": ["Train/cat_1.jpg", "train/cat_1.jpg", "train/dog_2.jpg"]},
                            "test": {"ids": ["test/x.jpg"]}}, id_kind="file_name")
    assert r.verdict == "bug"
    assert r.measurements["splits"]["train"]["duplicate_ids_normalised"] == 1


async def test_a_patient_in_train_and_test_is_a_group_leak() -> None:
    r = await probe(splits={"train": {"ids": ["s1", "s2"], "groups": ["p01", "p02"]},
                            "test": {"ids": ["s9"], "groups": ["p02"]}})
    assert r.verdict == "leak" and r.measurements["pairs"]["train|test"]["group_examples"] == ["p02"]


async def test_test_items_older_than_the_newest_train_item_break_the_temporal_split() -> None:
    r = await probe(splits={"train": {"ids": ["a", "b"], "times": ["2024-01-01", "2024-03-01T00:00:00Z"]},
                            "test": {"ids": ["c", "d"], "times": ["2024-02-15", "2024-04-01"]}})
    assert r.verdict == "leak" and r.measurements["temporal"]["test"]["ordered"] is False
    ok = await probe(splits={"train": {"ids": ["a"], "times": [1.0]}, "test": {"ids": ["c"], "times": [2.0]}})
    assert ok.verdict == "clean"


async def test_a_checkpoint_selected_on_test_is_selection_leakage() -> None:
    r = await probe(splits={"train": {"ids": ["a"]}, "test": {"ids": ["b"]}},
                    selection={"selection_split": "Test"})
    assert r.verdict == "leak" and "selected on the test split" in r.reason
    many = await probe(splits={"train": {"ids": ["a"]}, "test": {"ids": ["b"]}}, selection={"test_evaluations": 12})
    assert many.verdict == "leak" and "12 times" in many.reason


def test_hashes_that_do_not_align_with_ids_are_refused() -> None:
    with pytest.raises(ValidationError, match="align"):
        ADAPTER.validate_python({"probe": "leakage", "splits": {"train": {"ids": ["a", "b"], "hashes": ["x"]},
                                                                "test": {"ids": ["c"]}}})


async def test_split_manifests_of_every_kind_on_the_box(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    (gpu1 / "train.txt").write_text("# train ids\n" + "\n".join(f"s{i}" for i in range(1000)) + "\n")
    (gpu1 / "val.csv").write_text("sample,sha256\n" + "".join(f"v{i},{h(f'v{i}')}\n" for i in range(50)))
    manifest = {"schema": "remote-gpu-trainer/PULL/v1", "files": [
        {"path": f"test/{i}.png", "bytes": 10, "sha256": h(f"t{i}")} for i in range(30)]}
    (gpu1 / "PULL_MANIFEST.json").write_text(json.dumps(manifest))
    np.save(gpu1 / "extra.npy", np.array([5, 17, 2000]))
    r = structured(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {"probe": "leakage", "splits": {
        "train": {"file": {"path": str(gpu1 / "train.txt")}},
        "val": {"file": {"path": str(gpu1 / "val.csv")}, "id_field": "sample"},
        "test": {"file": {"path": str(gpu1 / "PULL_MANIFEST.json")}},
        "extra": {"file": {"path": str(gpu1 / "extra.npy")}}}}}))
    assert r["measurements"]["splits"]["train"]["rows"] == 1000
    assert r["measurements"]["splits"]["test"]["rows"] == 30
    assert r["measurements"]["pairs"]["train|extra"]["id_overlap_exact"] == 0
    assert r["verdict"] == "clean", r["measurements"]["findings"]
    assert len(r["inputs_read"]) == 4


async def test_row_content_hashes_catch_a_copied_row_under_a_new_id(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    (gpu1 / "train.csv").write_text("id,x1,x2,label\n1,0.5,1.25,cat\n2,0.7,2.0,dog\n3,0.1,0.3,cat\n")
    (gpu1 / "test.csv").write_text("id,x1,x2,label\n901,0.50,1.250, CAT\n902,0.9,0.9,dog\n")
    r = structured(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {"probe": "leakage", "splits": {
        "train": {"file": {"path": str(gpu1 / "train.csv")}, "id_field": "id", "hash_rows": True},
        "test": {"file": {"path": str(gpu1 / "test.csv")}, "id_field": "id", "hash_rows": True}}}}))
    assert r["verdict"] == "leak"
    assert r["measurements"]["pairs"]["train|test"]["hash_overlap"] == 1


async def test_a_table_split_without_an_id_field_says_which_columns_exist(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    (gpu1 / "train.csv").write_text("name,label\na,1\n")
    res = await client.call_tool("run_probe", {"host": "gpu1", "inputs": {"probe": "leakage", "splits": {
        "train": {"file": {"path": str(gpu1 / "train.csv")}}, "test": {"ids": ["b"]}}}})
    text = error_text(res)
    assert "id_field" in text and "name" in text
