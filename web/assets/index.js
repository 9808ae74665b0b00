// The episodes page: the server's episodes and a form that creates one.
"use strict";
(() => {
  const { api, el } = omar;
  omar.nav("episodes");
  let catalog = { envs: [], agents: [] };
  // The served model's parameters per environment (GET /v1/site), which
  // the form starts from.
  let modelParams = {};

  function agentOptions(env, seatIndex) {
    const opts = ["me", "remote"];
    for (const a of catalog.agents) if (a !== "remote" && a !== "me" && a !== "scripted") opts.push(a);
    opts.push("scripted");
    for (const p of env.policies || []) opts.push("scripted:" + p);
    // By default the first seat is played here and the others by the
    // game's default policy (or the model when the server has one).
    const model = catalog.agents.includes("model") ? "model" : "scripted";
    const sel = el("select", { class: "agent", "data-seat": String(seatIndex) });
    for (const o of opts) sel.append(el("option", { value: o, text: o, selected: o === (seatIndex === 0 ? "me" : model) }));
    return sel;
  }

  function currentEnv() { return catalog.envs.find((e) => e.id === document.getElementById("env").value); }
  function envName(id) { return id.replace(/_v[0-9]+$/, ""); }

  // showSeats lists env's seats (for the form's parameters), keeping the
  // agents already chosen for the seats that stay.
  function showSeats(env, seats) {
    const body = document.getElementById("seats");
    const chosen = [...document.querySelectorAll("select.agent")].map((s) => s.value);
    body.replaceChildren(...seats.map((s, i) => {
      const sel = agentOptions(env, i);
      if (chosen[i] !== undefined && [...sel.options].some((o) => o.value === chosen[i])) sel.value = chosen[i];
      return el("tr", {}, el("td", { text: s.name }), el("td", { text: s.role || "dealt in secret" }), el("td", {}, sel));
    }));
  }

  // paramInput is one parameter's control: a checkbox for a boolean, a
  // number box for a number, a text box for a string. Nested values (role
  // lists, shaping weights) keep their defaults: the API takes them.
  function paramInput(key, def, start) {
    const attrs = { class: "param", "data-param": key, id: "param-" + key };
    let input;
    if (typeof def === "boolean") input = el("input", { ...attrs, type: "checkbox", checked: !!start });
    else if (typeof def === "number") input = el("input", { ...attrs, type: "number", step: "any", value: String(start), size: 8 });
    else if (typeof def === "string") input = el("input", { ...attrs, type: "text", value: start, size: 10 });
    else return null;
    input.dataset.kind = typeof def;
    input.addEventListener("change", checkParams);
    const label = el("label", { class: "param-label" + (start !== def ? " from-model" : ""), title: start !== def ? "the served model's setting (the game's default: " + JSON.stringify(def) + ")" : "" }, key + " ", input);
    return label;
  }

  function showEnv() {
    const env = currentEnv();
    document.getElementById("seats").replaceChildren();
    if (!env) return;
    document.getElementById("env-desc").textContent = env.description;
    const defaults = env.params || {};
    const mine = modelParams[envName(env.id)] || {};
    const inputs = Object.keys(defaults).map((k) => paramInput(k, defaults[k], k in mine ? mine[k] : defaults[k])).filter((x) => x);
    document.getElementById("params").replaceChildren(...inputs);
    document.getElementById("params-box").classList.toggle("hidden", inputs.length === 0);
    document.getElementById("params-note").textContent = Object.keys(mine).length ? "(started from the served model's: " + Object.keys(mine).join(", ") + ")" : "(the game's defaults)";
    document.getElementById("params-error").textContent = "";
    showSeats(env, env.seats);
  }

  // formParams are the parameters that differ from the game's defaults:
  // the others are the game's own and need not be sent.
  function formParams() {
    const env = currentEnv();
    const defaults = (env && env.params) || {};
    const out = {};
    for (const input of document.querySelectorAll("input.param")) {
      const k = input.dataset.param;
      let v = input.value;
      if (input.dataset.kind === "boolean") v = input.checked;
      else if (input.dataset.kind === "number") v = Number(input.value);
      if (v !== defaults[k]) out[k] = v;
    }
    return out;
  }

  // checkParams asks the server for the seats of the form's parameters:
  // some change them (bidders, players), and a value the game refuses is
  // named before Start.
  async function checkParams() {
    const env = currentEnv();
    const err = document.getElementById("params-error");
    const q = encodeURIComponent(JSON.stringify(formParams()));
    try {
      const { data } = await api("/v1/envs/" + encodeURIComponent(env.id) + "?params=" + q, { token: "" });
      err.textContent = "";
      if (currentEnv() === env) showSeats(env, data.seats);
    } catch (e) {
      err.textContent = (e.body && e.body.error) || e.message;
    }
  }

  async function loadCatalog() {
    const { data } = await api("/v1/envs", { token: "" });
    catalog = data;
    const sel = document.getElementById("env");
    sel.replaceChildren(...data.envs.map((e) => el("option", { value: e.id, text: e.id })));
    const cl = data.envs.find((e) => e.id.startsWith("craigslist"));
    if (cl) sel.value = cl.id;
    showEnv();
    // The model's parameters can deal other seats than the defaults.
    if (Object.keys(modelParams[envName(sel.value)] || {}).length) await checkParams();
  }

  // Links carry tokens in the fragment: browsers never send it.
  function seatLink(id, seat) { return "/ui/episode?id=" + encodeURIComponent(id) + "#seat=" + seat.index + "&token=" + encodeURIComponent(seat.token); }

  async function create(ev) {
    ev.preventDefault();
    const err = document.getElementById("create-error");
    err.textContent = "";
    const selects = [...document.querySelectorAll("select.agent")];
    // "me" is a remote seat the server labels me: this browser plays it.
    const agents = selects.map((s) => s.value);
    const body = { env: document.getElementById("env").value, agents };
    const params = formParams();
    if (Object.keys(params).length) body.params = params;
    const seed = document.getElementById("seed").value.trim();
    // Sent as a string: a JavaScript number rounds seeds above 2^53.
    if (seed !== "") {
      if (!/^[0-9]+$/.test(seed)) { err.textContent = "The seed is a whole number from 0 to 18446744073709551615."; return; }
      body.seed = seed;
    }
    try {
      const { data } = await api("/v1/episodes", { method: "POST", body });
      const mine = selects.findIndex((s) => s.value === "me");
      location.href = mine >= 0 ? seatLink(data.id, data.seats[mine]) : "/ui/episode?id=" + encodeURIComponent(data.id);
    } catch (e) {
      err.textContent = e.status === 401 ? "Creating episodes needs the server's secret (above)." : e.message;
    }
  }

  async function list() {
    const body = document.getElementById("episodes");
    const err = document.getElementById("list-error");
    err.textContent = "";
    if (!omar.secret()) { err.textContent = "Listing episodes needs the server's secret."; body.replaceChildren(); return; }
    try {
      const { data } = await api("/v1/episodes");
      body.replaceChildren(...data.episodes.slice().reverse().map((e) => {
        const seats = e.seats.map((s) => s.name + " (" + s.agent + ")").join(", ");
        const result = e.outcome ? e.outcome.result + " · " + e.outcome.rewards.map(omar.fmt).join(" / ") : e.error || "";
        return el("tr", { "data-id": e.id }, el("td", { text: e.id }), el("td", { text: e.env }), el("td", { text: e.status }), el("td", { text: seats }), el("td", { text: result }),
          el("td", {}, el("a", { href: "/ui/episode?id=" + encodeURIComponent(e.id), text: "watch" })));
      }));
    } catch (e) {
      err.textContent = e.message;
    }
  }

  omar.secretForm(document.getElementById("secret-box"), list);
  document.getElementById("env").addEventListener("change", () => { showEnv(); checkParams(); });
  document.getElementById("create").addEventListener("submit", create);
  document.getElementById("refresh").addEventListener("click", list);
  api("/v1/site", { token: "" }).then(({ data }) => {
    if (!data.episodes) {
      document.getElementById("create-box").classList.add("hidden");
      document.getElementById("list-error").textContent = "This server runs no episodes (a dashboard only).";
      return;
    }
    modelParams = data.model_params || {};
    loadCatalog().catch((e) => (document.getElementById("create-error").textContent = e.message));
    list();
  });
})();
