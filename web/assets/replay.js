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
      el("td", { text: (s.seats || []).map((x) => x.name + " (" + x.agent + ")").join(", ") }),
      el("td", { text: s.result + " · " + (s.rewards || []).map(omar.fmt).join(" / ") }),
      el("td", { text: String(s.events) }))));
  }

  function summarize(r, i) {
    return { index: i, env: r.env, seed: r.seed, seats: r.seats, result: r.outcome.result, rewards: r.outcome.rewards, events: r.events.length };
  }

  // check returns why a parsed line is not an episode record (as the
  // server's engine.Record.Validate does), or "" when it is one: a stray
  // {} or null must not stop the other records from listing.
  function check(r) {
    if (typeof r !== "object" || Array.isArray(r)) return "not an episode record: not a JSON object";
    if (r === null || typeof r.env !== "string" || r.env === "") return "not an episode record: no env"; // null as the server reads it
    if (!Array.isArray(r.seats) || r.seats.length === 0) return "not an episode record: no seats";
    if (!r.seats.every((s, i) => s && typeof s === "object" && s.index === i)) return "seats not numbered 0, 1, … in order";
    if (!Array.isArray(r.events)) return "not an episode record: no events";
    if (r.outcome === null || typeof r.outcome !== "object") return "not an episode record: no outcome";
    if (r.outcome.rewards != null && (!Array.isArray(r.outcome.rewards) || (r.outcome.rewards.length !== 0 && r.outcome.rewards.length !== r.seats.length))) return "rewards do not match the seats";
    return "";
  }

  // showBad names the lines that hold no record, "FILE:LINE: why".
  function showBad(name, bad) {
    $("bad").replaceChildren(...bad.map((b) => el("li", { class: "bad-line", text: (b.line ? name + ":" + b.line + ": " : "") + b.error })));
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
      showBad(site.records_file, data.bad || []);
    } catch (e) { $("error").textContent = e.message; }
  }

  $("file").addEventListener("change", async () => {
    const f = $("file").files[0];
    if (!f) return;
    $("error").textContent = "";
    const text = await f.text();
    local = [];
    const bad = [];
    const lines = text.split("\n");
    lines.forEach((line, n) => {
      if (!line.trim()) return;
      let r;
      try { r = omar.parseJSON(line); } catch (e) {
        // The last line without its newline is a write cut short.
        const torn = n === lines.length - 1;
        bad.push({ line: n + 1, error: (torn ? "a torn last line (no newline: a write cut short): " : "not JSON: ") + e.message });
        return;
      }
      const why = check(r);
      if (why) bad.push({ line: n + 1, error: why }); else local.push(r);
    });
    $("source").textContent = "Opened " + f.name + ": " + local.length + " records" + (bad.length ? ", " + bad.length + " bad lines" : "") + ".";
    list(local.map(summarize), async (i) => local[i]);
    showBad(f.name, bad);
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
