/* chart:start: metric curves as inline SVG, one panel and one polyline per metric, each on its own
   scale. The same block in the monitor and the run list (tests/views/test_views_static.py). */
// The parser's own namespace for <svg>, read from the template below: no address in this file.
const SVG_NS = document.getElementById("svg-ns").namespaceURI;
const PALETTE = ["#2563eb", "#dc2626", "#059669", "#9333ea", "#d97706", "#0891b2"];
const TREND = { improving: "improving", worsening: "WORSENING", flat: "flat", unknown: "trend unknown" };

function svgEl(tag, attrs, text) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) node.setAttribute(key, String(value));
  if (text !== undefined) node.textContent = String(text);
  return node;
}

function extent(values) {
  let lo = Math.min(...values);
  let hi = Math.max(...values);
  if (lo === hi) {
    const pad = Math.abs(lo) * 0.05 || 1;
    lo -= pad;
    hi += pad;
  }
  return [lo, hi];
}

/** The panels to draw for one run: its points (plot_run's `points`) with its series' numbers. */
function panelsFor(plot, runId) {
  const runs = Array.isArray(plot && plot.runs) ? plot.runs : [];
  const run = runs.find((r) => r && r.run_id === runId) || runs[0] || {};
  const stats = new Map((Array.isArray(run.series) ? run.series : []).map((s) => [s.key, s]));
  const points = Array.isArray(plot && plot.points) ? plot.points : [];
  return points.filter((p) => p && p.run_id === (run.run_id || runId) && Array.isArray(p.xy) && p.xy.length)
    .map((p) => ({ key: String(p.key), xy: p.xy, stats: stats.get(p.key) || {} }));
}

function panelLabel(p) {
  const s = p.stats;
  const flags = [s.diverged ? "DIVERGED" : "", s.plateau ? "PLATEAU" : "",
    s.nan_count ? `${s.nan_count} NaN` : "", s.inf_count ? `${s.inf_count} Inf` : ""].filter(Boolean);
  const best = s.best !== undefined && s.best !== null ? ` · best ${num(s.best)} (${s.goal || "min"})` : "";
  return `${p.key}: last ${num(s.last)}${best} · ${TREND[s.trend] || TREND.unknown}${flags.length ? " · " + flags.join(" ") : ""}`;
}

/** Draw `panels` into `svg` (`size`: the drawing's width and each panel's height, in the units
    its text is set in); its data-points says how many points were drawn in all. */
function drawCurves(svg, panels, emptyText, size) {
  const W = (size && size.width) || 640;
  const PH = (size && size.panelHeight) || 96;
  const LEFT = 58;
  const RIGHT = 10;
  const TOP = 18;
  const BOTTOM = 14;
  svg.replaceChildren();
  const height = panels.length ? panels.length * (PH + TOP + BOTTOM) : 36;
  svg.setAttribute("viewBox", `0 0 ${W} ${height}`);
  let drawn = 0;
  if (!panels.length) {
    svg.append(svgEl("text", { x: 8, y: 22, class: "muted" }, emptyText));
  }
  panels.forEach((p, i) => {
    const top = i * (PH + TOP + BOTTOM) + TOP;
    const xs = p.xy.map((q) => Number(q[0]));
    const ys = p.xy.map((q) => Number(q[1]));
    const [x0, x1] = extent(xs);
    const [y0, y1] = extent(ys);
    const sx = (x) => LEFT + ((x - x0) / (x1 - x0)) * (W - LEFT - RIGHT);
    const sy = (y) => top + PH - ((y - y0) / (y1 - y0)) * PH;
    const color = PALETTE[i % PALETTE.length];
    const g = svgEl("g", { class: "panel" });
    g.append(svgEl("rect", { x: LEFT, y: top, width: W - LEFT - RIGHT, height: PH, class: "frame" }));
    g.append(svgEl("text", { x: LEFT, y: top - 5, class: "label", fill: color }, panelLabel(p)));
    g.append(svgEl("text", { x: LEFT - 4, y: top + 9, class: "tick", "text-anchor": "end" }, num(y1)));
    g.append(svgEl("text", { x: LEFT - 4, y: top + PH, class: "tick", "text-anchor": "end" }, num(y0)));
    g.append(svgEl("text", { x: LEFT, y: top + PH + 11, class: "tick" }, `step ${num(x0)}`));
    g.append(svgEl("text", { x: W - RIGHT, y: top + PH + 11, class: "tick", "text-anchor": "end" }, `step ${num(x1)}`));
    const line = svgEl("polyline", {
      points: p.xy.map((q, j) => `${sx(xs[j]).toFixed(1)},${sy(ys[j]).toFixed(1)}`).join(" "),
      fill: "none", stroke: color, "stroke-width": 1.6, "stroke-linejoin": "round",
      "data-key": p.key, "data-points": p.xy.length,
    });
    g.append(line);
    svg.append(g);
    drawn += p.xy.length;
  });
  svg.setAttribute("data-points", String(drawn));
  svg.setAttribute("aria-label", panels.length ? `Curves: ${panels.map(panelLabel).join("; ")}` : emptyText);
}
/* chart:end */
