// The API as the page uses it: the token from GET /api/token (handed only
// to this node's own page), sent on every request; JSON in and out; event
// streams read with fetch, so they carry the token too.

let token = null;
let tokenTried = false;

export class ApiError extends Error {
  constructor(status, slug, message) {
    super(message || `${status} ${slug || ""}`);
    this.status = status;
    this.slug = slug;
  }
}

// loadToken asks for the token once; null when the node gives none (the
// page then reads and cannot write).
export async function loadToken() {
  if (tokenTried) return token;
  tokenTried = true;
  try {
    const r = await fetch("/api/token", { cache: "no-store" });
    if (r.ok) token = (await r.json()).token;
  } catch (e) {
    token = null;
  }
  return token;
}

export function canWrite() {
  return token !== null;
}

function headers(json) {
  const h = {};
  if (token) h["Authorization"] = "Bearer " + token;
  if (json) h["Content-Type"] = "application/json";
  return h;
}

async function failure(r) {
  let e = {};
  try {
    e = await r.json();
  } catch (_) {
    e = { message: r.statusText };
  }
  return new ApiError(r.status, e.error, e.message);
}

// api calls path with method and an optional JSON body; it answers the
// decoded JSON, or throws an ApiError with the node's message.
export async function api(path, method = "GET", body) {
  const init = { method, headers: headers(body !== undefined), cache: "no-store" };
  if (body !== undefined) init.body = JSON.stringify(body);
  const r = await fetch(path, init);
  if (!r.ok) throw await failure(r);
  if (r.status === 204) return null;
  return r.json();
}

// blob posts a JSON body and answers the response as a Blob (the QR code).
export async function blob(path, body) {
  const r = await fetch(path, { method: "POST", headers: headers(true), body: JSON.stringify(body), cache: "no-store" });
  if (!r.ok) throw await failure(r);
  return r.blob();
}

// follow reads an SSE stream (text/event-stream) and calls onEvent({id,
// type, data}) for each event; it reconnects 2 s after the stream ends,
// from the last id. It stops when signal aborts.
export function follow(path, onEvent, signal, lastID) {
  let last = lastID || null;
  const run = async () => {
    while (!signal.aborted) {
      try {
        const h = headers(false);
        if (last) h["Last-Event-ID"] = last;
        const r = await fetch(path, { headers: h, signal, cache: "no-store" });
        if (r.ok && r.body) await readEvents(r.body, (ev) => {
          if (ev.id) last = ev.id;
          onEvent(ev);
        });
      } catch (e) {
        if (signal.aborted) return;
      }
      await sleep(2000, signal);
    }
  };
  run();
}

async function readEvents(body, onEvent) {
  const reader = body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  let ev = { data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).replace(/\r$/, "");
      buf = buf.slice(nl + 1);
      if (line === "") {
        if (ev.data.length || ev.type) {
          let data = ev.data.join("\n");
          try { data = JSON.parse(data); } catch (_) { /* keep the text */ }
          onEvent({ id: ev.id, type: ev.type || "message", data });
        }
        ev = { data: [] };
        continue;
      }
      if (line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      const val = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
      if (field === "data") ev.data.push(val);
      else if (field === "event") ev.type = val;
      else if (field === "id") ev.id = val;
    }
  }
}

export function sleep(ms, signal) {
  return new Promise((done) => {
    const t = setTimeout(done, ms);
    if (signal) signal.addEventListener("abort", () => { clearTimeout(t); done(); }, { once: true });
  });
}
