"""Profile front matter reflects the platform facts (the cross-platform matrix, storage survival,
meter verbs), table-driven; the tools read these and nothing else."""

from __future__ import annotations

import re
from typing import Any

import pytest

from mcp_server.knowledge import MeterAction, Profile, profile, profiles

# The cross-platform quick matrix, restated: platform -> the front-matter facts it implies.
MATRIX: dict[str, dict[str, Any]] = {
    "local": {
        "kind": "workstation", "meter_stop_verb": "n/a", "meter_stop_irreversible": "n/a", "detach_primitive": "tmux",
        "spot_available": False, "shared_fs": False, "inode_cap": "host-dependent", "free_egress": "own-isp",
        "china_mirror_needed": "host-dependent"},
    "autodl": {
        "kind": "ssh-rental", "meter_stop_verb": "关机", "meter_stop_irreversible": False, "detach_primitive": "tmux",
        "spot_available": False, "shared_fs": True, "inode_cap": "~200K", "free_egress": True,
        "china_mirror_needed": True},
    "runpod": {
        "kind": "ssh-rental", "meter_stop_verb": "terminate", "meter_stop_irreversible": True,
        "detach_primitive": "tmux", "spot_available": True, "spot_grace": "~5s", "shared_fs": False,
        "inode_cap": "none", "free_egress": True, "china_mirror_needed": False},
    "vastai": {
        "kind": "ssh-rental", "meter_stop_verb": "destroy", "meter_stop_irreversible": True, "detach_primitive": "tmux",
        "relaunch_hook": "/root/onstart.sh", "spot_available": True, "spot_grace": "~0s", "shared_fs": False,
        "inode_cap": "host-dependent", "free_egress": False, "china_mirror_needed": False},
    "lambda": {
        "kind": "cloud-api", "meter_stop_verb": "terminate", "meter_stop_irreversible": True,
        "detach_primitive": "tmux", "spot_available": False, "shared_fs": True, "inode_cap": "none",
        "free_egress": True, "china_mirror_needed": False},
    "paperspace": {
        "kind": "cloud-api", "meter_stop_verb": "shut-down", "meter_stop_irreversible": "mixed",
        "detach_primitive": "tmux", "spot_available": False, "shared_fs": True, "inode_cap": "none",
        "free_egress": True, "china_mirror_needed": False},
    "china": {
        "kind": "ssh-rental", "meter_stop_verb": "per-platform", "meter_stop_irreversible": "mixed",
        "detach_primitive": "tmux", "spot_available": False, "shared_fs": "per-platform",
        "inode_cap": "undocumented", "free_egress": True, "china_mirror_needed": True},
    "generic-ssh": {
        "kind": "ssh", "meter_stop_verb": "manual", "meter_stop_irreversible": True, "detach_primitive": "tmux",
        "spot_available": False, "shared_fs": "host-dependent", "inode_cap": "host-dependent",
        "free_egress": "host-dependent", "china_mirror_needed": "host-dependent"},
}
VARIANTS: dict[str, dict[str, Any]] = {
    "slurm": {"kind": "slurm", "detach_primitive": "sbatch", "spot_grace": "30s", "shared_fs": True},
    "kubernetes": {"kind": "kubernetes", "detach_primitive": "k8s-job", "spot_grace": "30s"},
    "notebook": {"kind": "notebook", "meter_stop_verb": "automatic", "spot_grace": "0s"},
}
ACTIONS: dict[str, list[tuple[str, bool, bool, str]]] = {  # action, park, irreversible, executor
    "local": [("none", True, False, "none")],
    "autodl": [("power-off", True, False, "in-box"), ("release", False, True, "manual")],
    "runpod": [("stop", True, False, "runpod"), ("terminate", False, True, "runpod")],
    "vastai": [("stop", True, False, "vastai"), ("destroy", False, True, "vastai")],
    "lambda": [("terminate", False, True, "lambda")],
    "paperspace": [("shut-down", True, False, "manual"), ("destroy", False, True, "manual")],
    "china": [("stop", True, False, "manual"), ("release", False, True, "manual")],
    "generic-ssh": [("manual", False, True, "manual")],
}
ROOTS = {"local": "~/rgt", "autodl": "/root/autodl-tmp/rgt", "runpod": "/workspace/rgt", "vastai": "/workspace/rgt",
         "lambda": "/home/ubuntu/rgt", "paperspace": "/storage/rgt", "china": "~/rgt", "generic-ssh": "~/rgt"}
APIS = {"runpod": ("runpodctl", "https://rest.runpod.io/v1", "RUNPOD_API_KEY"),
        "vastai": ("vastai", "https://console.vast.ai/api/v0", "VAST_API_KEY"),
        "lambda": (None, "https://cloud.lambdalabs.com/api/v1", "LAMBDA_API_KEY")}
# (platform, path, survives_stop, survives_destroy): the survival matrices, restated.
SURVIVAL = [
    ("autodl", "/root/ckpt", True, False), ("autodl", "/root/autodl-tmp/x", True, False),
    ("autodl", "/root/autodl-fs/x", True, True),
    ("runpod", "/root/x", False, False), ("runpod", "/workspace/x", True, False),
    ("vastai", "/workspace/x", True, False),
    ("lambda", "/home/ubuntu/x", None, False), ("lambda", "/lambda/nfs/proj/x", None, True),
    ("paperspace", "/storage/x", True, True), ("paperspace", "/notebooks/x", True, False),
    ("paperspace", "/usr/local/lib/x", False, False), ("paperspace", "/home/paperspace/x", True, False),
    ("china", "/root/x", False, False), ("china", "/mnt/x", True, True), ("china", "/hy-netdisk/x", True, True),
    ("china", "/hy-tmp/x", False, False), ("china", "/home/featurize/work/x", True, True),
    ("china", "/home/featurize/models", True, False),
    ("china", "/home/user/datadisk/x", True, False),
    ("local", "/home/me/x", True, True), ("generic-ssh", "/home/me/x", True, False),
]


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_front_matter_reflects_the_cross_platform_matrix(name: str) -> None:
    p = profile(name)
    for field, expected in MATRIX[name].items():
        assert getattr(p, field) == expected, (name, field)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_slurm_kubernetes_and_notebooks_are_variants_of_generic_ssh(variant: str) -> None:
    found = {v.name: v for v in profile("generic-ssh").variants}[variant]
    for field, expected in VARIANTS[variant].items():
        assert getattr(found, field) == expected, (variant, field)
    assert found.danger_clocks
    from mcp_server.knowledge import doc
    assert doc("profiles", "generic-ssh").section(found.anchor)


@pytest.mark.parametrize("name", sorted(ACTIONS))
def test_meter_actions_use_the_names_and_executors_teardown_expects(name: str) -> None:
    p = profile(name)
    assert [(a.action, a.park, a.irreversible, a.executor) for a in p.meter_actions] == ACTIONS[name]
    for a in p.meter_actions:
        assert a.stops_gpu_meter
        if a.executor == "manual":
            assert a.manual_steps and len(a.manual_steps) > 60, (name, a.action)
        if a.irreversible:
            assert a.loses or a.survives, (name, a.action)


def action(platform: str, name: str) -> MeterAction:
    found = profile(platform).action(name)
    assert found is not None, (platform, name)
    return found


def test_stop_that_still_bills_says_what_bills() -> None:
    assert any("2x" in b for b in action("runpod", "stop").keeps_billing)
    assert any("forever" in b or "indefinitely" in b or "exists" in b for b in action("vastai", "stop").keeps_billing)
    lam = " ".join(action("lambda", "terminate").keeps_billing)
    assert "NFS" in lam and "shutdown" in lam
    assert any("数据盘" in b for b in action("china", "stop").keeps_billing)
    steps = action("china", "release").manual_steps or ""
    for verb in ("停止并释放", "关机", "释放", "实例归还", "销毁数据盘"):
        assert verb in steps
    assert action("autodl", "release").label == "释放"
    assert action("autodl", "power-off").label == "关机"


@pytest.mark.parametrize(("name", "root"), sorted(ROOTS.items()))
def test_durable_roots_default_per_platform(name: str, root: str) -> None:
    p = profile(name)
    assert p.durable_root == root
    assert p.scratch_root
    assert p.billed is (name != "local")


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_api_facts_name_the_key_variable_never_a_key(name: str) -> None:
    p = profile(name)
    if name in APIS:
        assert p.api is not None and (p.api.cli, p.api.rest_base, p.api.api_key_env) == APIS[name]
    else:
        assert p.api is None


@pytest.mark.parametrize(("name", "path", "stop", "destroy"), SURVIVAL)
def test_storage_tiers_encode_what_survives_stop_and_destroy(
        name: str, path: str, stop: bool | None, destroy: bool) -> None:
    tier = profile(name).tier_for(path)
    assert tier is not None and (tier.survives_stop, tier.survives_destroy) == (stop, destroy), (name, path, tier)


def test_platform_specific_runtime_facts() -> None:
    autodl = profile("autodl")
    assert autodl.python == "/root/miniconda3/bin/python"
    assert autodl.proxy_hook == "source /etc/network_turbo 2>/dev/null || true"
    assert any("15 days" in c for c in autodl.danger_clocks)
    assert profile("local").danger_clocks == []
    assert all(profile(n).danger_clocks for n in MATRIX if n != "local")
    assert [t.path for t in profile("local").tiers] == ["/"]
    assert "/" in [t.path for t in profile("generic-ssh").tiers]


def test_every_profile_round_trips_through_the_model() -> None:
    for p in profiles().values():
        assert Profile.model_validate(p.model_dump()) == p


def documented_fields() -> set[str]:
    """Front-matter field names in the first column of profiles/_schema.md's field table."""
    from mcp_server.knowledge import doc

    table = doc("profiles", "_schema").section("front-matter").own_text
    return {name for row in table.splitlines() if row.startswith("| `")
            for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])}


def test_the_schema_page_documents_exactly_the_fields_of_the_profile_model() -> None:
    assert documented_fields() == set(Profile.model_fields)


@pytest.mark.parametrize("name", sorted(MATRIX))
def test_every_required_schema_field_is_written_in_every_profile(name: str) -> None:
    from mcp_server.knowledge import doc, parse_front_matter

    raw = parse_front_matter(doc("profiles", name).text, name)
    required = {f for f, info in Profile.model_fields.items() if info.is_required()}
    assert required <= documented_fields()
    assert required - set(raw) == set(), "a required field is missing from the front matter"
    assert set(raw) <= documented_fields(), "an undocumented field is in the front matter"


@pytest.mark.parametrize("name", sorted(n for n in MATRIX if n != "local"))
def test_every_billed_profile_dates_its_money_facts(name: str) -> None:
    p = profile(name)
    assert p.billed and p.facts_verified, "a profile that bills says when its billing facts were checked"
