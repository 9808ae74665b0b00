// An episode, live: the omniscient log or one seat's view for the
// creator (with the secret), a seat's own view and controls for a seat's
// token. The page shows exactly what the API gives its token.
"use strict";
(() => {
  const { api, el } = omar;
  omar.nav("episodes");
  const id = new URLSearchParams(location.search).get("id") || "";
  const frag = omar.fragment();
  const token = frag.get("token") || "";
  const mySeat = token ? Number(frag.get("seat")) : -1;
  const state = { info: null, events: [], cursor: 0, done: false, gen: 0, answered: "", schema: null };
  const $ = (x) => document.getElementById(x);

  function viewSeat() { return token ? mySeat : Number($("view").value || "-1"); }
  function bearer() { return token || omar.secret(); }

  function showInfo() {
    const info = state.info;
    $("title").textContent = "Episode " + info.id + " · " + info.env + (info.seed !== undefined ? " · seed " + info.seed : "");
    $("status").textContent = info.status + (info.error ? ": " + info.error : "");
    $("status").dataset.status = info.status;
    const params = Object.entries(info.params || {});
    $("params").textContent = params.length ? "Parameters: " + params.map(([k, v]) => k + "=" + JSON.stringify(v)).join(", ") : "The game's default parameters.";
    const rewards = info.outcome ? info.outcome.rewards : [];
    $("seats").replaceChildren(...info.seats.map((s) => {
      const links = el("td");
      if (s.token && (s.agent === "remote" || s.agent === "me") && info.status === "running") {
        links.append(el("a", { href: "/ui/episode?id=" + encodeURIComponent(info.id) + "#seat=" + s.index + "&token=" + encodeURIComponent(s.token), class: "play-link", text: "play this seat" }));
      }
      const name = s.name + (s.index === mySeat ? " (you)" : "");
      return el("tr", {}, el("td", { text: name }), el("td", { text: s.agent }), el("td", { text: rewards.length ? omar.fmt(rewards[s.index]) : "" }), links);
    }));
    if (!token && $("view").options.length === 0) {
      $("view").append(el("option", { value: "-1", text: "everything (omniscient)" }));
      for (const s of info.seats) $("view").append(el("option", { value: String(s.index), text: "as " + s.name + " sees it" }));
    }
  }

  // openNotification is the seat's notification that no ack, validation
  // error, default or outcome has closed yet (the engine's rule).
  function openNotification() {
    for (let i = state.events.length - 1; i >= 0; i--) {
      const e = state.events[i];
      if (e.kind === "notification") return e.seat === mySeat ? e : null;
      if (["ack", "validation_error", "default", "outcome"].includes(e.kind)) return null;
    }
    return null;
  }

  function showTurn() {
    const n = token && !state.done ? openNotification() : null;
    $("turn").classList.toggle("hidden", !n);
    if (!n) return;
    if ($("turn").dataset.notification === n.notification_id) return;
    $("turn").dataset.notification = n.notification_id;
    $("turn-text").textContent = n.text;
    const legal = n.legal || [];
    $("legal").replaceChildren(...legal.map((a) => el("button", { type: "button", class: "legal", "data-action": a, text: a, onclick: () => act(n, a) })));
    // A negotiation move as controls where the grammar has the move
    // schema's shape; free text where the game takes text otherwise.
    const schema = legal.length ? null : moveSchema(n.grammar);
    if (schema) state.schema = schema;
    showMoveForm(schema, n);
    $("free").classList.toggle("hidden", legal.length > 0 || !!schema);
    $("reply").value = "";
    $("send").disabled = false;
    $("send-move").disabled = false;
    for (const b of $("legal").querySelectorAll("button")) b.disabled = false;
  }

  // moveSchema reads the move schema of a negotiation game's notification
  // from its grammar: the moves (PROPOSE, ACCEPT, REJECT, WALK), whether
  // a SAY line may go first, and PROPOSE's terms — each field with its
  // values (an enumeration or a digit range) or a number. Any other
  // grammar gives null.
  function moveSchema(grammar) {
    if (!grammar) return null;
    const rules = {};
    for (const line of grammar.split("\n")) {
      const m = line.match(/^([a-z_]+) ::= (.*)$/);
      if (m) rules[m[1]] = m[2].trim();
    }
    if (!rules.move || !rules.terms) return null;
    const moves = [];
    for (const alt of rules.move.split(" | ")) {
      const m = alt.trim().match(/^"([A-Z]+)(?:: )?"( terms)?$/);
      if (!m) return null;
      moves.push(m[1]);
    }
    const starts = [...rules.terms.matchAll(/"( ?)([a-z_]+)="/g)];
    if (!starts.length || starts[0].index !== 0) return null;
    const fields = starts.map((m, i) => {
      const body = rules.terms.slice(m.index + m[0].length, i + 1 < starts.length ? starts[i + 1].index : undefined).trim();
      const f = { name: m[2], sep: m[1] };
      let r = body.match(/^\(\s*("[^"]*"(\s*\|\s*"[^"]*")*)\s*\)$/);
      if (r) return { ...f, values: [...r[1].matchAll(/"([^"]*)"/g)].map((x) => x[1]) };
      r = body.match(/^\[(\d)-(\d)\]$/);
      if (r) { const vs = []; for (let k = Number(r[1]); k <= Number(r[2]); k++) vs.push(String(k)); return { ...f, values: vs }; }
      return { ...f, number: true };
    });
    return { moves, say: /\bsay\b/.test(rules.root || ""), fields };
  }

  function showMoveForm(schema, n) {
    $("move-form").classList.toggle("hidden", !schema);
    if (!schema) return;
    const choices = schema.moves.map((m, i) => el("label", { class: "move-choice" },
      el("input", { type: "radio", name: "move", value: m, "data-move": m, checked: i === 0, onchange: preview }), " " + m.toLowerCase()));
    $("move-choices").replaceChildren(...choices);
    const standing = n.data && n.data.standing;
    $("terms").replaceChildren(...schema.fields.map((f) => {
      let input;
      if (f.values) input = el("select", { class: "term", "data-field": f.name, onchange: preview }, ...f.values.map((v) => el("option", { value: v, text: v })));
      else input = el("input", { class: "term", "data-field": f.name, type: "number", min: "0", step: "any", size: 8, required: true, oninput: preview,
        value: standing && typeof standing.terms === "number" ? String(standing.terms) : "" });
      return el("label", { class: "term-label" }, f.name + " ", input);
    }));
    $("say-box").classList.toggle("hidden", !schema.say);
    $("say").value = "";
    preview();
  }

  function chosenMove() { const r = $("move-choices").querySelector("input:checked"); return r ? r.value : ""; }

  // composeMove is the reply the controls say: an optional SAY line, then
  // the move, in the game's own syntax.
  function composeMove() {
    const schema = state.schema;
    const move = chosenMove();
    let text = move;
    if (move === "PROPOSE") text = "PROPOSE: " + schema.fields.map((f) => f.sep + f.name + "=" + $("terms").querySelector('[data-field="' + f.name + '"]').value.trim()).join("");
    const say = $("say").value.replace(/\s+/g, " ").trim();
    return schema.say && say ? "SAY: " + say + "\n" + text : text;
  }

  function preview() {
    if (!state.schema) return;
    for (const t of $("terms").querySelectorAll(".term")) t.disabled = chosenMove() !== "PROPOSE";
    $("move-preview").textContent = composeMove();
  }

  async function act(n, text) {
    if (state.answered === n.notification_id) return;
    state.answered = n.notification_id;
    $("send").disabled = true;
    $("send-move").disabled = true;
    for (const b of $("legal").querySelectorAll("button")) b.disabled = true;
    const res = $("act-result");
    try {
      const { status, data } = await api("/v1/episodes/" + encodeURIComponent(id) + "/actions", { method: "POST", token, body: { notification_id: n.notification_id, action: text }, accept: [422, 409] });
      if (status === 200) { res.className = "ok"; res.textContent = "Sent: " + text; }
      else if (status === 422) { res.className = "error"; res.textContent = "Rejected: " + data.error + " (you will be asked again)"; }
      else { res.className = "error"; res.textContent = (data && data.error) || "the question closed"; }
    } catch (e) {
      res.className = "error";
      res.textContent = e.message;
      state.answered = "";
      $("send").disabled = false;
      $("send-move").disabled = false;
    }
  }

  // termsRows are an outcome's deal terms as label/value pairs: a price,
  // a slot, a contract, or what each side gets (item counts named by the
  // fields of the move schema when they match).
  function termsRows(terms) {
    if (terms === null || terms === undefined) return [];
    if (typeof terms !== "object") return [["terms", String(terms)]];
    const names = state.schema ? state.schema.fields.map((f) => f.name) : [];
    const value = (v) => {
      if (Array.isArray(v)) return v.length === names.length ? v.map((x, i) => names[i] + " " + x).join(", ") : v.join(", ");
      if (v && typeof v === "object") return Object.entries(v).map(([k, x]) => k + " " + (typeof x === "object" ? JSON.stringify(x) : x)).join(", ");
      return String(v);
    };
    const rows = [];
    for (const [k, v] of Object.entries(terms)) {
      if (v && typeof v === "object" && !Array.isArray(v) && Object.values(v).some((x) => typeof x === "object")) {
        for (const [k2, v2] of Object.entries(v)) rows.push([k + " · " + k2, value(v2)]);
      } else rows.push([k === "proposer" ? "proposed by" : k, value(v)]);
    }
    return rows;
  }

  function showOutcome(ev) {
    const o = ev.data || {};
    const seats = state.info ? state.info.seats : [];
    $("outcome").classList.remove("hidden");
    $("outcome-text").textContent = ev.text;
    $("outcome-terms").replaceChildren(...termsRows(o.terms).flatMap(([k, v]) => [el("dt", { text: k }), el("dd", { text: v })]));
    $("outcome-rewards").replaceChildren(...(o.rewards || []).map((r, i) => {
      const s = seats.find((x) => x.index === i);
      return el("tr", { "data-seat": String(i), class: i === mySeat ? "mine" : "" }, el("td", { text: omar.seatName(seats, i) + (i === mySeat ? " (you)" : "") }),
        el("td", { text: s ? s.agent : "" }), el("td", { class: "reward", text: omar.fmt(r) }));
    }));
    // The record holds every seat's secrets: the secret reads it (the
    // creator's tab has it, also on the page of a seat it plays).
    $("download").classList.toggle("hidden", !omar.secret() && !(state.info && state.info.observer_token));
  }

  async function download(e) {
    e.preventDefault();
    $("download-error").textContent = "";
    try {
      const resp = await fetch("/v1/episodes/" + encodeURIComponent(id) + "/record", { headers: { Authorization: "Bearer " + (omar.secret() || state.info.observer_token) } });
      if (!resp.ok) throw new Error("HTTP " + resp.status + ": " + (await resp.text()).trim());
      const url = URL.createObjectURL(await resp.blob());
      const a = el("a", { href: url, download: "episode-" + id + ".json" });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (err) {
      $("download-error").textContent = err.message;
    }
  }

  // chatItem is an event as the conversation shows it: what a seat said
  // or did as a bubble by its speaker, rounds and the outcome as
  // dividers; the rest (briefings, notifications, acks) only in the log.
  function chatItem(ev, seats) {
    if (ev.kind === "phase" || ev.kind === "outcome") return el("li", { class: "chat-divider", "data-seq": String(ev.seq), text: ev.text });
    if (ev.kind !== "observation" || !(ev.seat >= 0)) return null;
    const d = ev.data || {};
    const speaker = omar.seatName(seats, ev.seat);
    let said = ev.text, move = "";
    if (typeof d.say === "string" || typeof d.kind === "string") {
      said = d.say || "";
      move = ev.text.split("\n").filter((l) => !l.startsWith(speaker + " says: ")).join("\n");
    } else if (typeof d.text === "string") said = d.text;
    const cls = "bubble seat-" + (ev.seat % 6) + (ev.seat === mySeat ? " mine" : "") + (ev.audience && !ev.audience.all ? " private" : "");
    return el("li", { class: cls, "data-seq": String(ev.seq), "data-seat": String(ev.seat) },
      el("span", { class: "who", text: speaker + (ev.seat === mySeat ? " (you)" : "") + (ev.audience && !ev.audience.all ? " · " + omar.audienceLabel(ev.audience, seats) : "") }),
      said ? el("span", { class: "said", text: said }) : null,
      move ? el("span", { class: "move", text: move }) : null);
  }

  function add(evs) {
    const list = $("events");
    const seats = state.info ? state.info.seats : [];
    for (const e of evs) {
      state.events.push(e);
      list.append(omar.renderEvent(e, seats));
      if (e.kind === "notification" && !state.schema) state.schema = moveSchema(e.grammar);
      const c = chatItem(e, seats);
      if (c) $("chat").append(c);
      if (e.kind === "outcome") showOutcome(e);
    }
    $("count").textContent = "(" + state.events.length + ")";
  }

  async function refreshInfo() {
    const { data } = await api("/v1/episodes/" + encodeURIComponent(id), { token: token ? "" : omar.secret() });
    state.info = data;
    showInfo();
  }

  async function poll(gen) {
    while (gen === state.gen && !state.done) {
      const seat = viewSeat();
      const q = "after=" + state.cursor + "&wait=20" + (seat >= 0 ? "&seat=" + seat : "");
      try {
        const { data } = await api("/v1/episodes/" + encodeURIComponent(id) + "/events?" + q, { token: bearer() });
        if (gen !== state.gen) return;
        add(data.events);
        state.cursor = data.next;
        if (data.done) { state.done = true; await refreshInfo(); document.body.dataset.done = "true"; }
        showTurn();
      } catch (e) {
        $("error").textContent = e.status === 401 && !token ? "Watching needs the server's secret (set it on the episodes page) or a seat's link." : e.message;
        return;
      }
    }
  }

  function restart() {
    state.gen++;
    state.events = []; state.cursor = 0; state.done = false;
    $("events").replaceChildren();
    $("chat").replaceChildren();
    $("outcome").classList.add("hidden");
    poll(state.gen);
  }

  // A link to another seat (or to the creator's view) of this episode
  // changes only the fragment, which loads nothing: start afresh.
  window.addEventListener("hashchange", () => location.reload());
  $("mode").textContent = token ? "You play seat " + mySeat + ": you see only what this seat sees." : "Creator's view.";
  $("view-box").classList.toggle("hidden", !!token);
  $("view").addEventListener("change", restart);
  $("move-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const n = openNotification();
    if (n) act(n, composeMove());
  });
  $("say").addEventListener("input", preview);
  $("raw-toggle").addEventListener("click", () => { $("free").classList.remove("hidden"); $("reply").placeholder = composeMove(); $("reply").focus(); });
  $("toggle-log").addEventListener("click", () => {
    const log = $("events").classList.toggle("hidden") === false;
    $("chat").classList.toggle("hidden", log);
    $("pane-title").textContent = log ? "Protocol log" : "Conversation";
    $("toggle-log").textContent = log ? "conversation" : "protocol log";
  });
  $("download").addEventListener("click", download);
  $("free").addEventListener("submit", (e) => {
    e.preventDefault();
    const n = openNotification();
    if (n && $("reply").value.trim() !== "") act(n, $("reply").value);
  });
  refreshInfo().then(restart).catch((e) => ($("error").textContent = e.message));
})();
