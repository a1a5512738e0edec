// The console's only script (the Content-Security-Policy allows no inline one): the live refresh
// of the list page and of a TaskQueue's pages. It fetches data.json every data-refresh ms (the
// server shares one observe call per TaskQueue among all viewers), sets the numbers as text (never
// as HTML), draws the charts (uPlot) and puts in the page's parts (data-part: the list's
// taskqueues table; queues, schedules, workers, the queues page's lists and flow lines) as the
// server rendered them again from its shared reads with the page's own escaping templates
// (parsed in an inert <template>: nothing in them runs).
"use strict";
(function () {
  const live = document.getElementById("live");
  if (!live) return;
  const root = document.getElementById("charts");
  const note = document.getElementById("charts-note");
  const src = live.dataset.liveSrc, every = Math.max(1000, Number(live.dataset.refresh) || 5000);
  const plots = {};
  const colors = ["#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4b5563"];

  function seriesOf(name, data) {
    if (name === "backlog") {
      const keys = Object.keys(data.backlog);
      return [keys, keys.map((k) => data.backlog[k])];
    }
    if (name === "work") return [["in flight", "desired", "ready"], [data.inflight, data.desired, data.ready]];
    return [["arrivals/s", "completions/s"], [data.arrivals, data.completions]];
  }

  function draw(el, data) {
    const name = el.dataset.chart;
    const [labels, ys] = seriesOf(name, data);
    const rows = [data.t, ...ys];
    const plot = plots[name];
    if (plot && plot.series.length === labels.length + 1) { plot.setData(rows); return; }
    if (plot) plot.destroy();
    el.textContent = "";
    const opts = {
      title: el.dataset.title, width: Math.max(300, el.clientWidth || 560), height: 180,
      series: [{}, ...labels.map((l, i) => ({ label: l, stroke: colors[i % colors.length], width: 1.5 }))],
      axes: [{}, { size: 50 }],
    };
    plots[name] = new window.uPlot(opts, rows, el);
  }

  function numbers(summary) {
    for (const el of document.querySelectorAll("#summary [data-field]")) {
      const v = summary[el.dataset.field];
      if (v !== undefined && typeof v !== "object") el.textContent = v === null ? "-" : String(v);
    }
    for (const q of summary.queues) {
      for (const el of document.querySelectorAll("#queue-table [data-field], #summary [data-field]")) {
        const [name, ...rest] = el.dataset.field.split(":");
        if (rest.join(":") !== q.key || !["backlog", "rate", "max", "paused"].includes(name)) continue;
        const v = q[name];
        el.textContent = v === null ? "-" : (name === "paused" && !v ? "no" : String(v));
      }
    }
  }

  function parts(doc) {
    for (const el of document.querySelectorAll("[data-part]")) {
      const html = doc.parts[el.dataset.part];
      if (typeof html !== "string") continue;
      const inert = document.createElement("template");
      inert.innerHTML = html;
      el.replaceChildren(inert.content);
    }
  }

  function url() {
    const names = Array.from(document.querySelectorAll("[data-part]"), (el) => el.dataset.part);
    const query = new URLSearchParams({ parts: names.join(","), workers: live.dataset.workersPage || "0" });
    return src + "?" + query.toString();
  }

  async function tick() {
    try {
      const res = await fetch(url(), { credentials: "same-origin" });
      if (!res.ok) throw new Error("HTTP " + res.status);
      const doc = await res.json();
      if (doc.summary) numbers(doc.summary);
      parts(doc);
      if (root && window.uPlot && doc.series) for (const el of root.querySelectorAll("[data-chart]")) draw(el, doc.series);
      live.dataset.loaded = String(doc.at);
      if (note && doc.series) note.textContent =
        doc.series.t.length + " history point(s) in the last hour; refreshed every " + every / 1000 + " s";
    } catch (err) {
      if (note) note.textContent = "refresh failed: " + err.message;
      live.dataset.failed = err.message;
    }
  }

  tick();
  setInterval(tick, every);
})();
