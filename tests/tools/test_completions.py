"""Argument completions end to end through a real MCP client: hosts from the inventory and the
ssh config (patterns skipped), run ids from the ledger filtered by the host already chosen,
platforms, reference paths and a page's anchors; an argument we do not know gets an empty list."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from mcp.types import Completion, PromptReference, ResourceTemplateReference

from mcp_server import knowledge as k
from mcp_server.ledger import Ledger
from mcp_server.server import build_server
from mcp_server.settings import Settings
from mcp_server.tools.completions import MAX_VALUES, pick, ssh_aliases

RUNS = ResourceTemplateReference(uri="runs://{host}/{run_id}")
REFS = ResourceTemplateReference(uri="references://{+path}#{anchor}")
PROFILES = ResourceTemplateReference(uri="profiles://{platform}#{anchor}")
REMOTE_RUN = PromptReference(name="remote_run")


async def complete(ref: PromptReference | ResourceTemplateReference, name: str, value: str = "",
                   given: dict[str, str] | None = None) -> Completion:
    async with Client(build_server(Settings.from_env())) as c:
        return (await c.complete(ref, {"name": name, "value": value}, given)).completion


def launched(*runs: tuple[str, str]) -> None:
    """Launch records in the ledger, oldest first, as launch_detached writes them."""
    ledger = Ledger.open(Settings.from_env().ledger_path)
    try:
        for host, run_id in runs:
            ledger.record("launch", host=host, run_id=run_id, summary="test")
    finally:
        ledger.close()


async def test_the_server_advertises_completions_and_its_title() -> None:
    async with Client(build_server(Settings.from_env())) as c:
        assert c.server_capabilities.completions is not None
        info = c.server_info
    assert info is not None and info.title == "Remote GPU Trainer"


async def test_host_lists_the_inventory_local_and_ssh_aliases_without_patterns(env) -> None:
    env.write_inventory({"h100-a": {"destination": "ubuntu@10.0.0.5"}, "a100": {"destination": "root@10.0.0.6"}})
    env.ssh_config.write_text("Host *\n  User me\nHost h100-b gpu?x !bad\n  Hostname 10.0.0.7\n"
                              "Host=lab-box\nMatch host foo\n")
    got = await complete(RUNS, "host")
    assert got.values == ["h100-a", "a100", "local", "h100-b", "lab-box"]
    assert got.total == 5 and not got.has_more


async def test_host_filters_by_prefix_case_insensitively(env) -> None:
    env.write_inventory({"H100-a": {"destination": "ubuntu@10.0.0.5"}, "a100": {"destination": "root@10.0.0.6"}})
    env.ssh_config.write_text("Host h100-b\n")
    assert (await complete(REMOTE_RUN, "host", "h1")).values == ["H100-a", "h100-b"]
    assert (await complete(REMOTE_RUN, "host", "LO")).values == ["local"]


async def test_ssh_config_includes_are_followed_and_none_disables_it(env, monkeypatch) -> None:
    (env.root / "conf.d").mkdir()
    (env.root / "conf.d" / "lab").write_text("Host included-box\n")
    env.ssh_config.write_text("Include conf.d/*\nHost top\n")
    assert ssh_aliases(env.ssh_config) == ["included-box", "top"]
    assert ssh_aliases(None) == [] and ssh_aliases(env.root / "missing") == []
    monkeypatch.setenv("RGT_SSH_CONFIG", "none")
    assert (await complete(RUNS, "host")).values == ["local"]


async def test_run_id_is_newest_first_and_filtered_by_the_given_host() -> None:
    launched(("local", "r-old"), ("gpu1", "r-gpu"), ("local", "r-new"))
    assert (await complete(RUNS, "run_id")).values == ["r-new", "r-gpu", "r-old"]
    assert (await complete(RUNS, "run_id", "", {"host": "local"})).values == ["r-new", "r-old"]
    assert (await complete(RUNS, "run_id", "R-N", {"host": "local"})).values == ["r-new"]
    assert (await complete(PromptReference(name="deliver"), "run_id", "r-g")).values == ["r-gpu"]


async def test_a_host_with_runs_in_the_ledger_is_offered_too() -> None:
    launched(("me@10.0.0.9", "r1"))
    assert "me@10.0.0.9" in (await complete(RUNS, "host")).values


async def test_platform_offers_profiles_and_variants_in_prompts_and_pages_in_templates() -> None:
    prompt = (await complete(REMOTE_RUN, "platform")).values
    assert set(k.profiles()) <= set(prompt) and "slurm" in prompt
    template = (await complete(PROFILES, "platform")).values
    assert set(template) == set(k.profiles()) and "_schema" not in template
    assert (await complete(PROFILES, "platform", "RUN")).values == ["runpod"]


async def test_reference_paths_and_the_anchors_of_the_given_page() -> None:
    paths = (await complete(REFS, "path", "run-remote/")).values
    assert paths and all(p.startswith("run-remote/") for p in paths)
    page = k.doc("references", "run-remote/gotchas")
    got = await complete(REFS, "anchor", "", {"path": "run-remote/gotchas"})
    assert got.values == [s.anchor for s in page.sections][:MAX_VALUES]
    assert "u7" in (await complete(REFS, "anchor", "U", {"path": "run-remote/gotchas"})).values


async def test_profile_anchors_come_from_the_given_platform_page() -> None:
    got = await complete(PROFILES, "anchor", "", {"platform": "runpod"})
    assert got.values == [s.anchor for s in k.doc("profiles", "runpod").sections][:MAX_VALUES]


@pytest.mark.parametrize(("ref", "name", "given"), [
    (REFS, "anchor", {}),
    (REFS, "anchor", {"path": "no/such-page"}),
    (REMOTE_RUN, "run_name", {}),
    (REMOTE_RUN, "no_such_argument", {}),
    (PromptReference(name="no_such_prompt"), "colour", {}),
])
async def test_an_argument_we_cannot_complete_gets_an_empty_list_not_an_error(ref, name, given) -> None:
    got = await complete(ref, name, "", given)
    assert got.values == [] and not got.has_more


def test_more_than_a_hundred_matches_are_cut_with_the_total() -> None:
    got = pick([f"run-{i:03d}" for i in range(150)] + ["other"], "RUN-")
    assert len(got.values) == MAX_VALUES and got.values[0] == "run-000"
    assert got.total == 150 and got.has_more


def test_ssh_aliases_skip_every_pattern_form(tmp_path: Path) -> None:
    cfg = tmp_path / "config"
    cfg.write_text('# comment\nHost a "b c" *.corp x? !neg\nhost d # trailing\n')
    assert ssh_aliases(cfg) == ["a", "d"]
