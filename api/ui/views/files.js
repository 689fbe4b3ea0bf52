import { api, follow } from "../api.js";
import { h, clear, card, dl, when, errorBox, num } from "../util.js";
import { every, filesState } from "./common.js";

const keep = 50;

export async function render(root, { signal }) {
  const state = h("div", { id: "files-state" });
  const list = h("tbody", {});
  const events = [];
  clear(root, h("h1", {}, "Files"), h("div", { class: "grid" }, card("Files root", state)),
    h("section", { class: "card wide", "aria-label": "Latest file events" }, h("h2", {}, "Latest file events"),
      h("div", { class: "scroll" }, h("table", { id: "table-files", class: "stack" },
        h("thead", {}, h("tr", {}, ["When", "Change", "Path", "Size"].map((x) => h("th", { scope: "col" }, x)))), list))));
  every(5000, async () => {
    try {
      const [info, health, stats] = await Promise.all([api("/api/node"), api("/health"), api("/api/stats")]);
      clear(state, dl([
        ["Path", info.filesRoot ? h("code", {}, info.filesRoot) : null],
        ["State", filesState(info, health, stats)],
        ["Local files", stats.files ? num(stats.files.count) : "—"],
      ]));
    } catch (e) {
      clear(state, errorBox(e));
    }
  }, signal);
  const show = () => clear(list, events.length ? events.slice().reverse().map(eventRow)
    : h("tr", {}, h("td", { colspan: 4, class: "muted" }, "No file events yet.")));
  let last = null;
  try {
    const r = await api("/api/events/files/recent?limit=" + keep);
    events.push(...r.events);
    if (r.events.length) last = r.events[r.events.length - 1].id;
  } catch (e) {
    clear(list, h("tr", {}, h("td", { colspan: 4 }, errorBox(e))));
  }
  show();
  follow("/api/events/files", (ev) => {
    if (ev.type === "gap" || !ev.id) return;
    events.push({ id: ev.id, type: ev.type, data: ev.data });
    if (events.length > keep) events.splice(0, events.length - keep);
    show();
  }, signal, last);
}

function eventRow(ev) {
  const d = ev.data || {};
  const ts = Number(d.timestamp) || Number(String(ev.id).split("-")[0]);
  return h("tr", {},
    h("td", {}, when(ts)),
    h("td", {}, h("span", { class: "badge " + (ev.type === "delete" ? "bad" : ev.type === "add" ? "ok" : "warn") }, ev.type)),
    h("td", { class: "path" }, d.oldPath ? `${d.oldPath} → ${d.path}` : d.path || ""),
    h("td", {}, d.size ? num(Number(d.size)) + " B" : ""));
}
