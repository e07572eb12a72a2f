// The browser-test driver: pytest starts it once and sends one JSON command per line on stdin; each
// answer is one JSON line on stdout ({id, ok, result} or {id, ok: false, error}); logs go to stderr.
//
// It plays an MCP Apps host for real: a real MCP client (the TypeScript SDK over stdio) runs the
// server (`python -m mcp_server`) in the test's environment; the host page (host/, bundled with the
// official AppBridge) is served from 127.0.0.1 with each view as its own document under the MCP Apps
// spec's default CSP; headless Chromium (the system binary, via playwright-core) renders it. Every
// tools/call the view sends through the bridge is recorded here and forwarded to the server.
import { createServer } from "node:http";
import { randomUUID } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createInterface } from "node:readline";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";
import { build } from "esbuild";
import { chromium } from "playwright-core";

const HERE = dirname(fileURLToPath(import.meta.url));
const APPS_MIME = "text/html;profile=mcp-app";
// SEP-1865 (2026-01-26), "Host Behavior": the CSP a host MUST apply when the resource declares no ui.csp.
const DEFAULT_CSP = [
  "default-src 'none'",
  "script-src 'self' 'unsafe-inline'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "media-src 'self' data:",
  "connect-src 'none'",
].join("; ");
const CSP_MARK = "[rgt-csp-violation]";
// Runs in every frame before its own scripts: a CSP violation anywhere becomes a console line.
const WATCH_CSP = `document.addEventListener("securitypolicyviolation", (e) => console.error(
  ${JSON.stringify(CSP_MARK)} + " " + e.effectiveDirective + " blocked " + (e.blockedURI || "inline") +
  " (" + e.sourceFile + ":" + e.lineNumber + ")"), true);`;

const args = Object.fromEntries(process.argv.slice(2).map((a) => a.replace(/^--/, "").split("=", 2)));
const log = (...parts) => process.stderr.write(`driver: ${parts.join(" ")}\n`);

const hostPage = await readFile(join(HERE, "host", "index.html"), "utf8");
const hostBundle = (await build({
  entryPoints: [join(HERE, "host", "host.js")], bundle: true, format: "esm", platform: "browser",
  write: false, logLevel: "error",
})).outputFiles[0].text;

let session = null;
const views = new Map();

const http = createServer((req, res) => {
  handle(req, res).catch((err) => {
    log("http error", err.stack ?? String(err));
    res.writeHead(500, { "content-type": "text/plain" }).end(String(err.message ?? err));
  });
});
await new Promise((resolve) => http.listen(0, "127.0.0.1", resolve));
const origin = `http://127.0.0.1:${http.address().port}`;

async function body(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

async function handle(req, res) {
  const path = new URL(req.url, origin).pathname;
  if (req.method === "GET" && path === "/") {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store" }).end(hostPage);
  } else if (req.method === "GET" && path === "/host.js") {
    res.writeHead(200, { "content-type": "text/javascript; charset=utf-8", "cache-control": "no-store" })
      .end(hostBundle);
  } else if (req.method === "GET" && path.startsWith("/view/") && views.has(path.slice(6))) {
    res.writeHead(200, { "content-type": "text/html; charset=utf-8", "cache-control": "no-store",
                         "content-security-policy": DEFAULT_CSP }).end(views.get(path.slice(6)));
  } else if (req.method === "POST" && path === "/call-tool" && session) {
    const params = await body(req);
    const call = { seq: session.calls.length, name: params.name, arguments: params.arguments ?? null };
    session.calls.push(call);
    try {
      const result = await session.client.callTool({ name: params.name, arguments: params.arguments ?? {} });
      call.isError = Boolean(result.isError);
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(result));
    } catch (err) {
      call.error = String(err.message ?? err);
      throw err;
    } finally {
      call.done = true;
    }
  } else if (req.method === "POST" && path === "/host-event" && session) {
    session.hostEvents.push(await body(req));
    res.writeHead(204).end();
  } else {
    res.writeHead(404, { "content-type": "text/plain" }).end("not found");
  }
}

const browser = await chromium.launch({ executablePath: args.chromium, headless: true });

async function endSession() {
  if (!session) return;
  const { client, context } = session;
  session = null;
  views.clear();
  await context.close().catch(() => {});
  await client.close().catch(() => {});
}

async function startSession({ env, cwd }) {
  await endSession();
  const transport = new StdioClientTransport({
    command: args.python, args: ["-m", "mcp_server"], env, cwd, stderr: "pipe",
  });
  const serverLog = [];
  transport.stderr?.on("data", (chunk) => serverLog.push(chunk.toString("utf8")));
  const client = new Client({ name: "rgt-test-host", version: "1.0.0" },
    { capabilities: { extensions: { "io.modelcontextprotocol/ui": { mimeTypes: [APPS_MIME] } } } });
  await client.connect(transport);
  const context = await browser.newContext({ viewport: { width: 1000, height: 800 } });
  await context.addInitScript({ content: WATCH_CSP });
  const page = await context.newPage();
  // Fake timers in every frame from its first script on.
  await page.clock.install();
  session = { client, context, page, serverLog, calls: [], hostEvents: [], console: [], pageErrors: [] };
  const s = session;
  page.on("console", (msg) => s.console.push({ type: msg.type(), text: msg.text(), url: msg.location().url }));
  page.on("pageerror", (err) => s.pageErrors.push(String(err.stack ?? err)));
  await page.goto(`${origin}/`);
  await page.waitForFunction(() => Boolean(window.rgtHost));
  // From here the page's time moves only when a test advances it: a slow machine adds no poll.
  await page.clock.pauseAt(Date.now() + 1000);
  return { origin, server: client.getServerVersion(), capabilities: client.getServerCapabilities() };
}

function need() {
  if (!session) throw new Error("no session: send {op: 'session'} first");
  return session;
}

function viewFrame() {
  const frame = need().page.frames().find((f) => f.url().startsWith(`${origin}/view/`));
  if (!frame) throw new Error("no view is mounted: send {op: 'open'} first");
  return frame;
}

async function mount({ html, tool, input, result, handshake }) {
  const { page } = need();
  const id = randomUUID();
  views.set(id, html);
  return page.evaluate((m) => window.rgtHost.mount(m),
    { url: `${origin}/view/${id}`, tool, input, result, title: tool.title ?? tool.name, handshake });
}

// The host's side of a tool call that carries a view: find the binding, read the resource, call the
// tool, render the view and give it the input and the result.
async function open({ tool: name, arguments: input }) {
  const { client } = need();
  const { tools } = await client.listTools();
  const tool = tools.find((t) => t.name === name);
  if (!tool) throw new Error(`the server has no tool named ${name}`);
  const uri = tool._meta?.ui?.resourceUri;
  if (!uri) throw new Error(`${name} carries no _meta.ui.resourceUri`);
  const read = await client.readResource({ uri });
  const content = read.contents.find((c) => c.uri === uri) ?? read.contents[0];
  if (content?.mimeType !== APPS_MIME) throw new Error(`${uri} is served as ${content?.mimeType}, not ${APPS_MIME}`);
  const html = content.text ?? Buffer.from(content.blob ?? "", "base64").toString("utf8");
  const result = await client.callTool({ name, arguments: input });
  const mounted = await mount({ html, tool, input, result });
  return { uri, mimeType: content.mimeType, resourceMeta: content._meta ?? null, bytes: Buffer.byteLength(html),
           result, ...mounted };
}

// Every element the CSS selector matches in the view, as plain data.
function query({ css }) {
  return viewFrame().evaluate((sel) => Array.from(document.querySelectorAll(sel)).map((el) => ({
    tag: el.tagName.toLowerCase(),
    text: el.textContent,
    attrs: Object.fromEntries(Array.from(el.attributes).map((a) => [a.name, a.value])),
    disabled: Boolean(el.disabled),
  })), css);
}

const OPS = {
  session: startSession,
  open,
  mount: (m) => mount({ ...m, tool: m.tool ?? { name: "test", inputSchema: { type: "object" } } }),
  query,
  global: ({ name }) => viewFrame().evaluate((n) => (n in window ? String(window[n]) : null), name),
  click: ({ css }) => viewFrame().locator(css).click({ timeout: 5000 }),
  press: ({ css, key }) => viewFrame().locator(css).press(key, { timeout: 5000 }),
  select: ({ css, value }) => viewFrame().locator(css).selectOption(value, { timeout: 5000 }),
  advance: async ({ ms }) => { await need().page.clock.fastForward(ms); },
  calls: () => need().calls,
  events: () => {
    const s = need();
    return { console: s.console, pageErrors: s.pageErrors, hostEvents: s.hostEvents,
             violations: s.console.filter((m) => m.text.includes(CSP_MARK) || /Content Security Policy/.test(m.text)),
             serverLog: s.serverLog.join("").slice(-4000) };
  },
  screenshot: ({ path }) => need().page.locator("#views iframe").screenshot({ path }).then(() => path),
  end: endSession,
};

async function dispatch(line) {
  let id = null;
  try {
    const command = JSON.parse(line);
    id = command.id;
    const op = OPS[command.op];
    if (!op) throw new Error(`unknown op ${command.op}`);
    const result = await op(command);
    return { id, ok: true, result: result ?? null };
  } catch (err) {
    return { id, ok: false, error: String(err.stack ?? err) };
  }
}

process.stdout.write(JSON.stringify({ id: null, ok: true, result: { ready: true, origin } }) + "\n");
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  process.stdout.write(JSON.stringify(await dispatch(line)) + "\n");
}
await endSession();
await browser.close();
http.close();
