// The owner's page: a router over a few screens, each a module with
// render(root, ctx) that returns a cleanup function (or nothing).
import { api, loadToken, canWrite } from "./api.js";
import { clear, h } from "./util.js";
import * as overview from "./views/overview.js";
import * as pairing from "./views/pairing.js";
import * as trust from "./views/trust.js";
import * as peers from "./views/peers.js";
import * as records from "./views/records.js";
import * as files from "./views/files.js";

const views = { overview, pairing, trust, peers, records, files };
const root = document.getElementById("view");
let cleanup = null;
let current = null;

function route() {
  const parts = (location.hash.replace(/^#\/?/, "") || "overview").split("/");
  const name = views[parts[0]] ? parts[0] : "overview";
  const args = parts.slice(1).map(decodeURIComponent);
  for (const a of document.querySelectorAll("nav.tabs a")) {
    if (a.dataset.view === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  if (cleanup) cleanup();
  cleanup = null;
  current = name;
  const ctrl = new AbortController();
  clear(root, h("p", { class: "muted" }, "Loading…"));
  document.title = name[0].toUpperCase() + name.slice(1) + " · metanode";
  Promise.resolve(views[name].render(root, { args, signal: ctrl.signal }))
    .then((c) => {
      cleanup = () => { ctrl.abort(); if (typeof c === "function") c(); };
    })
    .catch((e) => clear(root, h("p", { class: "error", role: "alert" }, e.message || String(e))));
  cleanup = () => ctrl.abort();
}

async function header() {
  try {
    const info = await api("/api/node");
    document.getElementById("node-name").textContent = info.name || info.uid;
  } catch (_) { /* the views say what fails */ }
  try {
    const hl = await api("/health");
    const dot = document.getElementById("health-dot");
    dot.className = "dot " + (hl.status === "ok" ? "ok" : "bad");
    dot.textContent = hl.status === "ok" ? "healthy" : "degraded";
  } catch (_) { /* idem */ }
}

async function start() {
  await loadToken();
  if (!canWrite()) {
    const b = document.getElementById("banner");
    b.textContent = "Read only: the node did not give this page its API token, so it cannot change anything here (open the page on the node's own machine, or log in with the GUI password).";
    b.hidden = false;
  }
  window.addEventListener("hashchange", route);
  route();
  header();
  setInterval(() => { if (!document.hidden) header(); }, 10000);
}

export function currentView() {
  return current;
}

start();
