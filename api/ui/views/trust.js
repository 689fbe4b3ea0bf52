import { api, canWrite } from "../api.js";
import { h, clear, idText, when, errorBox, confirmDialog, short } from "../util.js";

// Why an entry is on the list, in words (the node's notes: node/*.go).
const notes = {
  paired: "paired: joined with an invite code from this node",
  inviter: "paired: this node joined with its invite code",
  "local writer": "local writer: signed claims through this node's API",
  owner: "added by hand",
  vouched: "restored from this node's own vouch",
};

export function reason(e, own) {
  if (e.source === "own") return "this node";
  const by = (e.vouchedBy || []).map((u) => (u === own ? "this node" : short(u)));
  if (e.source === "vouch") return "vouched for by " + by.join(", ");
  const why = notes[e.note] || (e.note ? "on the list: " + e.note : "on the list");
  const also = by.filter((b) => b !== "this node" || e.note !== "local writer");
  return also.length ? `${why}; vouched for by ${also.join(", ")}` : why;
}

export async function render(root, { signal }) {
  const list = h("div", { id: "trust-list" });
  const input = h("input", { id: "trust-uid", type: "text", "aria-label": "UID to trust", placeholder: "z… (the other home's uid: metanode id)", spellcheck: "false", autocomplete: "off" });
  const add = h("button", { type: "button", id: "trust-add", disabled: !canWrite() }, "Trust");
  const msg = h("div", { role: "status", "aria-live": "polite" });
  add.addEventListener("click", async () => {
    const uid = input.value.trim();
    if (!uid) return;
    if (!(await confirmDialog("Trust this signer?", `Claims signed by ${uid} will count on this node, and the node will sync them from its peers.`, "Trust"))) return;
    try {
      await api("/api/trust/" + encodeURIComponent(uid), "PUT");
      input.value = "";
      clear(msg);
    } catch (e) {
      clear(msg, errorBox(e));
    }
    load(list, msg);
  });
  clear(root, h("h1", {}, "Trust"),
    h("p", {}, "Whose claims count on this node, and why. Removing a signer drops its votes from every record at once; its claims stay on disk and count again if you trust it again."),
    h("div", { class: "row add" }, h("label", { for: "trust-uid" }, "Trust a uid "), input, add), msg, list);
  await load(list, msg);
}

async function load(list, msg) {
  let tl, info;
  try {
    [tl, info] = await Promise.all([api("/api/trust"), api("/api/node")]);
  } catch (e) {
    clear(list, errorBox(e));
    return;
  }
  const own = info.uid;
  const rows = tl.trusted.map((e) => h("tr", { "data-uid": e.uid },
    h("td", {}, idText(e.uid, "Copy uid " + e.uid)),
    h("td", { class: "why" }, reason(e, own)),
    h("td", {}, e.added ? when(e.added) : ""),
    h("td", {}, e.source === "list" && canWrite() ? h("button", {
      type: "button", class: "danger small remove", "aria-label": "Remove trust in " + e.uid,
      onclick: () => change(e.uid, false, list, msg),
    }, "Remove") : e.source === "vouch" ? h("span", { class: "muted" }, "through a vouch") : "")));
  const blocked = (tl.distrusted || []).map((e) => h("tr", { "data-uid": e.uid },
    h("td", {}, idText(e.uid, "Copy uid " + e.uid)),
    h("td", { class: "why" }, "distrusted" + ((e.vouchedBy || []).length ? "; overrides vouches by " + e.vouchedBy.map((u) => (u === own ? "this node" : short(u))).join(", ") : "")),
    h("td", {}, e.added ? when(e.added) : ""),
    h("td", {}, canWrite() ? h("button", { type: "button", class: "small", "aria-label": "Trust " + e.uid + " again", onclick: () => change(e.uid, true, list, msg) }, "Trust again") : "")));
  clear(list,
    h("p", { class: "muted" }, `Mode: ${tl.mode}${tl.mode === "open" ? " (every valid signer counts except those distrusted)" : ""}. ${tl.trusted.length} trusted.`),
    table("Trusted signers", ["Signer", "Why", "Since", ""], rows, "trusted"),
    blocked.length ? table("Distrusted", ["Signer", "Why", "Since", ""], blocked, "distrusted") : null);
}

function table(caption, heads, rows, id) {
  return h("div", { class: "scroll" }, h("table", { id: "table-" + id, class: "stack" },
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, heads.map((x) => h("th", { scope: "col" }, x)))),
    h("tbody", {}, rows)));
}

async function change(uid, trust, list, msg) {
  const ok = trust
    ? await confirmDialog("Trust again?", `Claims signed by ${uid} will count again.`, "Trust")
    : await confirmDialog("Remove trust?", `Claims signed by ${uid} stop counting on this node at once, and its vouches for others stop too. You can trust it again later.`, "Remove");
  if (!ok) return;
  try {
    await api("/api/trust/" + encodeURIComponent(uid), trust ? "PUT" : "DELETE");
    clear(msg);
  } catch (e) {
    clear(msg, errorBox(e));
  }
  load(list, msg);
}
