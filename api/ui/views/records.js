import { api, follow } from "../api.js";
import { h, clear, idText, when, errorBox, num, short, copyButton } from "../util.js";

const pageSize = 25;
// The search form's state survives a visit to a record.
const state = { query: "", filters: [], offset: 0 };

export async function render(root, { args, signal }) {
  if (args[0]) return recordView(root, args[0], signal);
  return searchView(root);
}

// ---- search

function searchView(root) {
  const q = h("input", { id: "search-q", type: "search", value: state.query, "aria-label": "Search words", placeholder: "words in any field (title, file name, …)" });
  const filters = h("div", { id: "filters" });
  const results = h("div", { id: "results", "aria-live": "polite" });
  const run = (offset) => {
    state.query = q.value;
    state.offset = offset;
    search(results, run);
  };
  const addFilter = h("button", { type: "button", id: "add-filter", class: "secondary" }, "Add a filter");
  addFilter.addEventListener("click", () => {
    state.filters.push({ property: "", values: "", exact: false });
    drawFilters(filters);
  });
  const go = h("button", { type: "submit", id: "search-go" }, "Search");
  const form = h("form", { role: "search", class: "search", onsubmit: (e) => { e.preventDefault(); run(0); } },
    h("div", { class: "row" }, h("label", { for: "search-q", class: "sr-only" }, "Search"), q, go), filters, h("div", { class: "row" }, addFilter));
  clear(root, h("h1", {}, "Records"), form, results);
  drawFilters(filters);
  run(state.offset);
}

function drawFilters(el) {
  clear(el, state.filters.map((f, i) => {
    const prop = h("input", { type: "text", value: f.property, "aria-label": `Filter ${i + 1}: key`, placeholder: "key, e.g. type", class: "filter-key" });
    const vals = h("input", { type: "text", value: f.values, "aria-label": `Filter ${i + 1}: values, comma separated`, placeholder: "values, comma separated (any of them)", class: "filter-values" });
    const exact = h("input", { type: "checkbox", id: `exact-${i}`, checked: f.exact });
    prop.addEventListener("input", () => { f.property = prop.value; });
    vals.addEventListener("input", () => { f.values = vals.value; });
    exact.addEventListener("change", () => { f.exact = exact.checked; });
    const rm = h("button", { type: "button", class: "small", "aria-label": `Remove filter ${i + 1}` }, "✕");
    rm.addEventListener("click", () => { state.filters.splice(i, 1); drawFilters(el); });
    return h("div", { class: "row filter" }, prop, vals, h("label", { for: `exact-${i}` }, exact, " exact"), rm);
  }));
}

async function search(out, run) {
  const filters = state.filters.filter((f) => f.property.trim())
    .map((f) => ({ property: f.property.trim(), values: f.values.split(",").map((v) => v.trim()).filter(Boolean), exact: f.exact }))
    .filter((f) => f.values.length);
  let res;
  try {
    res = await api("/api/metadata/search", "POST", { query: state.query.trim(), filters, limit: pageSize, offset: state.offset });
  } catch (e) {
    clear(out, errorBox(e));
    return;
  }
  const from = res.total ? state.offset + 1 : 0;
  const to = state.offset + res.results.length;
  const prev = h("button", { type: "button", id: "prev", class: "secondary", disabled: state.offset === 0 }, "← Previous");
  const next = h("button", { type: "button", id: "next", class: "secondary", disabled: to >= res.total }, "Next →");
  prev.addEventListener("click", () => run(Math.max(0, state.offset - pageSize)));
  next.addEventListener("click", () => run(state.offset + pageSize));
  clear(out,
    h("p", { id: "search-total" }, totalText(from, to, res.total)),
    h("ul", { class: "results" }, res.results.map((r) => {
      const m = r.metadata || {};
      const title = m.title || m.fileName || m.originalTitle || r.hashId;
      const sub = [m.type, m.year, m.fileName && m.title ? m.fileName : null].filter(Boolean).join(" · ");
      return h("li", {}, h("a", { href: "#/records/" + encodeURIComponent(r.hashId), class: "hit" }, h("strong", {}, title)),
        h("span", { class: "muted" }, " ", sub, " ", h("code", {}, r.hashId)));
    })),
    h("div", { class: "row pager" }, prev, next));
}

function totalText(from, to, total) {
  if (!total) return "No record matches.";
  if (total === 1) return "1 record";
  return from === 1 && to === total ? `${num(total)} records` : `${num(from)}–${num(to)} of ${num(total)} records`;
}

// ---- one record

async function recordView(root, id, signal) {
  const body = h("div", { id: "record" });
  clear(root, h("p", {}, h("a", { href: "#/records" }, "← Records")), body);
  let timer = null;
  const load = async () => {
    try {
      const [rec, ex, tl, info] = await Promise.all([
        api("/api/meta/" + encodeURIComponent(id)), api("/api/meta/" + encodeURIComponent(id) + "/explain"),
        api("/api/trust"), api("/api/node")]);
      draw(body, rec, ex, signers(tl, info.uid));
    } catch (e) {
      clear(body, errorBox(e));
    }
  };
  await load();
  // Live: any change of this record's merged values reloads it.
  follow("/api/events/meta", (ev) => {
    const key = ev.data && ev.data.key;
    const rid = body.dataset.rid;
    if (!rid || typeof key !== "string" || !key.startsWith("file:" + rid + "/")) return;
    clearTimeout(timer);
    timer = setTimeout(load, 250);
  }, signal);
  return () => clearTimeout(timer);
}

// signers maps a uid to how this node sees it.
function signers(tl, own) {
  const m = new Map();
  for (const e of tl.trusted) m.set(e.uid, e.source === "own" ? "this node" : e.source === "vouch" ? "vouched" : e.note === "local writer" ? "local writer" : "trusted");
  for (const e of tl.distrusted || []) m.set(e.uid, "distrusted");
  m.set(own, "this node");
  return m;
}

const whyText = {
  won: "won",
  agrees: "agrees with the winner",
  outvoted: "outvoted",
  "home-chose": "its home chose another value",
  untrusted: "does not count (not trusted)",
  superseded: "replaced by the signer's newer claim",
  retraction: "withdrawn",
  ciphertext: "encrypted: never merged",
  "no-value": "no value",
};

function draw(body, rec, ex, who) {
  body.dataset.rid = ex.rid;
  const m = rec.metadata || {};
  const title = m.title || m.fileName || ex.rid;
  const signed = new Set(ex.fields.map((f) => f.key));
  const local = Object.keys(m).filter((k) => !signed.has(k) && !k.startsWith("cids/")).sort();
  clear(body,
    h("h1", {}, title),
    h("dl", { class: "facts" },
      h("dt", {}, "Record (rid)"), h("dd", {}, h("code", { id: "rid" }, ex.rid), copyButton(ex.rid, "Copy the rid")),
      h("dt", {}, "Canonical cid"), h("dd", {}, ex.canonical_cid ? idText(ex.canonical_cid, "Copy the canonical cid") : "—"),
      h("dt", {}, "Cids"), h("dd", {}, h("ul", { class: "plain" }, ex.cids.map((c) => h("li", {}, idText(c, "Copy cid " + c))))),
      ex.fileCid ? [h("dt", {}, "File"), h("dd", {}, h("a", { id: "open-file", href: "/file/" + encodeURIComponent(ex.fileCid) }, "Open the local file"),
        m.filePath ? h("span", { class: "muted" }, " ", m.filePath) : "")] : null),
    h("h2", {}, "Fields"),
    h("div", { class: "scroll" }, h("table", { id: "table-fields" },
      h("thead", {}, h("tr", {}, ["Key", "Value", "Why"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {},
        ex.fields.map((f) => h("tr", { "data-key": f.key },
          h("th", { scope: "row" }, h("a", { href: "#field-" + f.key, onclick: (e) => { e.preventDefault(); document.getElementById("field-" + f.key)?.scrollIntoView(); } }, f.key)),
          h("td", { class: "value" }, f.merged ? f.value : h("span", { class: "muted" }, "none")),
          h("td", { class: "muted" }, f.reason))),
        local.map((k) => h("tr", { "data-key": k }, h("th", { scope: "row" }, k), h("td", { class: "value" }, m[k]),
          h("td", { class: "muted" }, "this machine's own fact (not a claim)")))))),
    h("h2", {}, "Claims, field by field"),
    ex.fields.map((f) => fieldClaims(f, who)));
}

function fieldClaims(f, who) {
  return h("section", { class: "card wide field", id: "field-" + f.key, "aria-label": "Claims on " + f.key },
    h("h3", {}, h("code", {}, f.key), " = ", f.merged ? h("span", { class: "value" }, f.value) : h("span", { class: "muted" }, "no value")),
    h("p", { class: "muted reason" }, f.reason, f.voting > 1 ? ` · ${f.voting} homes voted` : ""),
    h("div", { class: "scroll" }, h("table", { class: "claims stack" },
      h("thead", {}, h("tr", {}, ["Signer", "Value", "Time", "Outcome"].map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, f.votes.map((v) => h("tr", { class: v.why === "won" ? "won" : v.counts ? "" : "dim", "data-why": v.why },
        h("td", {}, idText(v.uid, "Copy signer " + v.uid), h("div", { class: "muted small" },
          v.counts ? (who.get(v.uid) || "trusted") : (who.get(v.uid) || "not trusted"),
          v.counts && v.home !== v.uid ? (who.get(v.home) === "this node" ? " · this home" : ` · home of ${short(v.home)}`) : "")),
        h("td", { class: "value" }, v.kind === "text" ? v.value : h("span", { class: "muted" }, v.kind)),
        h("td", {}, when(v.ts)),
        h("td", {}, v.why === "won" ? h("strong", { class: "badge ok" }, "won") : whyText[v.why] || v.why)))))));
}
