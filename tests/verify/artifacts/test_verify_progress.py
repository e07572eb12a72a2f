"""verify_artifacts reports bytes pulled of the total through the real client's progress
callback, monotone, ending at the roster's size."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import structured


async def test_a_pull_reports_bytes_of_total_monotone(results: Path, client, tmp_path: Path) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    roster = ["seed1/metrics.json", "seed1/best.pth", "train.csv"]
    res = structured(await client.call_tool("verify_artifacts", {
        "host": "gpu1", "root": str(results), "roster": roster, "dest": str(tmp_path / "pulled")},
        progress_callback=on_progress))
    assert res["done"], res
    size = sum((results / p).stat().st_size for p in roster)
    values = [p for p, _, _ in seen]
    assert values == sorted(values) and values[-1] == size and {t for _, t, _ in seen} == {size}
    assert all("pulling" in (m or "") for _, _, m in seen)
