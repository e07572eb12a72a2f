"""RGT_HOME holds all of the server's state, the local box's runs included: a local launch lands
under $RGT_HOME/local unless RGT_LOCAL_ROOT or `[hosts.local] durable_root` says otherwise, and
every host's scratch root follows its durable root when the inventory does not name one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_server.errors import ConfigError
from mcp_server.hosts.inventory import Inventory, InventoryEntry
from mcp_server.hosts.pool import HostPool
from mcp_server.settings import Settings
from tests.conftest import Caller, Env, structured


@pytest.fixture
def home_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the user's ~, so 'nothing under ~' is something a test can look at."""
    home = tmp_path / "user-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


async def launch_true(client: Caller) -> dict[str, Any]:
    res = structured(await client.call_tool("launch_detached", {"host": "local", "command": "true", "probe_s": 0}))
    (outcome,) = res["outcomes"]
    assert outcome["error"] is None, outcome
    return dict(outcome["launch"])


def spec_roots(inventory: dict[str, InventoryEntry], name: str) -> tuple[str, str]:
    spec = HostPool(Settings.from_env(), Inventory(hosts=inventory)).spec(name)
    return spec.durable_root, spec.scratch_root


async def test_a_local_launch_with_rgt_home_set_writes_its_run_dir_under_rgt_home_and_nothing_under_home(
        env: Env, client: Caller, home_dir: Path) -> None:
    launched = await launch_true(client)
    run_dir = Path(launched["run_dir"])
    assert run_dir == env.home / "local" / ".rgt" / "runs" / launched["run_id"]
    assert (run_dir / "run.json").is_file()
    assert list(home_dir.iterdir()) == [], "the user's home is untouched"


async def test_rgt_local_root_moves_the_local_box_root(env: Env, client: Caller, home_dir: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGT_LOCAL_ROOT", str(tmp_path / "elsewhere"))
    launched = await launch_true(client)
    assert Path(launched["run_dir"]).parent == tmp_path / "elsewhere" / ".rgt" / "runs"
    assert not (env.home / "local").exists() and list(home_dir.iterdir()) == []


async def test_an_inventory_durable_root_for_local_beats_rgt_local_root(
        env: Env, client: Caller, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RGT_LOCAL_ROOT", str(tmp_path / "from-env"))
    env.write_inventory({"local": {"destination": "local", "durable_root": str(tmp_path / "from-inventory")}})
    launched = await launch_true(client)
    assert Path(launched["run_dir"]).parent == tmp_path / "from-inventory" / ".rgt" / "runs"
    assert not (tmp_path / "from-env").exists()


def test_without_rgt_home_the_local_root_stays_the_familiar_home_folder(home_dir: Path) -> None:
    assert Settings.from_env({}).local_root == home_dir / "rgt"
    assert Settings.from_env({"RGT_HOME": "/state"}).local_root == Path("/state/local")
    assert Settings.from_env({"RGT_HOME": "/state", "RGT_LOCAL_ROOT": "/data/rgt"}).local_root == Path("/data/rgt")


def test_a_relative_rgt_local_root_is_refused() -> None:
    with pytest.raises(ConfigError, match="RGT_LOCAL_ROOT must be an absolute path"):
        Settings.from_env({"RGT_LOCAL_ROOT": "runs"})


ROOTS: dict[str, tuple[dict[str, InventoryEntry], str, tuple[str, str]]] = {
    "the local box by default": ({}, "local", ("{home}/local", "{home}/local/scratch")),
    "an inventory name for the local box": (
        {"gpu1": InventoryEntry(destination="local")}, "gpu1", ("{home}/local", "{home}/local/scratch")),
    "[hosts.local] durable_root": (
        {"local": InventoryEntry(destination="local", durable_root="/data/rgt")}, "local",
        ("/data/rgt", "/data/rgt/scratch")),
    "an ssh box's moved durable root": (
        {"b": InventoryEntry(destination="me@b", durable_root="/mnt/disk/rgt")}, "b",
        ("/mnt/disk/rgt", "/mnt/disk/rgt/scratch")),
    "an ssh box on the profile's defaults": ({}, "me@b", ("~/rgt", "~/rgt/scratch")),
    "a scratch root the inventory names": (
        {"b": InventoryEntry(destination="me@b", durable_root="/mnt/disk/rgt", scratch_root="/fast")}, "b",
        ("/mnt/disk/rgt", "/fast")),
    "a profile's separate scratch tier while its durable root is the default": (
        {"p": InventoryEntry(destination="me@p", profile="paperspace")}, "p", ("/storage/rgt", "/tmp/rgt")),
}


@pytest.mark.parametrize(("inventory", "name", "want"), ROOTS.values(), ids=ROOTS.keys())
def test_scratch_follows_the_durable_root_unless_the_inventory_names_it(
        env: Env, inventory: dict[str, InventoryEntry], name: str, want: tuple[str, str]) -> None:
    assert spec_roots(inventory, name) == tuple(w.format(home=env.home) for w in want)


async def test_audit_box_measures_the_scratch_root_inside_the_local_durable_root(
        env: Env, client: Caller) -> None:
    (env.home / "local" / "scratch").mkdir(parents=True)
    res = structured(await client.call_tool("audit_box", {"host": "local"}))
    (outcome,) = res["outcomes"]
    roles = {role: m["path"] for m in outcome["audit"]["mounts"] for role in m["roles"]}
    assert roles["durable"] == str(env.home / "local")
    assert roles["scratch"] == str(env.home / "local" / "scratch")
