"""control_diff (VP1): resolved configs flattened to dotted keys; the differing set must
equal the declared ablation. Config files live on the sshd test box."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from mcp_server.errors import InputError
from mcp_server.verify.probes import ProbeInputs, ProbeResult, run_probe
from mcp_server.verify.probes.control_diff import flatten, same_value
from tests.conftest import error_text, structured

ADAPTER = TypeAdapter(ProbeInputs)
BASE = {"model": {"name": "resnet50", "width": 64}, "optimizer": {"name": "adamw", "lr": 0.001},
        "data": {"batch_size": 256, "augment": ["flip", "crop"]}, "seed": 0, "run_name": "base"}


async def probe(**inputs: Any) -> ProbeResult:
    return await run_probe(ADAPTER.validate_python({"probe": "control_diff", **inputs}))


def changed(**dotted: Any) -> dict[str, Any]:
    cfg = json.loads(json.dumps(BASE))
    for key, value in dotted.items():
        node = cfg
        *parents, leaf = key.split("__")
        for p in parents:
            node = node[p]
        node[leaf] = value
    return cfg


@pytest.fixture
def gpu1(env, box, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    env.write_inventory({"gpu1": {"destination": "testbox"}})
    return tmp_path


def test_flatten_gives_dotted_keys_through_mappings_and_lists() -> None:
    flat = flatten({"a": {"b": 1, "c": [10, {"d": 2}]}, "e": {}, "f": []})
    assert flat == {"a.b": 1, "a.c.0": 10, "a.c.1.d": 2, "e": {}, "f": []}


def test_one_and_one_point_zero_are_the_same_value_but_true_is_not_one() -> None:
    assert same_value(1, 1.0)
    assert not same_value(True, 1)
    assert same_value(float("nan"), float("nan"))


async def test_only_the_declared_key_differs_so_the_comparison_is_clean() -> None:
    r = await probe(run={"inline": changed(optimizer__lr=0.01, run_name="lr-sweep")},
                    control={"inline": BASE}, ablated=["optimizer.lr"], ignore=["run_name"])
    assert r.verdict == "clean"
    assert r.measurements["differing"] == [{"key": "optimizer.lr", "run": "0.01", "control": "0.001"}]
    assert r.measurements["ignored_differing_count"] == 1
    assert r.next_probe is not None and r.next_probe.run_probe == "trajectory"
    assert r.route == "references://verifying/methodology#vp1"


async def test_an_undeclared_difference_is_a_bug_and_is_named_in_the_disclosure() -> None:
    r = await probe(run={"inline": changed(optimizer__lr=0.01, data__batch_size=128)},
                    control={"inline": BASE}, ablated=["optimizer.lr"], ignore=["run_name"])
    assert r.verdict == "bug"
    assert r.measurements["undeclared"] == ["data.batch_size"]
    assert "data.batch_size" in r.disclosure and "not an ablation result" in r.disclosure


async def test_a_declared_ablation_that_never_reached_the_config_is_a_bug() -> None:
    r = await probe(run={"inline": BASE}, control={"inline": BASE}, ablated=["optimizer.lr"])
    assert r.verdict == "bug"
    assert r.measurements["declared_not_differing"] == ["optimizer.lr"]
    assert "never took effect" in r.disclosure


async def test_a_parent_key_covers_its_children_and_a_glob_ignores_tracker_noise() -> None:
    run = changed(optimizer__name="sgd", optimizer__lr=0.1)
    run["wandb"] = {"id": "x1y2"}
    r = await probe(run={"inline": run}, control={"inline": {**BASE, "wandb": {"id": "z9"}}},
                    ablated=["optimizer"], ignore=["wandb.*"])
    assert r.verdict == "clean" and r.measurements["differing_count"] == 2


async def test_a_key_present_on_one_side_only_counts_as_differing() -> None:
    run = changed()
    run["model"]["dropout"] = 0.1
    r = await probe(run={"inline": run}, control={"inline": BASE}, ablated=[])
    assert r.verdict == "bug"
    assert r.measurements["differing"][0] == {"key": "model.dropout", "run": "0.1", "control": "<absent>"}


async def test_a_working_config_two_axes_away_from_the_failing_one_is_confounded() -> None:
    r = await probe(run={"inline": changed(optimizer__lr=0.01, model__width=128)}, control={"inline": BASE},
                    compare="working_vs_failing")
    assert r.verdict == "confounded"
    assert r.measurements["axes"] == ["model.width", "optimizer.lr"]
    assert "one-axis-at-a-time" in r.disclosure


async def test_working_vs_failing_on_one_axis_is_clean_and_grouping_keys_makes_one_axis() -> None:
    one = await probe(run={"inline": changed(optimizer__lr=0.01)}, control={"inline": BASE},
                      compare="working_vs_failing")
    assert one.verdict == "clean"
    grouped = await probe(run={"inline": changed(optimizer__lr=0.01, optimizer__name="sgd")},
                          control={"inline": BASE}, compare="working_vs_failing", ablated=["optimizer"])
    assert grouped.verdict == "clean" and grouped.measurements["axes_count"] == 1


async def test_identical_configs_that_worked_and_failed_point_at_instability() -> None:
    r = await probe(run={"inline": BASE}, control={"inline": BASE}, compare="working_vs_failing")
    assert r.verdict == "instability"
    assert r.next_probe is not None and r.next_probe.catalog == "VP4"


def test_a_config_given_both_inline_and_as_a_file_is_refused() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        ADAPTER.validate_python({"probe": "control_diff", "run": {"inline": BASE, "file": {"path": "/x.yaml"}},
                                 "control": {"inline": BASE}})


async def test_a_file_without_a_host_to_read_it_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="no host"):
        await probe(run={"file": {"path": "/tmp/run.yaml"}}, control={"inline": BASE})


async def test_yaml_run_against_json_control_on_the_box(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    (gpu1 / "run.yaml").write_text(
        "model:\n  name: resnet50\n  width: 64\noptimizer:\n  name: adamw\n  lr: 1e-2\n"
        "data:\n  batch_size: 256\n  augment: [flip, crop]\nseed: 0\nrun_name: lr\n")
    (gpu1 / "control.json").write_text(json.dumps(BASE))
    r = structured(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "control_diff", "run": {"file": {"path": str(gpu1 / "run.yaml")}},
        "control": {"file": {"path": str(gpu1 / "control.json")}}, "ablated": ["optimizer.lr"],
        "ignore": ["run_name"]}}))
    assert r["verdict"] == "clean", r
    assert [f["host"] for f in r["inputs_read"]] == ["gpu1", "gpu1"]
    assert r["measurements"]["differing"] == [{"key": "optimizer.lr", "run": "0.01", "control": "0.001"}]


async def test_yaml_exponent_floats_compare_as_numbers_not_strings(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    (gpu1 / "a.yaml").write_text("lr: 1e-3\nwd: 5.0e-4\n")
    (gpu1 / "b.toml").write_text("lr = 0.001\nwd = 0.0005\n")
    r = structured(await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "control_diff", "run": {"file": {"path": str(gpu1 / "a.yaml")}},
        "control": {"file": {"path": str(gpu1 / "b.toml")}}}}))
    assert r["verdict"] == "clean" and r["measurements"]["differing_count"] == 0


async def test_a_config_that_does_not_parse_is_a_clear_error(gpu1: Path, client) -> None:  # type: ignore[no-untyped-def]
    (gpu1 / "broken.yaml").write_text("model: [unclosed\n")
    (gpu1 / "list.json").write_text("[1, 2]")
    res = await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "control_diff", "run": {"file": {"path": str(gpu1 / "broken.yaml")}},
        "control": {"inline": BASE}}})
    assert "does not parse as yaml" in error_text(res)
    res = await client.call_tool("run_probe", {"host": "gpu1", "inputs": {
        "probe": "control_diff", "run": {"file": {"path": str(gpu1 / "list.json")}},
        "control": {"inline": BASE}}})
    assert "mapping at its top level" in error_text(res)
