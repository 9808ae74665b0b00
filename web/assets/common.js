// omar's shared page code: the secret, API calls and event rendering.
// Every text that a participant wrote goes into the page as textContent,
// never as markup.
"use strict";

const omar = (() => {
  const key = "omar.secret";
  // A fragment "#secret=…" (printed by omar selfplay --ui) is taken into
  // session storage and removed from the address bar.
  const frag = new URLSearchParams(location.hash.slice(1));
  if (frag.get("secret")) {
    sessionStorage.setItem(key, frag.get("secret"));
    frag.delete("secret");
    history.replaceState(null, "", location.pathname + location.search + (frag.toString() ? "#" + frag : ""));
  }

  function secret() { return sessionStorage.getItem(key) || ""; }
  function setSecret(s) { if (s) sessionStorage.setItem(key, s); else sessionStorage.removeItem(key); }
  function fragment() { return new URLSearchParams(location.hash.slice(1)); }

  class APIError extends Error {
    constructor(status, message, body) { super(message); this.status = status; this.body = body; }
  }

  // parseJSON keeps a numeric "seed" as its source text where the browser
  // gives it (JSON.parse source access): a double rounds a 64-bit seed,
  // and files written before seeds became strings hold numbers.
  function parseJSON(text) {
    return JSON.parse(text, (k, v, ctx) => (k === "seed" && typeof v === "number" && ctx && typeof ctx.source === "string" ? ctx.source : v));
  }

  // api calls the server with a bearer token (the secret by default).
  async function api(path, opts = {}) {
    const headers = {};
    const token = opts.token !== undefined ? opts.token : secret();
    if (token) headers["Authorization"] = "Bearer " + token;
    let body;
    if (opts.body !== undefined) { headers["Content-Type"] = "application/json"; body = JSON.stringify(opts.body); }
    const resp = await fetch(path, { method: opts.method || "GET", headers, body, signal: opts.signal });
    const text = await resp.text();
    let data = null;
    try { data = text ? parseJSON(text) : null; } catch (e) { data = null; }
    if (!resp.ok && !(opts.accept || []).includes(resp.status)) {
      throw new APIError(resp.status, "HTTP " + resp.status + ": " + ((data && data.error) || text.trim()), data);
    }
    return { status: resp.status, data };
  }

  // el makes an element; children strings become text nodes.
  function el(tag, attrs = {}, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs)) {
      if (k === "class") e.className = v;
      else if (k === "text") e.textContent = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else if (v !== undefined && v !== null && v !== false) e.setAttribute(k, v === true ? "" : v);
    }
    for (const c of children) if (c !== null && c !== undefined) e.append(c);
    return e;
  }

  function seatName(seats, i) {
    const s = (seats || []).find((x) => x.index === i);
    return s ? s.name : "seat " + i;
  }

  function audienceLabel(a, seats) {
    if (!a) return "record only";
    if (a.all) return "public";
    const names = (a.seats || []).map((i) => seatName(seats, i));
    const team = a.team ? "team " + a.team + ": " : "";
    return names.length ? "to " + team + names.join(", ") : "record only";
  }

  // renderEvent is one event of a log: its kind, who it is about, its
  // audience and its text.
  function renderEvent(ev, seats) {
    const who = ev.seat >= 0 ? seatName(seats, ev.seat) : "";
    const aud = audienceLabel(ev.audience, seats);
    const meta = "#" + ev.seq + " " + ev.kind + (who ? " · " + who : "") + (ev.notification_id ? " · " + ev.notification_id : "") + " · " + aud;
    let text = ev.text || "";
    if (ev.kind === "action") text = "» " + text;
    if (ev.kind === "notification" && ev.legal && ev.legal.length) text += "\nLegal: " + ev.legal.join(" | ");
    return el("li", { class: "event kind-" + ev.kind + (ev.audience && !ev.audience.all ? " private" : ""), "data-seq": String(ev.seq), "data-kind": ev.kind },
      el("span", { class: "meta", text: meta }), text);
  }

  // includes reports whether a seat may see an event (the engine's rule;
  // team audiences are resolved to seats when the event is appended).
  function includes(a, seat) { return !!a && (a.all || (a.seats || []).includes(seat)); }

  function nav(here) {
    for (const a of document.querySelectorAll("header nav a")) if (a.dataset.page === here) a.classList.add("here");
  }

  // secretForm fills form (an input and a button) to set the secret.
  function secretForm(container, onSet) {
    const input = el("input", { type: "password", id: "secret", placeholder: "server secret", autocomplete: "off", size: 36 });
    const status = el("span", { class: "muted", id: "secret-status", text: secret() ? "secret set for this tab" : "no secret set" });
    const form = el("form", { class: "row", id: "secret-form", onsubmit: (e) => { e.preventDefault(); setSecret(input.value.trim()); input.value = ""; status.textContent = secret() ? "secret set for this tab" : "no secret set"; onSet && onSet(); } },
      el("label", { text: "Secret" }), input, el("button", { type: "submit", text: "Use" }), status);
    container.replaceChildren(form);
  }

  function fmt(x) {
    if (typeof x !== "number") return String(x);
    if (Number.isInteger(x)) return String(x);
    return Math.abs(x) >= 100 ? x.toFixed(1) : x.toFixed(3);
  }

  return { api, APIError, parseJSON, el, secret, setSecret, fragment, renderEvent, includes, seatName, audienceLabel, nav, secretForm, fmt };
})();
