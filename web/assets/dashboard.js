// The training dashboard: charts of a run's metrics.jsonl that grow as
// iterations finish, and the latest episodes as transcripts.
"use strict";
(() => {
  const { api, el } = omar;
  omar.nav("dashboard");
  const $ = (x) => document.getElementById(x);
  const metrics = [];
  // The run's held-out evaluations (eval.jsonl), from the one before the
  // first iteration on; replaced at every refresh.
  let evals = [];
  const colors = ["#2f5fd0", "#d0682f", "#2c7a3f", "#9b2fd0", "#b0452a", "#2a9bb0", "#777", "#c9a100"];

  // Each chart takes its series from one metrics line: name → value.
  const charts = [
    { id: "reward", title: "Reward per role", series: (m) => ({ ...(m.reward || {}), mean: m.reward_mean }) },
    // From eval.jsonl when the run has one (it has the evaluation before
    // the first iteration, where the line starts), else from the metrics.
    { id: "eval", title: "Held-out evaluation", rows: () => (evals.length ? evals : metrics),
      series: (m) => (evals.length ? { mean: m.mean, ...(m.reward || {}) } : evalSeries(m)), empty: "No held-out evaluation in this run." },
    { id: "kl", title: "KL", series: (m) => ({ kl: m.kl, kl_ref: m.kl_ref }) },
    { id: "entropy", title: "Entropy", series: (m) => ({ entropy: m.entropy }) },
    { id: "tps", title: "Tokens/s per phase", series: (m) => ({ ...(m.tokens_per_s || {}) }) },
  ];

  // evalSeries picks the fields of a held-out evaluation, whatever their
  // names: numbers and maps of numbers under keys naming eval or held-out.
  function evalSeries(m) {
    const out = {};
    for (const [k, v] of Object.entries(m)) {
      if (!/eval|held/i.test(k)) continue;
      if (typeof v === "number") out[k] = v;
      else if (v && typeof v === "object") for (const [k2, v2] of Object.entries(v)) if (typeof v2 === "number") out[k + "." + k2] = v2;
    }
    return out;
  }

  const svgNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs) {
    const e = document.createElementNS(svgNS, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    return e;
  }

  function draw(c) {
    let box = $("chart-" + c.id);
    if (!box) {
      box = el("section", { class: "card chart", id: "chart-" + c.id }, el("h2", { text: c.title }), el("div", { class: "plot" }), el("div", { class: "legend" }));
      $("charts").append(box);
    }
    const names = [];
    const pts = {};
    const rows = c.rows ? c.rows() : metrics;
    for (const m of rows) {
      for (const [k, v] of Object.entries(c.series(m))) {
        if (typeof v !== "number" || !isFinite(v)) continue;
        if (!pts[k]) { pts[k] = []; names.push(k); }
        pts[k].push([m.iteration, v]);
      }
    }
    const plot = box.querySelector(".plot");
    const legend = box.querySelector(".legend");
    box.dataset.series = String(names.length);
    box.dataset.points = String(names.reduce((n, k) => n + pts[k].length, 0));
    if (!names.length) { plot.replaceChildren(el("p", { class: "muted", text: metrics.length ? c.empty || "No data." : "Waiting for the first iteration." })); legend.replaceChildren(); return; }
    const W = 320, H = 170, L = 46, B = 20;
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const k of names) for (const [x, y] of pts[k]) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    if (y1 === y0) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
    const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - 6);
    const sy = (y) => 6 + (1 - (y - y0) / (y1 - y0)) * (H - B - 6);
    const s = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img" });
    s.append(svg("line", { x1: L, y1: H - B, x2: W - 6, y2: H - B, stroke: "#bbb" }), svg("line", { x1: L, y1: 6, x2: L, y2: H - B, stroke: "#bbb" }));
    const label = (x, y, text, anchor) => { const t = svg("text", { x, y, "font-size": 10, fill: "#6a7385", "text-anchor": anchor }); t.textContent = text; return t; };
    s.append(label(L - 4, 12, omar.fmt(y1), "end"), label(L - 4, H - B, omar.fmt(y0), "end"), label(L, H - 6, "it " + x0, "start"), label(W - 6, H - 6, "it " + x1, "end"));
    names.forEach((k, i) => {
      const col = colors[i % colors.length];
      const p = pts[k];
      s.append(svg("polyline", { points: p.map(([x, y]) => sx(x) + "," + sy(y)).join(" "), fill: "none", stroke: col, "stroke-width": 2 }));
      for (const [x, y] of p) s.append(svg("circle", { cx: sx(x), cy: sy(y), r: 2.5, fill: col }));
    });
    plot.replaceChildren(s);
    legend.replaceChildren(...names.map((k, i) => {
      const last = pts[k][pts[k].length - 1][1];
      const i2 = el("i");
      i2.style.background = colors[i % colors.length];
      return el("span", {}, i2, k + " " + omar.fmt(last));
    }));
  }

  // A metrics line the charts can use: an object with a numeric iteration.
  // Anything else (a stray null or {}) is skipped and counted, so that one
  // bad line does not blank the dashboard.
  const usable = (m) => m !== null && typeof m === "object" && !Array.isArray(m) && Number.isFinite(m.iteration);
  // An episode record a transcript can show (engine.Record's shape).
  const showable = (r) => r !== null && typeof r === "object" && Array.isArray(r.seats) && r.seats.length > 0 &&
    Array.isArray(r.events) && r.outcome !== null && typeof r.outcome === "object";
  let skipped = 0;

  function transcript(rec, n) {
    const rewards = (rec.outcome && rec.outcome.rewards) || [];
    const seats = rec.seats.map((s, i) => s.name + " (" + s.role + ", " + s.agent + ") " + omar.fmt(rewards[i])).join(" · ");
    const list = el("ol", { class: "transcript" }, ...rec.events.map((e) => omar.renderEvent(e, rec.seats)));
    return el("details", { class: "episode", open: n === 0 }, el("summary", { text: rec.env + " seed " + rec.seed + ": " + rec.outcome.result + " — " + seats }), list);
  }

  async function refresh() {
    if (!omar.secret()) { $("error").textContent = "The dashboard needs the secret (printed with its address)."; return; }
    const after = metrics.length ? metrics[metrics.length - 1].iteration : -1;
    try {
      const { data } = await api("/v1/run?after=" + after + "&episodes=3");
      $("error").textContent = "";
      for (const m of data.metrics || []) if (usable(m)) metrics.push(m); else skipped++;
      evals = data.evals || [];
      $("dir").textContent = data.dir;
      const st = data.status;
      let line = (st.live ? "live · " : "from the run directory · ") + "iteration " + st.iteration + (st.iterations ? " of " + st.iterations : "");
      if (st.live && st.phase) line += " · " + st.phase + (st.total ? " " + st.episodes + "/" + st.total + " episodes" : "");
      $("status").textContent = line;
      $("status").dataset.iterations = String(metrics.length);
      for (const c of charts) draw(c);
      const eps = (data.episodes || []).filter(showable);
      $("episodes").replaceChildren(...eps.reverse().map(transcript));
      // The server names the metrics lines it left out (data.bad); the
      // page skips what is left that it cannot chart or show.
      const named = data.bad || [];
      const bad = skipped + named.length + (data.episodes || []).length - eps.length;
      $("status").dataset.skipped = String(bad);
      if (bad) $("error").textContent = bad + " line(s) of metrics.jsonl or episodes.jsonl are not metrics or episode records and were skipped" + (named.length ? ": " + named.join("; ") : ".");
    } catch (e) {
      $("error").textContent = e.message;
    }
  }

  omar.secretForm($("secret-box"), refresh);
  refresh();
  setInterval(refresh, 2000);
})();
