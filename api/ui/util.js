// Small DOM helpers: elements are built from text, never from HTML
// strings, so nothing the node answers can become markup.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (v === true) el.setAttribute(k, "");
    else el.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el, ...children) {
  el.replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

// short shows the start and end of a long id.
export function short(id, n = 8) {
  if (!id) return "";
  return id.length <= 2 * n + 1 ? id : id.slice(0, n) + "…" + id.slice(-n);
}

// uid renders an id shortened, whole in its title, with a copy button.
export function idText(id, label) {
  return h("span", { class: "id", title: id }, h("code", {}, short(id)), copyButton(id, label || "Copy " + id));
}

// copyIcon is two overlapping sheets, drawn (no icon font: the node has
// no fonts of its own to rely on).
function copyIcon() {
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", "0 0 16 16");
  svg.setAttribute("width", "14");
  svg.setAttribute("height", "14");
  svg.setAttribute("aria-hidden", "true");
  for (const [x, y] of [[5, 1], [1, 5]]) {
    const r = document.createElementNS(ns, "rect");
    for (const [k, v] of Object.entries({ x, y, width: 10, height: 10, rx: 1.5, fill: x === 1 ? "var(--card)" : "none", stroke: "currentColor", "stroke-width": 1.5 })) r.setAttribute(k, v);
    svg.append(r);
  }
  return svg;
}

export function copyButton(text, label) {
  const b = h("button", { type: "button", class: "copy", "aria-label": label || "Copy", title: "Copy" }, copyIcon());
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      flash(b, "✓");
    } catch (_) {
      flash(b, "✗");
    }
  });
  return b;
}

function flash(b, mark) {
  const old = [...b.childNodes];
  b.textContent = mark;
  setTimeout(() => b.replaceChildren(...old), 1200);
}

export function num(n) {
  return typeof n === "number" ? n.toLocaleString("en") : "—";
}

export function bytes(n) {
  if (typeof n !== "number") return "—";
  const u = ["B", "KB", "MB", "GB", "TB"];
  let i = 0;
  while (n >= 1000 && i < u.length - 1) { n /= 1000; i++; }
  return (i ? n.toFixed(1) : n) + " " + u[i];
}

export function when(t) {
  if (!t) return "never";
  const d = typeof t === "number" ? new Date(t) : new Date(t);
  if (isNaN(d)) return "—";
  return d.toLocaleString("en-GB", { dateStyle: "medium", timeStyle: "medium" });
}

export function ago(t) {
  if (!t) return "never";
  const s = Math.round((Date.now() - new Date(t).getTime()) / 1000);
  if (s < 5) return "just now";
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return Math.round(s / 86400) + " days ago";
}

export function errorBox(e) {
  return h("p", { class: "error", role: "alert" }, e && e.message ? e.message : String(e));
}

export function card(title, ...body) {
  return h("section", { class: "card", "aria-label": title }, h("h2", {}, title), ...body);
}

// dl builds a definition list from [term, value] pairs (null values skipped).
export function dl(pairs) {
  return h("dl", { class: "facts" }, pairs.filter((p) => p && p[1] !== null && p[1] !== undefined)
    .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

// confirm asks in the page's dialog; resolves true when confirmed.
export function confirmDialog(title, text, ok) {
  const d = document.getElementById("confirm");
  document.getElementById("confirm-title").textContent = title;
  document.getElementById("confirm-text").textContent = text;
  const okB = document.getElementById("confirm-ok");
  const cancelB = document.getElementById("confirm-cancel");
  okB.textContent = ok || "Confirm";
  return new Promise((done) => {
    const finish = (v) => {
      okB.removeEventListener("click", onOK);
      cancelB.removeEventListener("click", onCancel);
      d.removeEventListener("cancel", onCancel);
      if (d.open) d.close();
      done(v);
    };
    const onOK = () => finish(true);
    const onCancel = () => finish(false);
    okB.addEventListener("click", onOK);
    cancelB.addEventListener("click", onCancel);
    d.addEventListener("cancel", onCancel);
    d.showModal();
    cancelB.focus();
  });
}
