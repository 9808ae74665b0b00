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
  const palette = ["#2f5fd0", "#d0682f", "#2c7a3f", "#9b2fd0", "#b0452a", "#2a9bb0", "#777", "#c9a100", "#d04f8f", "#5b6b2f"];
  // A series keeps its colour on every chart (the buyer's reward and the
  // buyer's held-out reward are the same colour): a name gets the least
  // used colour that no other series of its chart has, at first sight.
  const colorOf = new Map([["mean", "#1d2330"]]);
  const uses = new Map(palette.map((c) => [c, 0]));
  function color(name, taken) {
    const key = name.replace(/^(eval|heldout_reward|reward)\./, "");
    const known = colorOf.get(key);
    if (known && !taken.has(known)) return known;
    const free = palette.filter((c) => !taken.has(c));
    const pick = (free.length ? free : palette).reduce((a, b) => (uses.get(b) < uses.get(a) ? b : a));
    if (!known) { colorOf.set(key, pick); uses.set(pick, uses.get(pick) + 1); }
    return pick;
  }

  // Each chart takes its series from one metrics line: name → value; a
  // band, where a chart has one, is a series' interval: name → [lo, hi].
  const charts = [
    { id: "reward", title: "Reward per role", y: "mean reward", series: (m) => ({ ...(m.reward || {}), mean: m.reward_mean }) },
    // From eval.jsonl when the run has one (it has the evaluation before
    // the first iteration, where the line starts), else from the metrics.
    { id: "eval", title: "Held-out reward", y: "mean reward", rows: () => (evals.length ? evals : metrics),
      series: (m) => (evals.length ? { mean: m.mean, ...(m.reward || {}) } : evalSeries(m)),
      band: (m) => (evals.length && Number.isFinite(m.lo) && Number.isFinite(m.hi) ? { mean: [m.lo, m.hi] } : {}),
      note: () => (evals.some((e) => Number.isFinite(e.lo)) ? "shaded: the mean's 95% interval" : ""), empty: "No held-out evaluation in this run." },
    { id: "loss", title: "Losses", y: "loss", series: (m) => ({ policy_loss: m.policy_loss, value_loss: m.value_loss }) },
    { id: "kl", title: "KL", y: "nats per token", series: (m) => ({ kl: m.kl, kl_ref: m.kl_ref }) },
    { id: "entropy", title: "Entropy", y: "nats per token", series: (m) => ({ entropy: m.entropy }) },
    { id: "clip", title: "Clip fraction", y: "share of tokens", series: (m) => ({ clip_frac: m.clip_frac }) },
    { id: "grad", title: "Gradient norm", y: "L2 norm", series: (m) => ({ grad_norm: m.grad_norm }) },
    { id: "rates", title: "Invalid and defaulted moves", y: "share of moves", series: (m) => ({ invalid_rate: m.invalid_rate, default_rate: m.default_rate }) },
    { id: "tps", title: "Tokens/s per phase", y: "tokens/s", series: (m) => ({ ...(m.tokens_per_s || {}) }) },
  ];

  // ticks are about n round numbers from lo to hi (1, 2 or 5 × 10^k apart).
  function ticks(lo, hi, n, integer) {
    const raw = (hi - lo) / Math.max(1, n);
    const mag = Math.pow(10, Math.floor(Math.log10(raw || 1)));
    let step = [1, 2, 5, 10].map((k) => k * mag).find((k) => k >= raw) || 10 * mag;
    if (integer) step = Math.max(1, Math.round(step));
    const out = [];
    for (let v = Math.ceil(lo / step - 1e-9) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    return out;
  }

  function tickText(v) {
    if (Number.isInteger(v)) return String(v);
    const a = Math.abs(v);
    return a >= 100 ? v.toFixed(0) : a >= 1 ? String(+v.toFixed(2)) : String(+v.toPrecision(2));
  }

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
      box = el("section", { class: "card chart", id: "chart-" + c.id }, el("h2", { text: c.title }), el("div", { class: "plot" }), el("div", { class: "legend" }), el("p", { class: "muted note" }));
      $("charts").append(box);
    }
    const names = [];
    const pts = {};
    const bands = {};
    const rows = c.rows ? c.rows() : metrics;
    for (const m of rows) {
      for (const [k, v] of Object.entries(c.series(m))) {
        if (typeof v !== "number" || !isFinite(v)) continue;
        if (!pts[k]) { pts[k] = []; names.push(k); }
        pts[k].push([m.iteration, v]);
      }
      for (const [k, [lo, hi]] of Object.entries(c.band ? c.band(m) : {})) (bands[k] = bands[k] || []).push([m.iteration, lo, hi]);
    }
    const plot = box.querySelector(".plot");
    const legend = box.querySelector(".legend");
    box.querySelector(".note").textContent = c.note ? c.note() : "";
    box.dataset.series = String(names.length);
    box.dataset.points = String(names.reduce((n, k) => n + pts[k].length, 0));
    box.dataset.bands = String(Object.values(bands).reduce((n, b) => n + b.length, 0));
    if (!names.length) { plot.replaceChildren(el("p", { class: "muted", text: metrics.length ? c.empty || "No data." : "Waiting for the first iteration." })); legend.replaceChildren(); return; }
    const W = 340, H = 200, L = 50, B = 34, T = 8, R = 10;
    let x0 = Infinity, x1 = -Infinity, y0 = Infinity, y1 = -Infinity;
    for (const k of names) for (const [x, y] of pts[k]) { x0 = Math.min(x0, x); x1 = Math.max(x1, x); y0 = Math.min(y0, y); y1 = Math.max(y1, y); }
    for (const b of Object.values(bands)) for (const [, lo, hi] of b) { y0 = Math.min(y0, lo); y1 = Math.max(y1, hi); }
    if (x1 === x0) { x0 -= 1; x1 += 1; }
    if (y1 === y0) { const d = Math.abs(y0) * 0.1 || 1; y0 -= d; y1 += d; }
    const yt = ticks(y0, y1, 5, false);
    y0 = Math.min(y0, yt[0]); y1 = Math.max(y1, yt[yt.length - 1]);
    const xt = ticks(x0, x1, 6, true);
    const sx = (x) => L + ((x - x0) / (x1 - x0)) * (W - L - R);
    const sy = (y) => T + (1 - (y - y0) / (y1 - y0)) * (H - B - T);
    const s = svg("svg", { viewBox: "0 0 " + W + " " + H, role: "img", "aria-label": c.title });
    const label = (x, y, text, anchor, cls) => { const t = svg("text", { x, y, "font-size": 10, fill: "#6a7385", "text-anchor": anchor, class: cls }); t.textContent = text; return t; };
    for (const v of yt) {
      s.append(svg("line", { x1: L, y1: sy(v), x2: W - R, y2: sy(v), stroke: "#eceef3" }), label(L - 4, sy(v) + 3, tickText(v), "end", "ytick"));
    }
    for (const v of xt) {
      s.append(svg("line", { x1: sx(v), y1: H - B, x2: sx(v), y2: H - B + 4, stroke: "#bbb" }), label(sx(v), H - B + 14, String(v), "middle", "xtick"));
    }
    s.append(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#bbb" }), svg("line", { x1: L, y1: T, x2: L, y2: H - B, stroke: "#bbb" }));
    s.append(label(L + (W - L - R) / 2, H - 4, "iteration", "middle", "xlabel"));
    const yl = label(0, 0, c.y || "", "middle", "ylabel");
    yl.setAttribute("transform", "translate(11," + (T + (H - B - T) / 2) + ") rotate(-90)");
    s.append(yl);
    const cols = {};
    const taken = new Set();
    for (const k of names) { cols[k] = color(k, taken); taken.add(cols[k]); }
    for (const [k, b] of Object.entries(bands)) {
      if (!b.length) continue;
      const top = b.map(([x, , hi]) => sx(x) + "," + sy(hi));
      const bottom = b.slice().reverse().map(([x, lo]) => sx(x) + "," + sy(lo));
      s.append(svg("polygon", { points: top.concat(bottom).join(" "), fill: cols[k] || "#999", "fill-opacity": 0.15, stroke: "none", class: "band" }));
    }
    for (const k of names) {
      const col = cols[k];
      const p = pts[k];
      s.append(svg("polyline", { points: p.map(([x, y]) => sx(x) + "," + sy(y)).join(" "), fill: "none", stroke: col, "stroke-width": 2 }));
      for (const [x, y] of p) s.append(svg("circle", { cx: sx(x), cy: sy(y), r: 2.5, fill: col }));
    }
    plot.replaceChildren(s);
    legend.replaceChildren(...names.map((k) => {
      const last = pts[k][pts[k].length - 1][1];
      const sw = el("i");
      sw.style.background = cols[k];
      return el("span", { "data-series": k }, sw, k + " " + omar.fmt(last));
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
  // Whether the reader opened each transcript (by env and seed).
  const folded = new Map();

  function transcript(rec, n) {
    const rewards = (rec.outcome && rec.outcome.rewards) || [];
    const seats = rec.seats.map((s, i) => s.name + " (" + s.role + ", " + s.agent + ") " + omar.fmt(rewards[i])).join(" · ");
    const list = el("ol", { class: "transcript" }, ...rec.events.map((e) => omar.renderEvent(e, rec.seats)));
    // A refresh keeps what the reader opened or folded.
    const key = rec.env + " " + rec.seed;
    const d = el("details", { class: "episode", "data-key": key, open: folded.has(key) ? folded.get(key) : n === 0 },
      el("summary", { text: rec.env + " seed " + rec.seed + ": " + rec.outcome.result + " — " + seats }), list);
    d.addEventListener("toggle", () => folded.set(key, d.open));
    return d;
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
      $("status").dataset.iteration = String(st.iteration);
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
