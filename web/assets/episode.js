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
  const state = { info: null, events: [], cursor: 0, done: false, gen: 0, answered: "" };
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
      if (s.token && s.agent === "remote" && info.status === "running") {
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
    // Free text where the game takes it: no finite list of replies.
    $("free").classList.toggle("hidden", legal.length > 0);
    $("reply").value = "";
    $("send").disabled = false;
    for (const b of $("legal").querySelectorAll("button")) b.disabled = false;
  }

  async function act(n, text) {
    if (state.answered === n.notification_id) return;
    state.answered = n.notification_id;
    $("send").disabled = true;
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
    }
  }

  function showOutcome(ev) {
    const o = ev.data || {};
    const seats = state.info ? state.info.seats : [];
    const parts = (o.rewards || []).map((r, i) => omar.seatName(seats, i) + " " + omar.fmt(r));
    $("outcome").classList.remove("hidden");
    $("outcome-text").textContent = ev.text + (parts.length ? "\nRewards: " + parts.join(", ") : "");
  }

  function add(evs) {
    const list = $("events");
    const seats = state.info ? state.info.seats : [];
    for (const e of evs) {
      state.events.push(e);
      list.append(omar.renderEvent(e, seats));
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
    $("outcome").classList.add("hidden");
    poll(state.gen);
  }

  // A link to another seat (or to the creator's view) of this episode
  // changes only the fragment, which loads nothing: start afresh.
  window.addEventListener("hashchange", () => location.reload());
  $("mode").textContent = token ? "You play seat " + mySeat + ": you see only what this seat sees." : "Creator's view.";
  $("view-box").classList.toggle("hidden", !!token);
  $("view").addEventListener("change", restart);
  $("free").addEventListener("submit", (e) => {
    e.preventDefault();
    const n = openNotification();
    if (n && $("reply").value.trim() !== "") act(n, $("reply").value);
  });
  refreshInfo().then(restart).catch((e) => ($("error").textContent = e.message));
})();
