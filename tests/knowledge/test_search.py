"""search_references: symptoms as users phrase them find the right page in the top 3; identifiers,
Chinese and stable ids are tokenized so they match; hits come grouped by page with dates."""

from __future__ import annotations

import pytest

from mcp_server.knowledge import resolve
from mcp_server.search import default_index, expand, tokenize
from mcp_server.server import build_server
from mcp_server.settings import Settings
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


def top_uris(query: str, k: int = 3, kind: str = "any") -> list[str]:
    return [s.uri if s.level > 1 else f"{s.kind}://{s.path}" for s, _ in default_index().rank(query, k, kind)]  # type: ignore[arg-type]


@pytest.mark.parametrize(("query", "page"), SYMPTOMS, ids=[q for q, _ in SYMPTOMS])
def test_a_symptom_finds_its_page_in_the_top_three(query: str, page: str) -> None:
    got = top_uris(query)
    assert page in [page_of(u) for u in got], got


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
    assert top_uris(query, 1) == [uri]


def test_hits_are_sections_grouped_by_page_with_an_excerpt_and_a_uri_that_names_the_anchor() -> None:
    pages = default_index().search("/dev/shm bus error", limit=5)
    sections = [h for p in pages for h in p.sections]
    assert 1 <= len(sections) <= 5
    assert len({p.page for p in pages}) == len(pages), "one entry per page"
    for p in pages:
        assert p.title and p.kind in ("reference", "profile")
        assert p.sections == sorted(p.sections, key=lambda h: -h.score)
        for h in p.sections:
            page, section = resolve(h.uri)
            assert page.uri == p.page and h.heading
            assert h.uri == (section.uri if section else page.uri)
            assert 0 < len(h.excerpt) <= 242 and "<!--" not in h.excerpt
    best = [p.sections[0].score for p in pages]
    assert best == sorted(best, reverse=True), "pages come in the order of their best section"
    assert "bus error" in pages[0].sections[0].excerpt.lower()


def test_a_hit_shows_when_its_facts_were_verified_and_where_from() -> None:
    from mcp_server import facts

    hit = next(h for p in default_index().search("runpod container disk volume disk price stopped", limit=10)
               for h in p.sections if h.uri == "profiles://runpod#storage-model")
    verified, sources, unsourced = facts.section_dates(hit.uri)
    assert (hit.verified, hit.sources, hit.unsourced) == (verified, sources[:3], unsourced)
    assert verified is not None and verified <= "2026-12-04", "the oldest date of the section's facts"
    assert "https://docs.runpod.io/pods/storage" in sources


def test_nonsense_finds_nothing_and_the_kind_filter_keeps_to_its_sections() -> None:
    idx = default_index()
    assert idx.search("zzzqqq xxyyzz") == []
    assert idx.search("the and of") == []
    assert {p.kind for p in idx.search("billing stop", limit=10, kind="profile")} == {"profile"}
    assert {p.kind for p in idx.search("billing stop", limit=10, kind="reference")} == {"reference"}
    for p in idx.search("killed no traceback", limit=10, kind="signature"):
        for h in p.sections:
            _, section = resolve(h.uri)
            assert section is not None and ("**Symptom:**" in section.own_text or "signature" in h.uri)


def test_the_tokenizer_stems_words_and_keeps_ids_whole() -> None:
    assert tokenize("Charging stopped Pods") == tokenize("charge stop pod")
    assert "u7" in tokenize("U7") and "bf16" in tokenize("bf16") and "关机" in tokenize("关机")
    own, extra = expand("still charging")
    assert set(tokenize("billing")) <= set(extra)


@pytest.mark.parametrize(("text", "whole", "parts"), [
    ("hf_transfer", "hf_transfer", ["hf", "transfer"]),
    ("CUDA_VISIBLE_DEVICES=1", "cuda_visible_devices", ["cuda", "visibl", "devic"]),
    ("complete.json", "complete_json", ["complet", "json"]),
    ("nvidia-smi", "nvidia_smi", ["nvidia", "smi"]),
    ("/dev/shm", "dev_shm", ["dev", "shm"]),
    ("Xid 79", "xid_79", ["xid", "79"]),
    ("xid79", "xid_79", ["xid79"]),
    ("exit 137", "exit_137", ["exit", "137"]),
])
def test_identifiers_are_indexed_whole_and_split(text: str, whole: str, parts: list[str]) -> None:
    tokens = tokenize(text)
    assert whole in tokens and set(parts) <= set(tokens)


def test_hyphen_underscore_and_dot_spellings_of_an_identifier_meet() -> None:
    assert "hf_transfer" in tokenize("hf-transfer") and "hf_transfer" in tokenize("HF_TRANSFER")


def test_chinese_is_indexed_as_character_bigrams() -> None:
    assert tokenize("释放实例") == ["释放", "放实", "实例"]
    assert tokenize("卡") == ["卡"]
    assert "数据" in tokenize("autodl 数据盘满了") and "autodl" in tokenize("autodl 数据盘满了")


@pytest.mark.parametrize(("query", "uri"), [
    ("hf_transfer hangs", "references://run-remote/china-network#env-switchboard"),
    ("CUDA_DEVICE_ORDER", "references://run-local/multi-gpu#mg3"),
    ("PYTHONNOUSERSITE", "references://run-local/env-hygiene#env4"),
    ("NCCL_P2P_DISABLE", "references://run-local/multi-gpu#mg1"),
    ("COMPLETE.json", "references://run-remote/artifact-layout#capsule"),
])
def test_an_exact_identifier_finds_the_section_that_explains_it(query: str, uri: str) -> None:
    assert uri in top_uris(query, 3)


async def test_search_references_tool_end_to_end(client) -> None:
    out = structured(await client.call_tool("search_references", {"query": "stopped pod still charging", "limit": 3}))
    assert out["query"] == "stopped pod still charging" and out["hint"] is None
    sections = [h for p in out["pages"] for h in p["sections"]]
    assert len(sections) == 3
    assert any(p["page"] == "profiles://runpod" for p in out["pages"])
    assert all("verified" in h and "sources" in h for h in sections)
    async with client.session() as c:
        got = await c.read_resource(sections[0]["uri"])
    assert got.contents[0].text


async def test_search_references_answers_a_chinese_question(client) -> None:
    out = structured(await client.call_tool("search_references", {"query": "autodl 关机以后数据盘还收费吗"}))
    autodl = next(p for p in out["pages"] if p["page"] == "profiles://autodl")
    assert out["pages"].index(autodl) <= 1
    assert autodl["sections"][0]["uri"] == "profiles://autodl#teardown-billing"


async def test_search_references_says_what_to_try_when_nothing_matches(client) -> None:
    out = structured(await client.call_tool("search_references", {"query": "zzzqqq", "kind": "profile"}))
    assert out["pages"] == [] and "references://index" in out["hint"]


async def test_search_references_rejects_a_limit_out_of_range(client) -> None:
    assert "limit" in error_text(await client.call_tool("search_references", {"query": "oom", "limit": 99}))


async def test_search_references_is_read_only_and_links_its_references(client) -> None:
    async with client.session() as c:
        tool = next(t for t in (await c.list_tools()).tools if t.name == "search_references")
    assert tool.annotations.read_only_hint and not tool.annotations.destructive_hint
    full = next(t for t in await build_server(Settings.from_env()).list_tools() if t.name == "search_references")
    assert "references://" in (full.description or "")
