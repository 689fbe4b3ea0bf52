import { api } from "../api.js";
import { h, clear, card, dl, idText, ago, errorBox } from "../util.js";
import { every, isRelayed, filesState, libraryFacts } from "./common.js";

export async function render(root, { signal }) {
  const body = h("div", { class: "grid", id: "overview" });
  clear(root, h("h1", {}, "Overview"), body);
  every(5000, async () => {
    try {
      const [info, health, stats, status, peers] = await Promise.all([
        api("/api/node"), api("/health"), api("/api/stats"), api("/api/swarm/status"), api("/api/swarm/peers")]);
      clear(body, nodeCard(info), healthCard(health), libraryCard(stats), swarmCard(status, peers), filesCard(info, health, stats));
    } catch (e) {
      clear(body, errorBox(e));
    }
  }, signal, ["/api/events/meta", "/api/events/files"]);
}

function nodeCard(info) {
  return card("This node", dl([
    ["Name", info.name || "—"],
    ["UID", idText(info.uid, "Copy the node uid")],
    ["Peer ID", info.peerId ? idText(info.peerId, "Copy the peer id") : "—"],
    ["Version", info.version || "unknown"],
    ["Swarm", `${info.swarm}${info.private ? " (private)" : ""}`],
    ["Trust", info.trust === "open" ? "open: every valid signer counts" : "list: only trusted signers count"],
  ]));
}

function healthCard(health) {
  const ok = health.status === "ok";
  const checks = Object.entries(health.checks || {}).sort();
  return card("Health",
    h("p", { id: "health-status", class: "big " + (ok ? "good" : "bad") }, ok ? "Healthy" : "Degraded"),
    h("ul", { class: "checks" }, checks.map(([k, v]) =>
      h("li", { class: v === "ok" || v === "off" ? "" : "warn" }, h("strong", {}, k), ": ", v))));
}

function libraryCard(stats) {
  return card("Library", dl(libraryFacts(stats)));
}

function swarmCard(status, peers) {
  const relayed = peers.filter(isRelayed).length;
  let last = null;
  for (const p of Object.values((status.sync && status.sync.peers) || {})) {
    if (p.lastSync && (!last || p.lastSync > last)) last = p.lastSync;
  }
  return card("Swarm", dl([
    ["Peers", h("span", { id: "peer-count" }, `${peers.length} (${peers.length - relayed} direct, ${relayed} relayed)`)],
    ["Last sync", last ? ago(last) : "never"],
    ["Claims by sync", `${(status.sync || {}).claimsReceived || 0} received, ${(status.sync || {}).claimsSent || 0} sent`],
    ["DHT", `${status.dht.mode}, ${status.dht.routingTable} in routing table`],
    ["Problems", status.errors && status.errors.length ? h("ul", {}, status.errors.map((e) => h("li", {}, e))) : null],
  ]));
}

function filesCard(info, health, stats) {
  return card("Files root", dl([
    ["Path", info.filesRoot ? h("code", {}, info.filesRoot) : null],
    ["State", filesState(info, health, stats)],
  ]));
}
