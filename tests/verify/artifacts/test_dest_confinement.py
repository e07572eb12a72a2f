"""Security: verify_artifacts writes locally only under RGT_HOME/pulls or a folder listed in
RGT_PULL_ROOTS — never where a misled agent points `dest` (~/.ssh, the user's code), whether by
an absolute path, `..` or a symlink; a relative dest lands under the pulls folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.conftest import error_text, structured


async def _verify(client: Any, results: Path, dest: str) -> Any:
    return await client.call_tool("verify_artifacts", {"host": "gpu1", "root": str(results),
                                                       "roster": ["train.csv"], "dest": dest})


@pytest.fixture
def narrow(monkeypatch: pytest.MonkeyPatch, env: Any) -> Path:
    """Only the default pulls folder is allowed (no RGT_PULL_ROOTS)."""
    monkeypatch.delenv("RGT_PULL_ROOTS")
    return env.home / "pulls"


@pytest.mark.parametrize("dest", ["/etc/rgt-pull", "~/.ssh/rgt", "../../outside", "x/../../../../tmp/y"])
async def test_security_dest_outside_the_pull_roots_is_refused(results: Path, client: Any, narrow: Path,
                                                              dest: str) -> None:
    res = await _verify(client, results, dest)
    text = error_text(res)
    assert "[BAD_INPUT]" in text and "dest is outside" in text and "RGT_PULL_ROOTS" in text


async def test_security_a_symlink_in_the_pulls_folder_cannot_lead_dest_out(results: Path, client: Any, narrow: Path,
                                                                           tmp_path_factory: Any) -> None:
    outside = tmp_path_factory.mktemp("outside")
    narrow.mkdir(parents=True)
    (narrow / "link").symlink_to(outside)
    res = await _verify(client, results, "link/run")
    assert "dest is outside" in error_text(res) and not any(outside.iterdir())


async def test_a_relative_dest_lands_under_the_pulls_folder(results: Path, client: Any, narrow: Path) -> None:
    r = structured(await _verify(client, results, "mine/run-1"))
    assert Path(r["dest"]) == (narrow / "mine" / "run-1").resolve()


async def test_a_folder_listed_in_rgt_pull_roots_is_allowed(results: Path, client: Any, narrow: Path,
                                                           monkeypatch: pytest.MonkeyPatch,
                                                           tmp_path_factory: Any) -> None:
    project = tmp_path_factory.mktemp("project")
    monkeypatch.setenv("RGT_PULL_ROOTS", f"/nonexistent:{project}")
    r = structured(await _verify(client, results, str(project / "results" / "run-1")))
    assert Path(r["dest"]) == (project / "results" / "run-1").resolve()
