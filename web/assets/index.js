// The episodes page: the server's episodes and a form that creates one.
"use strict";
(() => {
  const { api, el } = omar;
  omar.nav("episodes");
  let catalog = { envs: [], agents: [] };

  function agentOptions(env, seatIndex) {
    const opts = ["me", "remote"];
    for (const a of catalog.agents) if (a !== "remote" && a !== "scripted") opts.push(a);
    opts.push("scripted");
    for (const p of env.policies || []) opts.push("scripted:" + p);
    // By default the first seat is played here and the others by the
    // game's default policy (or the model when the server has one).
    const model = catalog.agents.includes("model") ? "model" : "scripted";
    const sel = el("select", { class: "agent", "data-seat": String(seatIndex) });
    for (const o of opts) sel.append(el("option", { value: o, text: o, selected: o === (seatIndex === 0 ? "me" : model) }));
    return sel;
  }

  function showEnv() {
    const env = catalog.envs.find((e) => e.id === document.getElementById("env").value);
    const body = document.getElementById("seats");
    body.replaceChildren();
    if (!env) return;
    document.getElementById("env-desc").textContent = env.description;
    env.seats.forEach((s, i) => body.append(el("tr", {}, el("td", { text: s.name }), el("td", { text: s.role || "dealt in secret" }), el("td", {}, agentOptions(env, i)))));
  }

  async function loadCatalog() {
    const { data } = await api("/v1/envs", { token: "" });
    catalog = data;
    const sel = document.getElementById("env");
    sel.replaceChildren(...data.envs.map((e) => el("option", { value: e.id, text: e.id })));
    const cl = data.envs.find((e) => e.id.startsWith("craigslist"));
    if (cl) sel.value = cl.id;
    showEnv();
  }

  // Links carry tokens in the fragment: browsers never send it.
  function seatLink(id, seat) { return "/ui/episode?id=" + encodeURIComponent(id) + "#seat=" + seat.index + "&token=" + encodeURIComponent(seat.token); }

  async function create(ev) {
    ev.preventDefault();
    const err = document.getElementById("create-error");
    err.textContent = "";
    const selects = [...document.querySelectorAll("select.agent")];
    const agents = selects.map((s) => (s.value === "me" ? "remote" : s.value));
    const body = { env: document.getElementById("env").value, agents };
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
  document.getElementById("env").addEventListener("change", showEnv);
  document.getElementById("create").addEventListener("submit", create);
  document.getElementById("refresh").addEventListener("click", list);
  api("/v1/site", { token: "" }).then(({ data }) => {
    if (!data.episodes) {
      document.getElementById("create-box").classList.add("hidden");
      document.getElementById("list-error").textContent = "This server runs no episodes (a dashboard only).";
      return;
    }
    loadCatalog().catch((e) => (document.getElementById("create-error").textContent = e.message));
    list();
  });
})();
