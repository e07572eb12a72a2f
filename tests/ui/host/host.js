// The test host page: one MCP Apps view at a time in a sandboxed iframe (scripts only, an opaque
// origin), spoken to through the official AppBridge. The view's tools/call requests go to this
// page's own origin (/call-tool), where the Node driver forwards them to the real server through
// its MCP client and records them; the view itself can reach nothing (connect-src 'none').
import { AppBridge, PostMessageTransport } from "@modelcontextprotocol/ext-apps/app-bridge";

const HOST_INFO = { name: "rgt-test-host", version: "1.0.0" };
const CAPABILITIES = { serverTools: {}, logging: {}, message: { text: {} } };
const THEME = {
  "--color-background-primary": "#ffffff",
  "--color-background-secondary": "#f4f5f7",
  "--color-text-primary": "#1d1f23",
  "--color-text-secondary": "#5b616b",
  "--color-border-primary": "#c8ccd2",
};

let current = null;

async function callTool(params) {
  const response = await fetch("/call-tool", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(params),
  });
  if (!response.ok) throw new Error(`the test driver refused the call: ${await response.text()}`);
  return response.json();
}

function report(kind, detail) {
  fetch("/host-event", { method: "POST", headers: { "content-type": "application/json" },
                         body: JSON.stringify({ kind, detail }) });
}

async function unmount() {
  if (!current) return;
  const { bridge, iframe } = current;
  current = null;
  await bridge.close().catch(() => {});
  iframe.remove();
}

// Mount the view served at `url`, then hand it the tool's input and result once it is initialized
// (`handshake: false`: just render it; the harness's own checks mount pages that speak no protocol).
async function mount({ url, tool, input, result, title, handshake = true }) {
  await unmount();
  const iframe = document.createElement("iframe");
  iframe.setAttribute("sandbox", "allow-scripts");
  iframe.setAttribute("title", title);
  document.getElementById("views").append(iframe);
  const bridge = new AppBridge(null, HOST_INFO, CAPABILITIES, {
    hostContext: {
      theme: "light", styles: { variables: THEME }, displayMode: "inline", availableDisplayModes: ["inline"],
      containerDimensions: { maxHeight: 2000, width: 960 }, locale: "en-US", timeZone: "UTC",
      platform: "web", userAgent: "rgt-test-host", toolInfo: { tool },
    },
  });
  bridge.oncalltool = (params) => callTool(params);
  bridge.onsizechange = ({ height }) => {
    if (height) iframe.style.height = `${Math.min(Math.ceil(height), 2000)}px`;
    report("size-changed", { height });
  };
  bridge.onmessage = async (params) => { report("message", params); return {}; };
  bridge.onopenlink = async (params) => { report("open-link", params); return {}; };
  bridge.onloggingmessage = (params) => report("log", params);
  const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
  current = { bridge, iframe };
  await bridge.connect(new PostMessageTransport(iframe.contentWindow, iframe.contentWindow));
  const loaded = new Promise((resolve) => iframe.addEventListener("load", resolve, { once: true }));
  iframe.src = url;
  if (!handshake) {
    await loaded;
    return { appVersion: null, appCapabilities: null };
  }
  await Promise.race([initialized, new Promise((_, reject) => setTimeout(
    () => reject(new Error("the view sent no ui/initialize + ui/notifications/initialized within 20 s")), 20000))]);
  await bridge.sendToolInput({ arguments: input });
  await bridge.sendToolResult(result);
  return { appVersion: bridge.getAppVersion() ?? null, appCapabilities: bridge.getAppCapabilities() ?? null };
}

window.rgtHost = { mount, unmount };
document.getElementById("title").textContent = "MCP Apps test host (AppBridge ready)";
