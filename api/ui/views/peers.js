import { api } from "../api.js";
import { h, clear, idText, ago, errorBox, short } from "../util.js";
import { every, isRelayed, addrKind } from "./common.js";

export async function render(root, { signal }) {
  const out = h("div", { id: "peers" });
  clear(root, h("h1", {}, "Peers"),
    h("p", {}, "The nodes this node is connected to now. Claims exchanged count catch-up (sync) sessions since the node started; live claims travel by gossip and are not counted per peer."),
    out);
  every(5000, async () => {
    try {
      const [peers, tl] = await Promise.all([api("/api/swarm/peers"), api("/api/trust")]);
      const trusted = new Map(tl.trusted.map((e) => [e.uid, e]));
      clear(out, peers.length === 0
        ? h("p", { class: "muted", id: "no-peers" }, "No peer connected. Pair with another home (Pairing), or add a bootstrap peer to the config.")
        : h("div", { class: "scroll" }, h("table", { id: "table-peers", class: "stack" },
          h("caption", {}, `${peers.length} connected`),
          h("thead", {}, h("tr", {}, ["Peer", "Address", "Connection", "Latency", "Claims exchanged", "Last sync", "Connected"].map((x) => h("th", { scope: "col" }, x)))),
          h("tbody", {}, peers.map((p) => row(p, trusted))))));
    } catch (e) {
      clear(out, errorBox(e));
    }
  }, signal);
}

function row(p, trusted) {
  const t = p.uid && trusted.get(p.uid);
  const name = p.name || (t ? (t.note === "paired" || t.note === "inviter" ? "paired home" : "trusted") : "not trusted");
  return h("tr", { "data-peer": p.peerId },
    h("td", {}, h("div", {}, name), p.uid ? idText(p.uid, "Copy uid " + p.uid) : h("code", { title: p.peerId }, short(p.peerId))),
    h("td", {}, (p.addrs || []).length ? addrKind(p.addrs[0]) : "—"),
    h("td", {}, isRelayed(p) ? h("span", { class: "badge warn" }, "relayed") : h("span", { class: "badge ok" }, "direct")),
    h("td", {}, p.latencyMs ? `${p.latencyMs.toFixed(1)} ms` : "—"),
    h("td", {}, `${p.claimsReceived} in, ${p.claimsSent} out`),
    h("td", {}, p.lastSync ? ago(p.lastSync) : "never"),
    h("td", {}, ago(p.connectedSince)));
}
