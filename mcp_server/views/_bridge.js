/* bridge:start: the MCP Apps side of the host (postMessage JSON-RPC, spec 2026-01-26), the theme
   and a few DOM helpers. Written once here and put into every view at its include line when the
   view is served (views/__init__.py), so each served page stays one file. Everything shown comes
   from the box or the server: text nodes only. */
"use strict";
const PROTOCOL = "2026-01-26";
const bridge = { parent: window.parent, next: 1, pending: new Map(), on: {}, context: {} };

function post(message) {
  bridge.parent.postMessage(message, "*");
}

function request(method, params) {
  const id = bridge.next++;
  post({ jsonrpc: "2.0", id, method, params });
  return new Promise((resolve, reject) => bridge.pending.set(id, { resolve, reject }));
}

function notify(method, params) {
  post({ jsonrpc: "2.0", method, params: params || {} });
}

function answerHost(message) {
  const served = message.method === "ping" || message.method === "ui/resource-teardown";
  if (message.method === "ui/resource-teardown" && bridge.on.teardown) bridge.on.teardown();
  post(served ? { jsonrpc: "2.0", id: message.id, result: {} }
    : { jsonrpc: "2.0", id: message.id, error: { code: -32601, message: "this view serves no such method" } });
}

window.addEventListener("message", (event) => {
  const m = event.data;
  if (event.source !== bridge.parent || !m || typeof m !== "object" || m.jsonrpc !== "2.0") return;
  if (m.method === undefined) {
    const waiting = bridge.pending.get(m.id);
    if (!waiting) return;
    bridge.pending.delete(m.id);
    if (m.error) waiting.reject(new Error(String(m.error.message || "the host refused the request")));
    else waiting.resolve(m.result);
  } else if (m.id !== undefined && m.id !== null) {
    answerHost(m);
  } else if (m.method === "ui/notifications/host-context-changed") {
    applyTheme(m.params || {});
  } else if (typeof bridge.on[m.method] === "function") {
    bridge.on[m.method](m.params || {});
  }
});

function applyTheme(context) {
  Object.assign(bridge.context, context);
  const root = document.documentElement;
  const variables = (context.styles && context.styles.variables) || {};
  for (const [name, value] of Object.entries(variables)) {
    if (name.startsWith("--") && typeof value === "string") root.style.setProperty(name, value);
  }
  if (context.theme === "light" || context.theme === "dark") {
    root.dataset.theme = context.theme;
    root.style.colorScheme = context.theme;
  }
}

function watchSize() {
  let last = "";
  const send = () => {
    const width = Math.ceil(window.innerWidth);
    const height = Math.ceil(document.documentElement.getBoundingClientRect().height);
    if (`${width}x${height}` === last) return;
    last = `${width}x${height}`;
    notify("ui/notifications/size-changed", { width, height });
  };
  new ResizeObserver(send).observe(document.body);
  send();
}

/** The handshake: ui/initialize (the host's context and theme), then ui/notifications/initialized. */
async function connect(name) {
  const init = await request("ui/initialize", {
    appInfo: { name, version: "1.0.0" }, appCapabilities: {}, protocolVersion: PROTOCOL,
  });
  applyTheme((init && init.hostContext) || {});
  notify("ui/notifications/initialized");
  watchSize();
}

class ToolFailed extends Error {}

function textOf(result) {
  const blocks = (result && Array.isArray(result.content)) ? result.content : [];
  return blocks.filter((b) => b && b.type === "text").map((b) => String(b.text)).join("\n");
}

function structuredOf(result) {
  const data = result && result.structuredContent;
  return data && typeof data === "object" ? data : null;
}

/** A tools/call through the host; an error result (the tool refused) is thrown with its text. */
async function callTool(name, args) {
  const result = await request("tools/call", { name, arguments: args });
  if (!result || result.isError) throw new ToolFailed(textOf(result) || `${name} failed`);
  return result;
}

function byTestId(id) {
  return document.querySelector(`[data-testid="${id}"]`);
}

/** An element with text (never markup), attributes and listeners from this file, and children. */
function el(tag, props, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(props || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "text") node.textContent = String(value);
    else if (key === "class") node.className = value;
    else if (key === "testid") node.dataset.testid = value;
    else if (typeof value === "function") node.addEventListener(key, value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children) {
    if (child !== null && child !== undefined && child !== false) node.append(child);
  }
  return node;
}

function setText(node, text) {
  if (node) node.textContent = text === null || text === undefined ? "" : String(text);
}

function duration(seconds) {
  if (typeof seconds !== "number" || !isFinite(seconds) || seconds < 0) return "—";
  const s = Math.floor(seconds);
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  if (h >= 48) return `${Math.floor(h / 24)} d ${h % 24} h`;
  if (h > 0) return `${h} h ${String(m).padStart(2, "0")} m`;
  if (m > 0) return `${m} m ${String(s % 60).padStart(2, "0")} s`;
  return `${s} s`;
}

function num(value) {
  if (typeof value !== "number" || !isFinite(value)) return "—";
  const a = Math.abs(value);
  if (a !== 0 && (a >= 1e5 || a < 1e-3)) return value.toExponential(2);
  return String(Number(value.toPrecision(4)));
}

/** "2.00 USD/h" from the server's cost meter text ("… at 2.00 USD/h …"), else null. */
function hourlyPrice(text) {
  const m = /at ([0-9]+(?:\.[0-9]+)?) ([A-Za-z]{1,8})\/h/.exec(String(text || ""));
  return m ? { rate: Number(m[1]), currency: m[2] } : null;
}

const STATE_TONE = {
  running: "info", queued: "neutral", orphaned: "warn", succeeded: "ok", failed: "danger",
  sync_failed: "danger", cancelled: "neutral", lost: "danger", unknown: "warn",
};
const ENDED = new Set(["succeeded", "failed", "sync_failed", "cancelled", "lost"]);

function stateChip(status, exitCode, testid) {
  const code = status === "failed" && typeof exitCode === "number" ? ` (exit ${exitCode})` : "";
  return el("span", { class: `chip ${STATE_TONE[status] || "neutral"}`, testid, text: `${status || "unknown"}${code}` });
}
/* bridge:end */
