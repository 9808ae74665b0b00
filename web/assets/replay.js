// Replay of recorded episodes, step by step: from the server's records
// file (with the secret) or from a file opened in the browser, which never
// leaves it. A record is omniscient; "as SEAT sees it" keeps the events
// whose audience includes the seat, and hides the other seats' roles.
"use strict";
(() => {
  const { api, el } = omar;
  omar.nav("replay");
  const $ = (x) => document.getElementById(x);
  let local = null; // records parsed from an opened file
  let rec = null;
  let step = 0;

  function visible() {
    const seat = Number($("view").value || "-1");
    return seat < 0 ? rec.events : rec.events.filter((e) => omar.includes(e.audience, seat));
  }

  function draw() {
    const seat = Number($("view").value || "-1");
    const evs = visible();
    step = Math.max(0, Math.min(step, evs.length));
    $("slider").max = String(evs.length);
    $("slider").value = String(step);
    $("position").textContent = "step " + step + " of " + evs.length;
    $("position").dataset.step = String(step);
    $("position").dataset.total = String(evs.length);
    $("events").replaceChildren(...evs.slice(0, step).map((e) => omar.renderEvent(e, rec.seats)));
    const over = step === evs.length;
    $("seats").replaceChildren(...rec.seats.map((s, i) => el("tr", {},
      el("td", { text: s.name }),
      el("td", { text: seat < 0 || seat === i ? s.role + (s.team ? " (" + s.team + ")" : "") : "hidden" }),
      el("td", { text: s.agent }),
      el("td", { text: over && rec.outcome && rec.outcome.rewards ? omar.fmt(rec.outcome.rewards[i]) : "" }))));
  }

  function open(r, label) {
    rec = r;
    step = 0;
    $("player").classList.remove("hidden");
    $("title").textContent = "Replay of " + label + ": " + r.env + ", seed " + r.seed;
    $("view").replaceChildren(el("option", { value: "-1", text: "everything (omniscient)" }), ...r.seats.map((s, i) => el("option", { value: String(i), text: "as " + s.name + " sees it" })));
    draw();
  }

  function list(summaries, fetchOne) {
    $("records").replaceChildren(...summaries.map((s) => el("tr", { "data-index": String(s.index) },
      el("td", {}, el("a", { href: "#", class: "open-record", text: String(s.index), onclick: async (e) => { e.preventDefault(); try { open(await fetchOne(s.index), "record " + s.index); } catch (err) { $("error").textContent = err.message; } } })),
      el("td", { text: s.env }), el("td", { text: String(s.seed) }),
      el("td", { text: s.seats.map((x) => x.name + " (" + x.agent + ")").join(", ") }),
      el("td", { text: s.result + " · " + (s.rewards || []).map(omar.fmt).join(" / ") }),
      el("td", { text: String(s.events) }))));
  }

  function summarize(r, i) {
    return { index: i, env: r.env, seed: r.seed, seats: r.seats, result: r.outcome.result, rewards: r.outcome.rewards, events: r.events.length };
  }

  async function loadServer() {
    $("error").textContent = "";
    const { data: site } = await api("/v1/site", { token: "" });
    if (!site.records) { $("source").textContent = "The server holds no records file (omar serve --records FILE)."; return; }
    $("source").textContent = "Server file " + site.records_file + ": " + site.records + " records.";
    if (!omar.secret()) { $("error").textContent = "Reading the server's records needs its secret."; return; }
    try {
      const { data } = await api("/v1/records");
      list(data.records, async (i) => (await api("/v1/records/" + i)).data);
    } catch (e) { $("error").textContent = e.message; }
  }

  $("file").addEventListener("change", async () => {
    const f = $("file").files[0];
    if (!f) return;
    $("error").textContent = "";
    const text = await f.text();
    local = [];
    text.split("\n").forEach((line, n) => {
      if (!line.trim()) return;
      try { local.push(JSON.parse(line)); } catch (e) { $("error").textContent = f.name + ":" + (n + 1) + ": not JSON: " + e.message; }
    });
    $("source").textContent = "Opened " + f.name + ": " + local.length + " records.";
    list(local.map(summarize), async (i) => local[i]);
  });
  $("first").addEventListener("click", () => { step = 0; draw(); });
  $("prev").addEventListener("click", () => { step--; draw(); });
  $("next").addEventListener("click", () => { step++; draw(); });
  $("last").addEventListener("click", () => { step = visible().length; draw(); });
  $("slider").addEventListener("input", () => { step = Number($("slider").value); draw(); });
  $("view").addEventListener("change", () => { step = visible().length; draw(); });
  omar.secretForm($("secret-box"), loadServer);
  loadServer();
})();
