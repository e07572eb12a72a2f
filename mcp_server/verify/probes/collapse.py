"""VP10 / §4 representation collapse: output cross-sample cosine, per-feature std,
effective rank and real-vs-shuffled, with the same checks on the raw input first."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from mcp_server import lazy
from mcp_server.verify.probes.refs import InputReader
from mcp_server.verify.probes.result import NextProbe, ProbeFinding, next_probe, num
from mcp_server.verify.probes.sources import Matrix, load_matrix

if TYPE_CHECKING:
    import numpy as np
else:
    np = lazy.module("numpy")  # loaded by the first probe that computes, not at server start

CATALOG = ["VP10"]
QUESTION = "Do distinct inputs still produce distinct outputs, or has the representation collapsed?"


class CollapseInputs(BaseModel):
    """A batch of outputs for distinct inputs (and optionally the raw inputs and a shuffle control)."""

    model_config = ConfigDict(extra="forbid")
    probe: Literal["collapse"]
    outputs: Matrix = Field(description="model outputs / embeddings for a batch of distinct inputs, [B, D]")
    inputs: Matrix | None = Field(default=None, description="the raw input vectors of the same batch; "
                                  "checked first (an input dominated by a sample-invariant part collapses "
                                  "every model)")
    shuffled_outputs: Matrix | None = Field(default=None, description="outputs decoded against another "
                                            "sample's conditioning (real-vs-shuffle control)")
    real_score: float | None = Field(default=None, description="task metric with the real conditioning")
    shuffled_score: float | None = Field(default=None, description="the same metric with shuffled conditioning")
    chance: float | None = None
    cosine_threshold: float = Field(default=0.95, gt=0, lt=1, description="mean off-diagonal cosine at or "
                                    "above this counts as collapsed")
    score_tolerance: float = Field(default=0.02, ge=0, lt=1, description="real and shuffled scores within "
                                   "this relative distance count as equal")
    max_rows: int = Field(default=2048, ge=2, le=16384, description="rows used (the first ones)")


class MatrixStats(BaseModel):
    """What a [B, D] batch looks like across samples (reported as measured)."""

    rows: int
    features: int
    zero_rows: int
    mean_abs: float | None
    mean_feature_std: float | None
    std_over_mean_abs: float | None
    mean_offdiag_cosine: float | None
    effective_rank: float | None
    duplicate_rows: int

    @property
    def no_spread(self) -> bool:
        """Every feature is constant across the batch (up to float noise)."""
        return self.mean_feature_std is not None and self.mean_feature_std <= 1e-12 * max(1.0, self.mean_abs or 0)

    def invariant(self, threshold: float) -> bool:
        """Dominated by a sample-invariant part: no spread, near-identical directions, or all zero."""
        cos = self.mean_offdiag_cosine
        return self.no_spread or (cos is not None and cos >= threshold) or self.zero_rows == self.rows


def matrix_stats(x: np.ndarray) -> MatrixStats:
    """Per-feature std, mean off-diagonal cosine and effective rank of a [B, D] batch."""
    b, dim = x.shape
    norms = np.linalg.norm(x, axis=1)
    nz = norms > 0
    k = int(nz.sum())
    cos = None
    if k >= 2:
        unit = x[nz] / norms[nz, None]
        total = float(np.square(unit.sum(axis=0)).sum())
        cos = (total - k) / (k * (k - 1))
    mean_abs = float(np.abs(x).mean())
    feat_std = float(x.std(axis=0).mean())
    return MatrixStats(rows=b, features=dim, zero_rows=b - k, mean_abs=num(mean_abs), mean_feature_std=num(feat_std),
                       std_over_mean_abs=num(feat_std / mean_abs) if mean_abs > 0 else None,
                       mean_offdiag_cosine=num(cos), effective_rank=num(effective_rank(x)),
                       duplicate_rows=int(b - np.unique(x, axis=0).shape[0]))


def effective_rank(x: np.ndarray) -> float:
    """exp(entropy) of the normalised singular values of the centred batch; 0 when it has no spread."""
    c = x - x.mean(axis=0, keepdims=True)
    gram = c @ c.T if c.shape[1] > c.shape[0] else c.T @ c
    sv = np.sqrt(np.clip(np.linalg.eigvalsh(gram), 0, None))
    total = float(sv.sum())
    if total <= 1e-12 * max(1.0, float(np.abs(x).max(initial=0.0))) * math.sqrt(x.size):
        return 0.0
    p = sv[sv > 0] / total
    return float(math.exp(-float(np.sum(p * np.log(p)))))


async def _load(src: Matrix, reader: InputReader, what: str, max_rows: int) -> tuple[np.ndarray | None, str | None]:
    x = await load_matrix(src, reader, what)
    if x.shape[0] < 2:
        return None, f"{what} has {x.shape[0]} row(s); need at least 2 distinct inputs"
    bad = int(np.sum(~np.isfinite(x)))
    if bad:
        return None, f"{what} has {bad} non-finite entries (NaN/inf): fix the forward pass before reading collapse"
    return x[:max_rows], None


async def run(inp: CollapseInputs, reader: InputReader) -> ProbeFinding:
    out, why = await _load(inp.outputs, reader, "outputs", inp.max_rows)
    m: dict[str, Any] = {"cosine_threshold": inp.cosine_threshold}
    if out is None:
        return ProbeFinding(measurements=m, verdict="unverified", reason=why or "",
                            disclosure=f"Collapse not assessed: {why}.")
    so = matrix_stats(out)
    m["outputs"] = so.model_dump()
    si = None
    if inp.inputs is not None:
        raw, why_in = await _load(inp.inputs, reader, "inputs", inp.max_rows)
        if raw is not None:
            si = matrix_stats(raw)
            m["inputs"] = si.model_dump()
        else:
            m["inputs_unavailable"] = why_in
    signals = await _signals(inp, out, so, m, reader)
    return _decide(inp, so, si, signals, m)


async def _signals(inp: CollapseInputs, out: np.ndarray, so: MatrixStats, m: dict[str, Any],
                   reader: InputReader) -> list[str]:
    found = []
    if so.zero_rows == so.rows:
        found.append("every output is the zero vector")
    elif so.no_spread:
        found.append("outputs are identical across the batch (per-feature std 0)")
    elif so.mean_offdiag_cosine is not None and so.mean_offdiag_cosine >= inp.cosine_threshold:
        found.append(f"output cross-sample cosine {so.mean_offdiag_cosine} >= {inp.cosine_threshold}")
    if inp.shuffled_outputs is not None:
        sh = await load_matrix(inp.shuffled_outputs, reader, "shuffled outputs")
        if sh.shape[1] == out.shape[1] and sh.shape[0] >= out.shape[0]:
            same = bool(np.allclose(out, sh[: out.shape[0]], rtol=1e-6, atol=1e-9))
            m["shuffled_outputs_equal_real"] = same
            if same:
                found.append("outputs with shuffled conditioning equal the real ones")
        else:
            m["shuffled_outputs_shape_mismatch"] = [list(out.shape), list(sh.shape)]
    if inp.real_score is not None and inp.shuffled_score is not None:
        gap = inp.real_score - inp.shuffled_score
        scale = max(abs(inp.real_score), abs(inp.shuffled_score), 1e-12)
        m.update(real_score=inp.real_score, shuffled_score=inp.shuffled_score, real_minus_shuffled=num(gap),
                 chance=inp.chance)
        if abs(gap) <= inp.score_tolerance * scale:
            found.append(f"real score {inp.real_score} == shuffled score {inp.shuffled_score}")
    return found


def _decide(inp: CollapseInputs, so: MatrixStats, si: MatrixStats | None, signals: list[str],
            m: dict[str, Any]) -> ProbeFinding:
    input_bad = si is not None and si.invariant(inp.cosine_threshold)
    m["signals"] = signals
    m["input_invariant_dominated"] = input_bad if si is not None else None
    if not signals:
        warnings = ["the raw input is dominated by a sample-invariant component (cosine "
                    f"{si.mean_offdiag_cosine}) although the outputs still differ"] if input_bad and si else []
        return ProbeFinding(measurements=m, verdict="clean", reason="no collapse fingerprint", warnings=warnings,
                            disclosure=f"Outputs of distinct inputs stay distinct (cross-sample cosine "
                            f"{so.mean_offdiag_cosine}, effective rank {so.effective_rank} of {so.features}).")
    what = "; ".join(signals)
    if input_bad:
        return ProbeFinding(measurements=m, verdict="collapsed", reason=what + "; the raw input is invariant-dominated",
                            disclosure=f"The representation is collapsed ({what}) and the raw input already is "
                            f"(input cosine {si.mean_offdiag_cosine if si else None}): fix the input normalisation "
                            "(per-feature z-score with train statistics) rather than the output head.",
                            next_probe=_ladder("fix at the input, not the output (ladder step 4)"))
    tail = (" The raw input is not collapsed, so the collapse happens inside the model." if si is not None
            else " The raw input was not checked; check it first.")
    return ProbeFinding(measurements=m, verdict="collapsed", reason=what,
                        disclosure=f"The representation is collapsed ({what}): distinct inputs give the same output, "
                        "so any metric from this model reflects the unconditional mean." + tail,
                        next_probe=_ladder("render the intermediate and localize the stage" if si is not None
                                           else "check the raw input's cross-sample cosine first"))


def _ladder(why: str) -> NextProbe:
    return next_probe("collapse-ladder", "representation-collapse ladder", why, "collapse")
