import { api, blob, canWrite, sleep } from "../api.js";
import { h, clear, card, copyButton, when, errorBox } from "../util.js";
import { progressBar } from "./common.js";

export async function render(root, { signal }) {
  const invite = h("div", { id: "invite-out" });
  const ttl = h("select", { id: "invite-ttl", "aria-label": "Code valid for" },
    h("option", { value: "1h" }, "1 hour"), h("option", { value: "24h", selected: true }, "24 hours"),
    h("option", { value: "168h" }, "7 days"));
  const make = h("button", { type: "button", id: "make-invite", disabled: !canWrite() }, "Make an invite code");
  make.addEventListener("click", () => makeInvite(invite, ttl.value, make));

  const code = h("textarea", { id: "join-code", rows: 3, "aria-label": "Pairing code from the other home", placeholder: "mn1:…", spellcheck: "false" });
  const join = h("button", { type: "button", id: "join", disabled: !canWrite() }, "Join");
  const progress = h("div", { id: "join-progress", role: "status", "aria-live": "polite" });
  join.addEventListener("click", async () => {
    join.disabled = true;
    try {
      await api("/api/swarm/join", "POST", { code: code.value.trim() });
      code.value = "";
    } catch (e) {
      clear(progress, errorBox(e));
    }
    join.disabled = !canWrite();
    watchJoin(progress, signal);
  });

  clear(root, h("h1", {}, "Pairing"), h("div", { class: "grid" },
    card("Invite another home",
      h("p", {}, "Make a code and give it to the other home's owner: they paste it under “Join another home” on their node's page, or run ",
        h("code", {}, "metanode join <code>"), ". It is good for one home until it expires. Treat it like a password."),
      h("div", { class: "row" }, h("label", { for: "invite-ttl" }, "Valid for "), ttl, make),
      invite),
    card("Join another home",
      h("p", {}, "Paste the code the other home made. Both homes then trust each other and share their claims."),
      h("label", { for: "join-code", class: "block" }, "Pairing code"), code,
      h("div", { class: "row" }, join),
      progress)));
  watchJoin(progress, signal);
}

async function makeInvite(out, ttl, button) {
  button.disabled = true;
  try {
    const inv = await api("/api/swarm/invite", "POST", { ttl });
    const text = h("textarea", { id: "invite-code", readonly: true, rows: 4, "aria-label": "Pairing code", spellcheck: "false" }, inv.code);
    const img = h("img", { id: "invite-qr", class: "qr", alt: "QR code of the pairing code" });
    clear(out, h("label", { for: "invite-code", class: "block" }, "Pairing code"), text,
      h("div", { class: "row" }, copyButtonWide(inv.code), h("span", { class: "muted" }, `valid until ${when(inv.expires)} · swarm ${inv.swarm}${inv.private ? " (private)" : ""}`)),
      img);
    text.addEventListener("focus", () => text.select());
    const b = await blob("/api/qr", { text: inv.code });
    img.src = URL.createObjectURL(b);
  } catch (e) {
    clear(out, errorBox(e));
  }
  button.disabled = false;
}

function copyButtonWide(text) {
  const b = copyButton(text, "Copy the pairing code");
  b.classList.add("wide");
  b.append(" Copy code");
  return b;
}

// watchJoin shows the latest join's progress, every 2 s while it runs.
async function watchJoin(out, signal) {
  while (!signal.aborted) {
    let st;
    try {
      st = await api("/api/swarm/join");
    } catch (e) {
      clear(out, errorBox(e));
      return;
    }
    showJoin(out, st);
    if (st.state !== "connecting" && st.state !== "paired") return;
    await sleep(2000, signal);
  }
}

const labels = { connecting: "Connecting…", paired: "Paired: syncing", done: "Joined", failed: "Join failed" };

function showJoin(out, st) {
  if (st.state === "idle") {
    clear(out);
    return;
  }
  clear(out, h("p", { id: "join-state", class: "state " + st.state },
    h("strong", {}, labels[st.state] || st.state)),
    st.state === "paired" || st.state === "done" ? h("p", {}, progressBar("Claims received", st.have, st.total)) : null,
    st.message ? h("p", { class: st.state === "failed" ? "error" : "muted" }, st.message) : null);
}
