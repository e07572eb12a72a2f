"""The knowledge base parses, its profiles validate, its ids are unique and its links resolve."""

from __future__ import annotations

import re
from collections import defaultdict

import pytest

from mcp_server import knowledge as k
from mcp_server.errors import NotFoundError

SECTIONS = ["LAUNCH", "STORAGE MODEL", "NETWORK", "SPOT / INTERRUPTION + RESUME", "TEARDOWN / BILLING",
            "DAEMON TOOL", "TOP GOTCHAS", "SCRIPT OVERRIDES"]
BRIEF_PLATFORMS = ["local", "autodl", "runpod", "vastai", "lambda", "paperspace", "china", "generic-ssh"]
REFERENCE_TREE = {
    "run-local": {"env-hygiene", "launch", "multi-gpu", "local-oom"},
    "run-remote": {"principles", "lifecycle-checklist", "monitoring", "ssh-transfer", "spot-resilience",
                   "china-network", "parallel-ablation", "multinode", "artifact-layout", "gotchas", "audit-checks",
                   "windows-client"},
    "verifying": {"methodology", "representation-collapse", "smoke-hidden-failures"},
    "delivering": {"principles", "data-architecture", "evidence-manifest-schema", "figures", "delivery-gate"},
    "training": {"oom-memory", "distributed-launch", "precision-stability", "throughput-profiling",
                 "checkpoint-resume", "by-domain", "convergence-debugging", "data-pipeline"},
}
LINK = re.compile(r"\b(references|profiles)://([a-z_][a-z0-9_/-]*[a-z0-9])(?:#([a-z0-9][a-z0-9-]*))?")


def all_docs() -> list[k.KnowledgePage]:
    return [*k.docs("references"), *k.docs("profiles")]


def ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i}" for i in range(1, n + 1)]


@pytest.mark.parametrize("d", all_docs(), ids=lambda d: d.uri)
def test_every_page_parses_into_titled_described_sections(d: k.KnowledgePage) -> None:
    assert d.sections and d.sections[0].level == 1, "a page opens with one level-1 title"
    assert sum(s.level == 1 for s in d.sections) == 1
    assert d.title and not d.title.startswith("#")
    assert len(d.description) >= 40, "the opening paragraph says what the page is for"
    anchors = [s.anchor for s in d.sections]
    assert len(anchors) == len(set(anchors))


def test_the_reference_tree_of_the_brief_exists() -> None:
    paths = {d.path for d in k.docs("references")}
    for folder, pages in REFERENCE_TREE.items():
        assert {f"{folder}/{p}" for p in pages} <= paths, folder
    assert {"companions", "self-improvement", "index"} <= paths


def test_every_platform_of_the_brief_has_a_validated_profile() -> None:
    assert set(BRIEF_PLATFORMS) == set(k.profiles())
    for name in BRIEF_PLATFORMS:
        assert k.profile(name).platform == name


def test_the_schema_page_is_served_but_is_not_a_platform() -> None:
    assert "_schema" in {d.path for d in k.docs("profiles")}
    assert "_schema" not in k.profiles()


@pytest.mark.parametrize("name", BRIEF_PLATFORMS)
def test_profile_sections_come_in_the_fixed_order(name: str) -> None:
    d = k.doc("profiles", name)
    top = [re.sub(r"^\d+\.\s*", "", s.heading) for s in d.sections if s.level == 2]
    assert top[: len(SECTIONS)] == SECTIONS
    assert "Surface to the user" in d.sections[0].own_text


@pytest.mark.parametrize("name", BRIEF_PLATFORMS)
def test_profile_sections_are_addressable_by_stable_anchors(name: str) -> None:
    d = k.doc("profiles", name)
    for anchor in ("launch", "storage-model", "network", "spot-interruption-resume", "teardown-billing",
                   "daemon-tool", "top-gotchas", "script-overrides"):
        assert d.section(anchor).level == 2


def test_stable_ids_are_unique_across_the_whole_catalog() -> None:
    seen: dict[str, list[str]] = defaultdict(list)
    for d in all_docs():
        for s in d.sections:
            if s.stable_id:
                seen[s.stable_id].append(d.uri)
    dups = {i: uris for i, uris in seen.items() if len(uris) > 1}
    assert dups == {}
    assert len(seen) > 400


@pytest.mark.parametrize(("heading", "anchor", "sid"), [
    ("U7 — No space left at 34 % bytes", "u7", "U7"),
    ("A7b — Uncorrected ECC counters", "a7b", "A7b"),
    ("K8S1 — Pending with Insufficient nvidia.com/gpu", "k8s1", "K8S1"),
    ("VAST10 — Disk cannot grow", "vast10", "VAST10"),
    ("T18b — VRAM under capacity", "t18b", "T18b"),
    ("Phase 0 — audit the box {#phase-0}", "phase-0", None),
    ("The Iron Law {#iron-law}", "iron-law", None),
    ("Run status", "run-status", None),
    ("1. LAUNCH", "1-launch", None),
    ("CUDA out of memory", "cuda-out-of-memory", None),
])
def test_anchors_follow_the_stable_id_then_slug_convention(heading: str, anchor: str, sid: str | None) -> None:
    section = k._split_sections("references", "x", f"# T\n\n## {heading}\n\ntext\n")[1]
    assert (section.anchor, section.stable_id) == (anchor, sid)
    assert "{#" not in section.heading


def test_a_heading_inside_a_code_fence_is_not_a_section() -> None:
    body = "# T\n\n```\n## not a heading\n```\n\n## Real\n\nx\n"
    assert [s.anchor for s in k._split_sections("references", "x", body)] == ["t", "real"]


def test_a_section_holds_its_subsections_and_search_text_stops_at_the_next_heading() -> None:
    body = "# T\n\nintro\n\n## A\n\none\n\n### A1 — sub\n\ntwo\n\n## B\n\nthree\n"
    t, a, a1, b = k._split_sections("references", "x", body)
    assert "two" in a.text and "three" not in a.text
    assert a.own_text == "one" and a1.trail == ("T", "A")


@pytest.mark.parametrize(("path", "anchors"), [
    ("run-remote/audit-checks", [*ids("a", 30), "a7b"]),
    ("run-remote/gotchas", ids("u", 44)),
    ("verifying/methodology", [*ids("vp", 16), "vp6a", "vp6j", "vp8f", "vp9k", "mde", "metric-directions"]),
    ("verifying/smoke-hidden-failures", [*ids("sh", 6), "sh3b"]),
    ("verifying/representation-collapse", [*ids("rc", 6), "fingerprints"]),
    ("training/oom-memory", ids("m", 20)),
    ("training/distributed-launch", ids("d", 26)),
    ("training/precision-stability", ids("p", 19)),
    ("training/throughput-profiling", [*ids("t", 23), "t18b"]),
    ("training/checkpoint-resume", [*ids("c", 18), "full-state"]),
    ("training/convergence-debugging", ids("o", 26)),
    ("training/data-pipeline", ids("dp", 15)),
    ("training/by-domain", [*ids("l", 10), *ids("v", 7), *ids("df", 8), *ids("r", 6), *ids("x", 5)]),
    ("run-remote/multinode", ids("mn", 6)),
    ("run-remote/lifecycle-checklist", [f"phase-{i}" for i in range(6)]),
    ("run-remote/principles", ["iron-law", "invariants", "authority"]),
    ("run-remote/monitoring", ["run-status", "failure-signatures", "four-layers"]),
    ("run-remote/ssh-transfer", ["host-keys", "transfer-rules", "ssh-flavours"]),
    ("run-remote/windows-client",
     ["openssh", "key-permissions", "agent", "scp-sftp", "crlf", "paths", "bounded-retry"]),
    ("run-remote/launch", ["disk-gate"]),
    ("run-remote/artifact-layout", ["before-park"]),
    ("run-local/env-hygiene", ["gate", "identity", *ids("env", 7)]),
    ("run-local/multi-gpu", ["launch", "co-located", *ids("mg", 5)]),
    ("run-local/launch", ["gate", "detach", "power", "disk", "run-dir"]),
    ("run-local/local-oom", ["regression", "oom-killer", "training"]),
    ("index", ["sources", "staleness"]),
    ("delivering/delivery-gate", ids("g", 5)),
    ("delivering/principles", ids("dl", 8)),
])
def test_every_catalog_entry_the_tools_route_to_exists(path: str, anchors: list[str]) -> None:
    page = k.doc("references", path)
    for anchor in anchors:
        assert page.section(anchor)


def test_each_catalog_entry_reads_symptom_cause_check_fix() -> None:
    pages = ["run-remote/gotchas", "run-local/env-hygiene", "run-local/multi-gpu", "training/oom-memory",
             "training/distributed-launch", "training/precision-stability",
             "training/throughput-profiling", "training/checkpoint-resume", "training/convergence-debugging",
             "training/data-pipeline", "training/by-domain", "run-remote/multinode"]
    for path in pages:
        for s in k.doc("references", path).sections:
            if s.stable_id:
                for part in ("**Symptom:**", "**Cause:**", "**Check:**", "**Fix:**"):
                    assert part in s.own_text, (path, s.anchor, part)


@pytest.mark.parametrize("name", list(BRIEF_PLATFORMS))
def test_profile_traps_have_symptom_cause_fix(name: str) -> None:
    traps = [s for s in k.doc("profiles", name).sections if s.stable_id]
    assert len(traps) >= 5
    for s in traps:
        for part in ("**Symptom:**", "**Cause:**", "**Fix:**"):
            assert part in s.own_text, (name, s.anchor)


def test_every_link_inside_the_knowledge_base_resolves() -> None:
    broken = []
    for d in all_docs():
        for m in LINK.finditer(d.text):
            try:
                k.resolve(m.group(0))
            except NotFoundError:
                broken.append(f"{d.uri}: {m.group(0)}")
    assert broken == []


def test_resolve_names_the_missing_section_and_the_known_anchors() -> None:
    with pytest.raises(NotFoundError) as err:
        k.resolve("references://run-remote/gotchas#u99")
    assert "#u99" in str(err.value) and "u44" in str(err.value)
    with pytest.raises(NotFoundError):
        k.resolve("references://no/such/page")
    page, section = k.resolve("profiles://runpod#rp4")
    assert page.path == "runpod" and section is not None and section.stable_id == "RP4"


@pytest.mark.parametrize(("path", "tool"), [
    ("run-remote/audit-checks", "audit_box"), ("run-remote/monitoring", "tail_logs"),
    ("run-remote/launch", "launch_detached"), ("run-remote/pull-verify", "verify_artifacts"),
    ("run-remote/teardown", "teardown"), ("verifying/methodology", "run_probe"),
    ("verifying/representation-collapse", "run_probe"), ("delivering/reconcile", "reconcile_evidence"),
    ("delivering/delivery-gate", "reconcile_evidence"), ("run-remote/lifecycle-checklist", "remote_run"),
])
def test_pages_describing_an_automated_check_name_the_tool_that_performs_it(path: str, tool: str) -> None:
    assert f"`{tool}" in k.doc("references", path).sections[0].own_text
