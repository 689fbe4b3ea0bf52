// What several screens share: the health and files-root words, the peer
// address kinds, and a refresh loop that never polls faster than 2 s.
import { follow, sleep } from "../api.js";
import { h, num, bytes } from "../util.js";

// every calls fn now and then every ms (at least 2 s) while the page is
// visible, and soon after an event on the given streams (at most once per
// 2 s), until signal aborts.
export function every(ms, fn, signal, streams = []) {
  ms = Math.max(ms, 2000);
  let dirty = false;
  let last = 0;
  const tick = async () => {
    last = Date.now();
    dirty = false;
    try { await fn(); } catch (_) { /* fn shows its own errors */ }
  };
  for (const s of streams) follow(s, () => { dirty = true; }, signal);
  (async () => {
    await tick();
    while (!signal.aborted) {
      await sleep(500, signal);
      const since = Date.now() - last;
      if (document.hidden) continue;
      if ((dirty && since >= 2000) || since >= ms) await tick();
    }
  })();
}

// isRelayed: a peer reached only through a relay (a /p2p-circuit address).
export function isRelayed(p) {
  return (p.addrs || []).length > 0 && p.addrs.every((a) => a.includes("/p2p-circuit"));
}

// addrKind names what kind of address a multiaddr is: loopback, LAN,
// public, relayed; with its transport.
export function addrKind(a) {
  if (!a) return "unknown";
  if (a.includes("/p2p-circuit")) return "relayed";
  const m = a.match(/^\/(ip4|ip6|dns4|dns6|dns)\/([^/]+)/);
  const t = a.includes("/quic") ? "QUIC" : a.includes("/tcp/") ? "TCP" : a.includes("/ws") ? "WebSocket" : "";
  let where = "public";
  if (!m) where = "other";
  else if (m[1].startsWith("dns")) where = "DNS name";
  else if (/^(127\.|::1$)/.test(m[2])) where = "loopback";
  else if (/^(10\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.|169\.254\.|f[cd]|fe80)/i.test(m[2])) where = "LAN";
  return [where, m ? (m[1] === "ip6" ? "IPv6" : m[1] === "ip4" ? "IPv4" : "") : "", t].filter(Boolean).join(" · ");
}

// progressBar shows done of total (a meter when total is known).
export function progressBar(label, done, total) {
  if (!total) return h("span", {}, num(done), " so far");
  const pct = Math.min(100, Math.round((100 * done) / total));
  return h("span", { class: "progress" },
    h("progress", { max: total, value: Math.min(done, total), "aria-label": label }),
    ` ${num(done)} of ${num(total)} (${pct} %)`);
}

// filesState is the files root's state in words, from the health check
// and the scan progress (GET /api/stats "progress", when the node has it).
export function filesState(info, health, stats) {
  if (!info.filesRoot) return h("span", { class: "muted" }, "no files root (start the node with --files DIR)");
  const check = (health.checks || {}).watcher || "unknown";
  const scan = stats && stats.progress && stats.progress.scan;
  if (scan) {
    return h("span", {}, h("span", { class: "badge warn" }, scan.kind || "scanning"), " ",
      progressBar("Scan progress", scan.done, scan.total),
      scan.etaSeconds ? ` · about ${Math.ceil(scan.etaSeconds / 60)} min left` : "");
  }
  if (check === "ok") return h("span", { class: "badge ok" }, "ok");
  if (check === "scanning") return h("span", { class: "badge warn" }, "scanning");
  return h("span", {}, h("span", { class: "badge bad" }, "problem"), " ", check);
}

export function libraryFacts(stats) {
  return [
    ["Records", num(stats.records)],
    ["Claims", num(stats.claims)],
    ["Signers", num(stats.signers)],
    ["Local files", stats.files ? `${num(stats.files.count)} (${bytes(stats.files.totalSize)})` : "—"],
  ];
}
