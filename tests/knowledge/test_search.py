"""search_references: symptoms as users phrase them find the right page in the top 3."""

from __future__ import annotations

import pytest

from mcp_server.search import default_index, expand, tokenize
from tests.conftest import error_text, structured

# (what a user types, the page that must be among the top 3 hits)
SYMPTOMS: list[tuple[str, str]] = [
    ("loss NaN after warmup bf16", "references://training/precision-stability"),
    ("stopped pod still charging", "profiles://runpod"),
    ("/dev/shm bus error", "references://training/data-pipeline"),
    ("No space left on device but df shows 34% used", "references://run-remote/gotchas"),
    ("wandb init timeout on autodl", "profiles://autodl"),
    ("Host key verification failed after recreating the instance", "references://run-remote/ssh-transfer"),
    ("all ranks frozen no traceback NCCL timeout", "references://training/distributed-launch"),
    ("relaunch trains from scratch instead of resuming", "references://training/checkpoint-resume"),
    ("No inf checks were recorded for this optimizer", "references://training/checkpoint-resume"),
    ("Address already in use errno 98 second job", "references://training/distributed-launch"),
    ("lambda shutdown but still billing", "profiles://lambda"),
    ("vast instance stuck in scheduling", "profiles://vastai"),
    ("GPU utilization 0 but steps advancing", "references://run-remote/gotchas"),
    ("same metric byte identical across two runs", "references://verifying/smoke-hidden-failures"),
    ("nvidia-smi shows no process but memory is used", "references://run-remote/gotchas"),
    ("hf download stalls even with the mirror", "profiles://autodl"),
    ("$'\\r': command not found", "references://run-remote/gotchas"),
    ("python3 command not found exit 127 autodl", "profiles://autodl"),
    ("how many seeds minimum detectable effect", "references://verifying/methodology"),
    ("same images in train and test split leakage", "references://verifying/methodology"),
    ("outputs identical for every input cosine 1.0", "references://verifying/representation-collapse"),
    ("paper and slides show different numbers", "references://delivering/delivery-gate"),
    ("bar chart y axis truncated", "references://delivering/figures"),
    ("instance released after 15 days powered off", "profiles://autodl"),
    ("killed exit 137 no traceback with dataloader workers", "references://run-remote/gotchas"),
    ("Xid 79 GPU fell off the bus", "references://run-remote/gotchas"),
    ("gpu slower than yesterday thermal throttling", "references://run-remote/audit-checks"),
    ("kubernetes pod pending insufficient nvidia.com/gpu", "profiles://generic-ssh"),
    ("LanRui data disk keeps billing while stopped", "profiles://china"),
    ("gpushare turbo proxy breaks pip", "profiles://china"),
    ("DPO reward margins flat", "references://training/by-domain"),
    ("tokenizer does not have a padding token", "references://training/by-domain"),
    ("diffusion loss low but samples look bad", "references://training/by-domain"),
    ("truncated checkpoint PytorchStreamReader failed reading zip archive", "references://training/checkpoint-resume"),
    ("teardown refused before pull verified", "references://run-remote/teardown"),
    ("PULL_MANIFEST roster mismatch", "references://run-remote/pull-verify"),
    ("checkpoint every how many steps on spot instances", "references://run-remote/spot-resilience"),
    ("no_proxy domestic mirrors slow through proxy", "references://run-remote/china-network"),
    ("paperspace run dies after 6 hours", "profiles://paperspace"),
    ("training in conda base env", "references://run-local/env-hygiene"),
    ("CUDA out of memory tried to allocate reserved by PyTorch", "references://training/oom-memory"),
    ("run status lost what does it mean", "references://run-remote/monitoring"),
    ("EVIDENCE.json fields provenance hash", "references://delivering/evidence-manifest-schema"),
    ("NCCL picks docker0 interface slow multi node", "references://run-remote/multinode"),
]


def page_of(uri: str) -> str:
    return uri.split("#", 1)[0]


@pytest.mark.parametrize(("query", "page"), SYMPTOMS, ids=[q for q, _ in SYMPTOMS])
def test_a_symptom_finds_its_page_in_the_top_three(query: str, page: str) -> None:
    hits = default_index().search(query, limit=3)
    assert page in [page_of(h.uri) for h in hits], [h.uri for h in hits]


def test_the_symptom_table_is_large_and_covers_both_folders() -> None:
    assert len(SYMPTOMS) >= 30
    assert {p.split("://")[0] for _, p in SYMPTOMS} == {"references", "profiles"}


@pytest.mark.parametrize(("query", "uri"), [
    ("U7", "references://run-remote/gotchas#u7"),
    ("RP4", "profiles://runpod#rp4"),
    ("A7b", "references://run-remote/audit-checks#a7b"),
    ("DP15", "references://training/data-pipeline#dp15"),
])
def test_a_stable_id_finds_its_own_entry_first(query: str, uri: str) -> None:
    assert default_index().search(query, limit=1)[0].uri == uri


def test_hits_carry_path_heading_anchor_excerpt_and_a_resolvable_uri() -> None:
    from mcp_server.knowledge import resolve

    hits = default_index().search("/dev/shm bus error", limit=5)
    assert 1 <= len(hits) <= 5
    for h in hits:
        page, section = resolve(h.uri)
        assert page.path == h.path and h.heading
        assert (section.anchor if section else None) == h.anchor
        assert 0 < len(h.excerpt) <= 242
    assert hits == sorted(hits, key=lambda h: -h.score)
    assert "bus error" in hits[0].excerpt.lower()


def test_nonsense_finds_nothing_and_kinds_filter_the_folders() -> None:
    idx = default_index()
    assert idx.search("zzzqqq xxyyzz") == []
    assert idx.search("the and of") == []
    assert {h.kind for h in idx.search("billing stop", limit=10, kinds=("profiles",))} == {"profiles"}


def test_tokenizer_stems_words_and_keeps_ids_whole() -> None:
    assert tokenize("Charging stopped Pods") == tokenize("charge stop pod")
    assert "u7" in tokenize("U7") and "bf16" in tokenize("bf16") and "关机" in tokenize("关机")
    assert set(tokenize("billing")) <= set(expand("still charging"))


async def test_search_references_tool_end_to_end(client) -> None:
    out = structured(await client.call_tool("search_references", {"query": "stopped pod still charging", "limit": 3}))
    assert out["query"] == "stopped pod still charging" and out["hint"] is None
    assert len(out["hits"]) == 3
    assert any(h["uri"].startswith("profiles://runpod") for h in out["hits"])
    async with client.session() as c:
        got = await c.read_resource(out["hits"][0]["uri"])
    assert got.contents[0].text


async def test_search_references_says_what_to_try_when_nothing_matches(client) -> None:
    out = structured(await client.call_tool("search_references", {"query": "zzzqqq", "kind": "profiles"}))
    assert out["hits"] == [] and "references://index" in out["hint"]


async def test_search_references_rejects_a_limit_out_of_range(client) -> None:
    assert "limit" in error_text(await client.call_tool("search_references", {"query": "oom", "limit": 99}))


async def test_search_references_is_read_only_and_links_its_references(client) -> None:
    async with client.session() as c:
        tool = next(t for t in (await c.list_tools()).tools if t.name == "search_references")
    assert tool.annotations.read_only_hint and not tool.annotations.destructive_hint
    assert "references://" in (tool.description or "")
