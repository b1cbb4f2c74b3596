// torchroofline's report page: a sortable, filterable table and a roofline with hover, drawn
// from the page's embedded data (a <script type="application/json" id="page-data">). Plain
// JavaScript, no library, no network: the page opens from disk.
"use strict";
(function () {
  const page = JSON.parse(document.getElementById("page-data").textContent);
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
    "#bcbd22", "#17becf", "#d62728", "#7f7f7f"];
  const SHOWN_ROWS = 1000; // rows put in the DOM at once; sorting and filtering see them all
  const state = { key: null, descending: false, filter: "", order: [], shown: null, hover: -1 };

  // --- numbers --------------------------------------------------------------------------
  function si(value, unit) {
    if (value === null || value === undefined) return "—";
    if (typeof value !== "number") return String(value);
    if (value === 0) return "0" + (unit ? " " + unit : "");
    const prefixes = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "K"]];
    for (const [scale, prefix] of prefixes) {
      if (Math.abs(value) >= scale) return (value / scale).toPrecision(4) + " " + prefix + unit;
    }
    return value.toPrecision(4) + (unit ? " " + unit : "");
  }
  function tick(value, unit) { // a power of ten: "100 T" + unit
    const prefixes = [[1e15, "P"], [1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "K"], [1, ""]];
    for (const [scale, prefix] of prefixes) {
      if (value >= scale) return Math.round(value / scale) + " " + prefix + unit;
    }
    return String(Number(value.toPrecision(1))) + " " + unit;
  }
  function ms(value) {
    if (value === null || value === undefined) return "—";
    if (value >= 1e3) return (value / 1e3).toPrecision(4) + " s";
    if (value >= 1) return value.toPrecision(4) + " ms";
    if (value >= 1e-3) return (value * 1e3).toPrecision(4) + " µs";
    return (value * 1e6).toPrecision(4) + " ns";
  }
  const FORMATS = {
    ms: ms,
    bytes: (v) => si(v, "B"),
    flops: (v) => si(v, "FLOP"),
    percent: (v) => (v === null || v === undefined ? "—" : (100 * v).toPrecision(3) + "%"),
    num: (v) => (typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toPrecision(4)) : (v === null || v === undefined ? "—" : String(v))),
    text: (v) => (v === null || v === undefined ? "—" : String(v)),
  };
  function cell(row, column) {
    return FORMATS[column.kind](row[column.key]);
  }

  // --- table ----------------------------------------------------------------------------
  const table = document.getElementById("rows");
  const count = document.getElementById("row-count");
  function header() {
    const tr = document.createElement("tr");
    for (const column of page.columns) {
      const th = document.createElement("th");
      th.textContent = column.label;
      th.dataset.key = column.key;
      th.title = "sort by " + column.label;
      th.addEventListener("click", () => sortBy(column.key));
      tr.appendChild(th);
    }
    table.tHead.appendChild(tr);
  }
  function matches(row, terms) {
    for (const term of terms) {
      const test = /^([\w.]+)\s*(<=|>=|<|>|=)\s*(.+)$/.exec(term);
      if (test && test[1] in row) {
        const [, key, op, wanted] = test;
        const value = row[key];
        const number = Number(wanted);
        if (!Number.isNaN(number) && typeof value === "number") {
          if (!({ "<": value < number, ">": value > number, "<=": value <= number,
            ">=": value >= number, "=": value === number })[op]) return false;
        } else if (String(value).toLowerCase() !== wanted.toLowerCase()) {
          return false;
        }
      } else if (!row.__text.includes(term)) {
        return false;
      }
    }
    return true;
  }
  function refresh() {
    const terms = state.filter.toLowerCase().split(/\s+/).filter(Boolean);
    state.order = [];
    for (let i = 0; i < page.rows.length; i++) if (matches(page.rows[i], terms)) state.order.push(i);
    if (state.key !== null) {
      const key = state.key, sign = state.descending ? -1 : 1;
      state.order.sort((a, b) => {
        const x = page.rows[a][key], y = page.rows[b][key];
        if (x === y) return a - b;
        if (x === null || x === undefined) return 1; // blanks last either way
        if (y === null || y === undefined) return -1;
        if (typeof x === "number" && typeof y === "number") return sign * (x - y);
        return sign * String(x).localeCompare(String(y));
      });
    }
    state.shown = new Set(state.order);
    const body = document.createElement("tbody");
    for (const index of state.order.slice(0, SHOWN_ROWS)) {
      const tr = document.createElement("tr");
      tr.dataset.row = index;
      for (const column of page.columns) {
        const td = document.createElement("td");
        const value = page.rows[index][column.key];
        td.textContent = cell(page.rows[index], column);
        if (typeof value === "number") { td.className = "num"; td.title = String(value); }
        tr.appendChild(td);
      }
      tr.addEventListener("mouseenter", () => { state.hover = index; draw(); });
      body.appendChild(tr);
    }
    table.replaceChild(body, table.tBodies[0]);
    for (const th of table.tHead.rows[0].cells) {
      th.className = th.dataset.key === state.key ? (state.descending ? "desc" : "asc") : "";
    }
    count.textContent = state.order.length + " of " + page.rows.length + " rows" +
      (state.order.length > SHOWN_ROWS ? " (the first " + SHOWN_ROWS + " shown)" : "");
    draw();
  }
  function sortBy(key) {
    state.descending = state.key === key ? !state.descending : false;
    state.key = key;
    refresh();
  }

  // --- roofline -------------------------------------------------------------------------
  const canvas = document.getElementById("roofline");
  const tip = document.getElementById("tip");
  const groups = [...new Set(page.points.map((p) => p.group))];
  const colour = (group) => PALETTE[groups.indexOf(group) % PALETTE.length];
  const margin = { left: 72, right: 16, top: 12, bottom: 44 };
  let frame = null;
  function extent() {
    const xs = page.points.map((p) => p.x).filter((v) => v > 0);
    const ys = page.points.map((p) => p.y).filter((v) => v > 0);
    for (const roof of page.roofs) for (const peak of roof.peaks) ys.push(peak.flops_per_s);
    // reduce, not Math.min(...values): a spread of 100,000 arguments overflows the stack
    const lo = (values, fallback) => (values.length ? values.reduce((a, b) => Math.min(a, b)) : fallback);
    const hi = (values, fallback) => (values.length ? values.reduce((a, b) => Math.max(a, b)) : fallback);
    return {
      x0: Math.log10(lo(xs, 1)) - 0.6, x1: Math.log10(hi(xs, 1e3)) + 0.6,
      y0: Math.log10(lo(ys, 1e9)) - 0.6, y1: Math.log10(hi(ys, 1e15)) + 0.3,
    };
  }
  function draw() {
    const ratio = window.devicePixelRatio || 1;
    const width = canvas.clientWidth, height = canvas.clientHeight;
    canvas.width = width * ratio; canvas.height = height * ratio;
    const g = canvas.getContext("2d");
    g.setTransform(ratio, 0, 0, ratio, 0, 0);
    g.clearRect(0, 0, width, height);
    const e = extent();
    const px = (x) => margin.left + (Math.log10(x) - e.x0) / (e.x1 - e.x0) * (width - margin.left - margin.right);
    const py = (y) => height - margin.bottom - (Math.log10(y) - e.y0) / (e.y1 - e.y0) * (height - margin.top - margin.bottom);
    frame = { px, py };
    g.font = "11px sans-serif"; g.fillStyle = "#333"; g.strokeStyle = "#ddd"; g.lineWidth = 1;
    for (let d = Math.ceil(e.x0); d <= e.x1; d++) {
      g.beginPath(); g.moveTo(px(10 ** d), margin.top); g.lineTo(px(10 ** d), height - margin.bottom); g.stroke();
      g.fillText(tick(10 ** d, ""), px(10 ** d) - 10, height - margin.bottom + 14);
    }
    for (let d = Math.ceil(e.y0); d <= e.y1; d++) {
      g.beginPath(); g.moveTo(margin.left, py(10 ** d)); g.lineTo(width - margin.right, py(10 ** d)); g.stroke();
      g.fillText(tick(10 ** d, "FLOP/s"), 2, py(10 ** d) + 4);
    }
    g.fillText(page.plot.x_label, margin.left + 4, height - 8);
    g.fillText("↑ " + page.plot.y_label, margin.left + 4, margin.top + 12);
    const xMin = 10 ** e.x0, xMax = 10 ** e.x1;
    for (const roof of page.roofs) {
      g.strokeStyle = roof.group !== null && groups.includes(roof.group) ? colour(roof.group) : "#333";
      g.lineWidth = 1.5;
      for (const peak of roof.peaks) {
        const ridge = peak.flops_per_s / roof.bandwidth_bytes_per_s;
        g.beginPath(); g.moveTo(px(xMin), py(roof.bandwidth_bytes_per_s * xMin));
        g.lineTo(px(ridge), py(peak.flops_per_s)); g.lineTo(px(xMax), py(peak.flops_per_s)); g.stroke();
        g.fillStyle = g.strokeStyle;
        g.fillText(peak.label, px(xMax) - 8 - g.measureText(peak.label).width, py(peak.flops_per_s) - 4);
      }
    }
    const visible = (i) => state.shown === null || state.shown.has(page.points[i].row);
    const paths = new Map();
    page.points.forEach((p, i) => {
      if (p.path !== null && visible(i)) {
        if (!paths.has(p.path)) paths.set(p.path, []);
        paths.get(p.path).push(p);
      }
    });
    g.lineWidth = 1;
    for (const points of paths.values()) {
      g.strokeStyle = colour(points[0].group); g.beginPath();
      points.forEach((p, k) => (k ? g.lineTo(px(p.x), py(p.y)) : g.moveTo(px(p.x), py(p.y))));
      g.stroke();
    }
    page.points.forEach((p, i) => {
      if (!(p.x > 0 && p.y > 0) || !visible(i)) return;
      g.fillStyle = colour(p.group);
      g.beginPath(); g.arc(px(p.x), py(p.y), p.row === state.hover ? 6 : 3, 0, 2 * Math.PI); g.fill();
    });
    legend();
  }
  function legend() {
    const box = document.getElementById("legend");
    if (box.childElementCount) return;
    for (const group of groups) {
      const item = document.createElement("span");
      item.innerHTML = '<i style="background:' + colour(group) + '"></i>';
      item.appendChild(document.createTextNode(group));
      box.appendChild(item);
    }
  }
  function nearest(event) {
    if (frame === null) return -1;
    const bounds = canvas.getBoundingClientRect();
    const mx = event.clientX - bounds.left, my = event.clientY - bounds.top;
    let best = -1, bestDistance = 64; // within 8 px
    page.points.forEach((p, i) => {
      if (!(p.x > 0 && p.y > 0) || (state.shown !== null && !state.shown.has(p.row))) return;
      const dx = frame.px(p.x) - mx, dy = frame.py(p.y) - my, distance = dx * dx + dy * dy;
      if (distance < bestDistance) { best = i; bestDistance = distance; }
    });
    return best;
  }
  canvas.addEventListener("mousemove", (event) => {
    const i = nearest(event);
    if (i < 0) { tip.style.display = "none"; return; }
    const p = page.points[i], row = page.rows[p.row];
    const lines = [p.label, ...page.columns.filter((c) => c.tip).map((c) => c.label + ": " + cell(row, c))];
    tip.textContent = lines.join("\n");
    tip.style.display = "block";
    tip.style.left = event.pageX + 12 + "px";
    tip.style.top = event.pageY + 12 + "px";
  });
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });

  // --- start ----------------------------------------------------------------------------
  for (const row of page.rows) {
    row.__text = page.columns.map((c) => cell(row, c) + " " + String(row[c.key])).join(" ").toLowerCase();
  }
  header();
  document.getElementById("filter").addEventListener("input", (event) => {
    state.filter = event.target.value;
    refresh();
  });
  document.getElementById("download").href = URL.createObjectURL(
    new Blob([document.getElementById("document-data").textContent], { type: "application/json" }));
  window.addEventListener("resize", draw);
  refresh();
  // #selftest: click the first numeric column's heading twice and record the order each time
  // (the browser test reads it from the DOM)
  if (location.hash === "#selftest") {
    const column = page.columns.find((c) => c.kind !== "text");
    const th = [...table.tHead.rows[0].cells].find((cell) => cell.dataset.key === column.key);
    const values = () => state.order.map((i) => page.rows[i][column.key]).filter((v) => typeof v === "number");
    const sorted = (list, sign) => list.every((v, k) => k === 0 || sign * (v - list[k - 1]) >= 0);
    th.click();
    const ascending = sorted(values(), 1);
    th.click();
    const descending = sorted(values(), -1);
    document.body.dataset.selftest = "column=" + column.key + " ascending=" + ascending + " descending=" + descending +
      " first=" + table.tBodies[0].rows.length;
  }
  document.body.dataset.readyMs = String(Math.round(performance.now())); // load to ready
  document.body.dataset.ready = "1";
})();
