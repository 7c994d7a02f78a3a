/* memtrack report: draws the charts from the JSON block `memtrack report`
 * wrote into the page (tools/memtrack/report_html.c says what each field
 * holds). Plain DOM and SVG: no library, nothing loaded from the network.
 * Every array it draws is bounded by the writer (at most 720 points, 160
 * columns, 64 heatmap rows), so the page stays responsive for any trace. */
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const app = document.getElementById("app");
  const tip = el("div", { class: "tip" });
  document.body.appendChild(tip);

  // ---- helpers ------------------------------------------------------------
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    for (const c of kids) e.append(c && c.nodeType ? c : String(c));
    return e;
  }
  function sv(tag, attrs, parent) {
    const e = document.createElementNS(NS, tag);
    for (const k in attrs || {}) e.setAttribute(k, attrs[k]);
    if (parent) parent.appendChild(e);
    return e;
  }
  function bytes(n) {
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(n < 10 ? 2 : n < 100 ? 1 : 0) : Math.round(n)) + " " + u[i];
  }
  function num(n) { return Number(n).toLocaleString("en-US"); }
  function pct(x) { return x >= 0.1 ? (100 * x).toFixed(0) + "%" : x > 0 ? (100 * x).toFixed(2) + "%" : "0"; }
  function showTip(ev, text) {
    tip.textContent = text;
    tip.style.display = "block";
    const x = Math.min(ev.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
    tip.style.left = x + "px";
    tip.style.top = (ev.clientY + 14) + "px";
  }
  function hideTip() { tip.style.display = "none"; }
  // Round tick steps (1, 2, 5 x 10^k) over [0, max].
  function ticks(max, n) {
    if (!(max > 0)) return [0];
    const raw = max / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map(m => m * p).find(s => s >= raw);
    const t = [];
    for (let v = 0; ; v += step) { // up to the first tick at or above max
      t.push(Number(v.toPrecision(12)));
      if (v >= max * 0.9999) break;
    }
    return t;
  }
  // A perceptual ramp (viridis-like) for heatmaps; 0 stays blank.
  const RAMP = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function ramp(t) {
    t = Math.max(0, Math.min(1, t)) * (RAMP.length - 1);
    const i = Math.min(Math.floor(t), RAMP.length - 2), f = t - i, a = RAMP[i], b = RAMP[i + 1];
    return "rgb(" + a.map((v, k) => Math.round(v + (b[k] - v) * f)).join(",") + ")";
  }
  // Densities span decades: a log scale from 1e-4 (a few bytes of a big
  // memory) to 1 (all of it, every submit).
  function heat(v) { return v <= 0 ? null : ramp((Math.log10(Math.max(v, 1e-4)) + 4) / 4); }
  // First submit of series point p (the writer's floor(s * points / n) binning).
  function pointStart(p, points, n) { return Math.ceil(p * n / points); }

  const info = D.info, S = D.series, meta = Object.fromEntries(D.meta);

  // ---- header and key figures -----------------------------------------------
  const verdict = info.error ? ["bad", "read error"] : info.complete ? ["good", "complete"] : ["warn", "incomplete"];
  const mis = D.mis_count;
  const head = el("header", {},
    el("h1", {}, "memtrack report", el("small", {}, D.file),
       el("span", { class: "badge " + verdict[0] }, verdict[1]),
       mis[2] ? el("span", { class: "badge bad" }, num(mis[2]) + " lost writes") : ""),
    el("div", { class: "meta" }, [meta.application && "application " + meta.application,
      meta.driver && "driver " + meta.driver, meta.mode && "mode " + meta.mode,
      "format " + info.format, "memtrack " + (meta.memtrack || meta.memtrack_version || D.version)].filter(Boolean).join("  ·  ")));
  document.body.insertBefore(head, app);
  function add(node) { app.appendChild(node); return node; }
  function sec(title, why) {
    const s = el("section", {}, el("h2", {}, title));
    if (why) s.appendChild(el("p", { class: "why" }, why));
    return add(s);
  }
  const ratio = info.stored_bytes ? info.raw_bytes / info.stored_bytes : 1;
  const cards = add(el("div", { class: "cards" }));
  [[num(info.submits), "submits"], [num(info.frames), "frames"], [num(info.memories), "memories"],
   [num(info.objects), "buffers and images"], [bytes(info.update_bytes), "changed, in " + num(info.updates) + " updates"],
   [bytes(info.update_bytes / Math.max(1, info.submits)), "changed per submit (mean)"],
   [bytes(info.file_size), "trace on disk"], [ratio.toFixed(2) + "x", "compression (" + num(info.chunks) + " chunks)"],
   [num(info.hashes), info.hashes ? "content hashes (verifiable)" : "content hashes: record with --verify"]]
    .forEach(([v, l]) => cards.appendChild(el("div", { class: "kpi" }, el("b", {}, v), el("span", {}, l))));
  if (info.error) add(el("p", { class: "note" }, "Reading stopped early: " + info.error + ". What follows covers the records before it."));

  // ---- bytes changed per submit -------------------------------------------------
  (function () {
    const s = sec("Bytes changed per submit", "What the application wrote between two submits, as captured: " +
      "the mean over the submits of each point (area) and the largest single submit (line).");
    const P = S.points, W = 1100, H = 240, L = 64, R = 12, T = 10, B = 34;
    if (!P) { s.appendChild(el("p", { class: "empty" }, "No submits.")); return; }
    const mean = S.sum.map((v, i) => S.count[i] ? v / S.count[i] : 0);
    const ymax = Math.max(1, ...S.max, ...mean);
    // A first upload hundreds of times larger than the frames after it
    // would flatten them to nothing: past 30x the median, a log scale.
    const pos = mean.filter(v => v > 0).sort((a, b) => a - b), med = pos.length ? pos[pos.length >> 1] : 1;
    const log = ymax / med > 30;
    let yt, y;
    if (log) {
      // Ticks at powers of 16: round binary sizes (16 B, 256 B, 4 KiB, ...).
      const l16 = v => Math.log2(v) / 4;
      const lo = Math.pow(16, Math.floor(l16(Math.max(1, pos[0])))), hi = Math.pow(16, Math.ceil(l16(ymax)));
      yt = [];
      for (let v = lo; v <= hi; v *= 16) yt.push(v);
      const span = l16(hi) - l16(lo) || 1;
      y = v => v < lo ? H - B : T + (H - T - B) * (1 - (l16(v) - l16(lo)) / span);
    } else {
      yt = ticks(ymax, 4);
      const top = yt[yt.length - 1] || ymax;
      y = v => T + (H - T - B) * (1 - v / top);
    }
    const svg = sv("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, id: "chart-submits" });
    const x = i => L + (W - L - R) * (P === 1 ? 0.5 : i / (P - 1));
    const g = sv("g", { class: "grid" }, svg);
    yt.forEach(v => { sv("line", { x1: L, x2: W - R, y1: y(v), y2: y(v) }, g);
      // Tick labels without trailing zeros: "64 KiB", not "64.0 KiB".
      sv("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, svg).textContent = bytes(v).replace(/\.0+ /, " "); });
    ticks(S.n - 1, 8).forEach(sub => {
      const px = L + (W - L - R) * (S.n > 1 ? sub / (S.n - 1) : 0.5);
      sv("text", { x: px, y: H - B + 16, "text-anchor": "middle" }, svg).textContent = num(Math.round(sub));
    });
    sv("text", { x: (L + W) / 2, y: H - 4, "text-anchor": "middle" }, svg).textContent = "submit";
    let area = `M${x(0)},${y(0)}`;
    mean.forEach((v, i) => area += `L${x(i)},${y(v)}`);
    area += `L${x(P - 1)},${y(0)}Z`;
    sv("path", { d: area, fill: "#3867d6", "fill-opacity": 0.25, stroke: "#3867d6", "stroke-width": 1.2 }, svg);
    sv("path", { d: "M" + S.max.map((v, i) => `${x(i)},${y(v)}`).join("L"), fill: "none", stroke: "#e58e26",
      "stroke-width": 1, "stroke-opacity": 0.8 }, svg);
    const cursor = sv("line", { y1: T, y2: H - B, stroke: "#1d2330", "stroke-opacity": 0, "stroke-dasharray": "3 3" }, svg);
    svg.addEventListener("mousemove", ev => {
      const r = svg.getBoundingClientRect(), fx = (ev.clientX - r.left) * W / r.width;
      const i = Math.max(0, Math.min(P - 1, Math.round((fx - L) / (W - L - R) * (P - 1))));
      cursor.setAttribute("x1", x(i)); cursor.setAttribute("x2", x(i)); cursor.setAttribute("stroke-opacity", 0.5);
      const a = pointStart(i, P, S.n), b = pointStart(i + 1, P, S.n) - 1;
      showTip(ev, (a === b ? "submit " + num(a) : "submits " + num(a) + "–" + num(b)) +
        "\nmean " + bytes(mean[i]) + " per submit\nlargest " + bytes(S.max[i]) +
        (S.frames[i] ? "\n" + num(S.frames[i]) + " frame" + (S.frames[i] > 1 ? "s" : "") + " presented" : ""));
    });
    svg.addEventListener("mouseleave", () => { hideTip(); cursor.setAttribute("stroke-opacity", 0); });
    s.appendChild(svg);
    s.appendChild(el("div", { class: "legend" }, el("i", { style: "background:#3867d6;opacity:.5" }), "mean per submit",
      el("i", { style: "background:#e58e26" }), "largest submit", log ? "   (log scale)" : ""));
  })();

  // ---- heatmaps -------------------------------------------------------------------
  const cols = D.cols || 1;
  function colRange(c) { // submits of heatmap column c
    const a = Math.ceil(c * S.n / cols), b = Math.ceil((c + 1) * S.n / cols) - 1;
    return a >= b ? "submit " + num(a) : "submits " + num(a) + "–" + num(b);
  }
  // rows: [{label, cells[cols], info(rowIndex) -> text}]
  function heatmap(rows, opts) {
    const cw = Math.max(3, (opts.width - opts.left) / cols);
    const rh = opts.rowH, W = opts.left + cw * cols + 4, H = rows.length * rh + 22;
    const svg = sv("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, class: "heatmap" });
    sv("rect", { x: opts.left, y: 0, width: cw * cols, height: rows.length * rh, fill: "#f4f5f8" }, svg);
    rows.forEach((row, r) => {
      if (row.label) sv("text", { x: opts.left - 6, y: r * rh + rh / 2 + 4, "text-anchor": "end" }, svg).textContent = row.label;
      row.cells.forEach((v, c) => {
        const f = heat(v);
        if (f) sv("rect", { x: opts.left + c * cw, y: r * rh, width: cw, height: rh, fill: f }, svg);
      });
    });
    sv("text", { x: opts.left, y: H - 6 }, svg).textContent = "submit 0";
    sv("text", { x: opts.left + cw * cols, y: H - 6, "text-anchor": "end" }, svg).textContent = "submit " + num(S.n - 1);
    svg.addEventListener("mousemove", ev => {
      const b = svg.getBoundingClientRect(), fx = (ev.clientX - b.left) * W / b.width, fy = (ev.clientY - b.top) * H / b.height;
      const c = Math.floor((fx - opts.left) / cw), r = Math.floor(fy / rh);
      if (c < 0 || c >= cols || r < 0 || r >= rows.length) return hideTip();
      showTip(ev, rows[r].info(r) + "\n" + colRange(c) + "\nwritten per submit: " + pct(rows[r].cells[c]));
    });
    svg.addEventListener("mouseleave", hideTip);
    return svg;
  }
  function heatLegend() {
    const d = el("div", { class: "legend" }, "share written per submit:");
    [1e-4, 1e-3, 1e-2, 0.1, 1].forEach(v => d.append(el("i", { style: "background:" + heat(v) }), pct(v)));
    return d;
  }
  const memLabel = m => "mem " + m.id + " · " + bytes(m.size);
  (function () {
    const s = sec("Written memory per submit", "Each row is a memory (the most written first), each column " +
      "a run of submits; the colour is the share of the memory the application wrote per submit there.");
    const rows = D.mems.filter(m => m.row);
    if (!rows.length) { s.appendChild(el("p", { class: "empty" }, "Nothing was written.")); return; }
    const svg = heatmap(rows.map(m => ({ label: memLabel(m), cells: m.row,
      info: () => memLabel(m) + "\n" + (m.mode || "mode not recorded") })), { width: 1100, left: 130, rowH: 14 });
    svg.id = "chart-heatmap";
    s.appendChild(svg);
    s.appendChild(heatLegend());
    if (D.mems.filter(m => m.bytes).length > rows.length)
      s.appendChild(el("p", { class: "note" }, "The " + rows.length + " most written memories of " + num(D.mems.filter(m => m.bytes).length) + "."));
  })();
  (function () {
    const grids = D.mems.filter(m => m.grid);
    if (!grids.length) return;
    const s = sec("Written pages of the busiest memories", "Rows are page ranges of the memory (offset 0 at the top), " +
      "columns runs of submits: where in the memory the writes land, and when.");
    const box = s.appendChild(el("div", { class: "grids" }));
    grids.forEach(m => {
      const per = m.size / m.pb, rows = [];
      for (let p = 0; p < m.pb; p++)
        rows.push({ label: p === 0 ? "0" : p === m.pb - 1 ? bytes(m.size) : "", cells: m.grid.slice(p * cols, (p + 1) * cols),
          info: r => memLabel(m) + "\nbytes " + bytes(r * per) + " – " + bytes((r + 1) * per) });
      const svg = heatmap(rows, { width: 420, left: 56, rowH: Math.max(2, Math.min(14, Math.floor(160 / m.pb))) });
      svg.classList.add("page-heatmap");
      box.appendChild(el("div", {}, el("h3", {}, memLabel(m) + " — " + (m.mode || "mode not recorded")), svg));
    });
    s.appendChild(heatLegend());
  })();

  // ---- capture modes ------------------------------------------------------------
  const MODE_COL = { guard: "#20a464", scan: "#e58e26", shadow: "#3867d6", copy: "#d63031" };
  const modeName = t => t.split(/[ /:]/)[0];
  // The reason a mode record gives; one without a reason is the memory's
  // first choice (auto) or the mode asked for, when it is the first record.
  const modeWhy = (t, first) => {
    const i = t.indexOf(": ");
    return i >= 0 ? t.slice(i + 2) : !first ? "stated again" : t.includes("(auto)") ? "first choice" : "as asked";
  };
  (function () {
    const s = sec("Capture modes", "How each memory was captured over time, and why the mode changed: " +
      "auto mode tracks a memory's pages (guard) while it is written sparsely and scans it whole once " +
      "that costs less; memories that cannot be tracked are scanned.");
    const ev = D.events;
    if (!ev.length) { s.appendChild(el("p", { class: "empty" }, "No mode records: the memories were never mapped, or the trace predates them.")); return; }
    const byMem = new Map();
    ev.forEach(([sub, mem, text]) => { if (!byMem.has(mem)) byMem.set(mem, []); byMem.get(mem).push([sub, text]); });
    const why = new Map(), seen = new Set();
    ev.forEach(([, mem, t]) => {
      const k = modeName(t) + " — " + modeWhy(t, !seen.has(mem));
      seen.add(mem);
      why.set(k, (why.get(k) || 0) + 1);
    });
    const summary = el("div", { class: "legend" }, "decisions:");
    [...why.entries()].sort((a, b) => b[1] - a[1]).forEach(([k, n]) =>
      summary.append(el("i", { style: "background:" + (MODE_COL[k.split(" ")[0]] || "#999") }), k + " ×" + num(n)));
    s.appendChild(summary);
    // Lanes: memories that changed mode first, then by id; at most 40.
    const mems = [...byMem.keys()].sort((a, b) => (byMem.get(b).length - byMem.get(a).length) || a - b).slice(0, 40);
    const W = 1100, L = 130, R = 10, lh = 14, H = mems.length * lh + 24, N = Math.max(1, S.n);
    const svg = sv("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, id: "chart-modes" });
    const x = sub => L + (W - L - R) * sub / N;
    mems.forEach((mem, r) => {
      const list = byMem.get(mem), y = r * lh;
      sv("text", { x: L - 6, y: y + lh / 2 + 4, "text-anchor": "end" }, svg).textContent = "mem " + mem;
      list.forEach(([sub, text], k) => {
        const end = k + 1 < list.length ? list[k + 1][0] : N;
        const rect = sv("rect", { x: x(sub), y: y + 2, width: Math.max(1.5, x(end) - x(sub)), height: lh - 4, rx: 2,
          fill: MODE_COL[modeName(text)] || "#999" }, svg);
        rect.addEventListener("mousemove", e => showTip(e, "mem " + mem + ", from submit " + num(sub) + "\n" + text));
        rect.addEventListener("mouseleave", hideTip);
        if (k) sv("line", { x1: x(sub), x2: x(sub), y1: y, y2: y + lh, stroke: "#1d2330", "stroke-width": 1.2 }, svg);
      });
    });
    sv("text", { x: L, y: H - 6 }, svg).textContent = "submit 0";
    sv("text", { x: W - R, y: H - 6, "text-anchor": "end" }, svg).textContent = "submit " + num(N - 1);
    s.appendChild(svg);
    const changes = ev.filter(([, mem], i) => ev.findIndex(e => e[1] === mem) !== i);
    if (changes.length) {
      s.appendChild(el("h3", {}, "Mode changes"));
      s.appendChild(table(["submit", "memory", "mode", "why"], changes.slice(0, 500).map(([sub, mem, t]) =>
        [sub, mem, t.split(":")[0], modeWhy(t, false)]), [0, 0, 1, 1]));
    }
    if (D.events_total > ev.length)
      s.appendChild(el("p", { class: "note" }, "The first " + num(ev.length) + " of " + num(D.events_total) + " mode records."));
  })();

  // ---- compression per chunk ---------------------------------------------------------
  (function () {
    const C = D.chunks, s = sec("Compression per chunk", "Each bar is a chunk of the trace (or a run of chunks): " +
      "how many times smaller zstd made it, over its position in the file. Chunks stored raw show 1x.");
    if (!C.p.length) { s.appendChild(el("p", { class: "empty" }, "No complete chunk.")); return; }
    const W = 1100, H = 200, L = 64, R = 12, T = 10, B = 34, n = C.p.length;
    const ratios = C.p.map(p => p[3] ? p[2] / p[3] : 1), top = ticks(Math.max(...ratios, 1), 4);
    const ymax = top[top.length - 1], bw = (W - L - R) / n;
    const svg = sv("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, id: "chart-chunks" });
    const y = v => T + (H - T - B) * (1 - v / ymax);
    const g = sv("g", { class: "grid" }, svg);
    top.forEach(v => { sv("line", { x1: L, x2: W - R, y1: y(v), y2: y(v) }, g);
      sv("text", { x: L - 6, y: y(v) + 4, "text-anchor": "end" }, svg).textContent = v + "x"; });
    C.p.forEach((p, i) => {
      const r = sv("rect", { x: L + i * bw + (bw > 3 ? 0.5 : 0), y: y(ratios[i]), width: Math.max(0.8, bw - (bw > 3 ? 1 : 0)),
        height: y(0) - y(ratios[i]), fill: ratios[i] < 1.05 ? "#b0b7c3" : "#3867d6" }, svg);
      r.addEventListener("mousemove", e => showTip(e, (p[1] > 1 ? "chunks " + num(p[0]) + "–" + num(p[0] + p[1] - 1) : "chunk " + num(p[0])) +
        "\n" + bytes(p[2]) + " → " + bytes(p[3]) + " (" + ratios[i].toFixed(2) + "x" +
        (p[1] > 1 ? ", " + p[4].toFixed(2) + "–" + p[5].toFixed(2) + "x" : "") + ")\n" + num(p[7]) + " records, " +
        num(p[6]) + " submits from submit " + num(p[8])));
      r.addEventListener("mouseleave", hideTip);
    });
    sv("text", { x: L, y: H - B + 16 }, svg).textContent = "chunk 0";
    sv("text", { x: W - R, y: H - B + 16, "text-anchor": "end" }, svg).textContent = "chunk " + num(C.n - 1);
    s.appendChild(svg);
  })();

  // ---- mismatches ------------------------------------------------------------------
  (function () {
    const s = sec("Mismatches", "At each submit (with --verify) the capture compared the real bytes with what it " +
      "recorded. Raced and in-flight bytes changed while the capture ran and are captured at the next submit; " +
      "lost bytes are a write the capture missed.");
    if (!info.hashes) { s.appendChild(el("p", { class: "empty" }, "Not checked: the trace was recorded without --verify.")); return; }
    const names = ["raced (application)", "in flight (device)", "LOST"];
    s.appendChild(el("p", {}, names.map((nm, i) => nm + ": " + num(mis[i]) + " ranges, " + bytes(D.mis_bytes[i])).join("  ·  ")));
    if (!D.mis.length) { s.appendChild(el("p", { class: "empty" }, "None: every submit's recorded content matched the real bytes.")); return; }
    s.appendChild(table(["submit", "memory", "object", "offset", "bytes", "cause", "queues running"],
      D.mis.map(m => [m[0], m[1], m[2] || "", m[3], m[4], names[m[5] - 1] || "?", m[6]]), [0, 0, 0, 0, 0, 1, 0]));
  })();

  // ---- tables ------------------------------------------------------------------------
  function table(head, rows, left) {
    const tb = el("tbody");
    const th = head.map((h, i) => el("th", { class: left && left[i] ? "l" : "" }, h));
    const t = el("table", {}, el("thead", {}, el("tr", {}, ...th)), tb);
    let sortCol = -1, dir = 1;
    function fill() {
      tb.textContent = "";
      const frag = document.createDocumentFragment();
      rows.forEach(r => frag.appendChild(el("tr", {}, ...r.map((v, i) =>
        el("td", { class: left && left[i] ? "l" : "" }, typeof v === "number" ? num(v) : v)))));
      tb.appendChild(frag);
    }
    th.forEach((h, i) => h.addEventListener("click", () => {
      dir = sortCol === i ? -dir : (typeof rows[0][i] === "number" ? -1 : 1);
      sortCol = i;
      rows.sort((a, b) => (a[i] < b[i] ? -1 : a[i] > b[i] ? 1 : 0) * dir);
      fill();
    }));
    fill();
    return el("div", { class: "scroll" }, t);
  }
  const flags = f => ["DEVICE_LOCAL", "HOST_VISIBLE", "HOST_COHERENT", "HOST_CACHED"].filter((_, i) => f & (1 << i)).join(" ") || "–";
  (function () {
    const s = sec("Memories", "Every memory the application created (the " + num(D.mems.length) +
      " most written when there are more), with what was written into it. Click a column to sort.");
    s.appendChild(table(["id", "size", "type", "flags", "created at submit", "freed at submit", "bytes written",
      "updates", "objects", "maps", "mode changes", "last mode"],
      D.mems.map(m => [m.id, m.size, m.type, flags(m.flags), m.created, m.destroyed < 0 ? "" : m.destroyed, m.bytes,
        m.updates, m.objects, m.maps, m.changes, m.mode]), [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]));
    const o = sec("Buffers and images", "Objects bound to memory, and the bytes written into their ranges.");
    if (!D.objs.length) { o.appendChild(el("p", { class: "empty" }, "None.")); return; }
    o.appendChild(table(["id", "kind", "size", "used size", "memory", "offset", "bytes written"],
      D.objs.map(b => [b[0], b[1] === 2 ? "image" : b[1] === 1 ? "buffer" : "kind " + b[1], b[2], b[3], b[4] || "", b[5], b[6]]),
      [0, 1, 0, 0, 0, 0, 0]));
  })();
  if (D.notes.length) {
    const s = sec("Annotations", "What the capture said about the application (" + num(D.notes_total) + " in all).");
    s.appendChild(table(["submit", "about", "text"], D.notes.map(a => [a[0], a[1] || "trace", a[2]]), [0, 0, 1]));
  }
  add(el("p", { class: "note" }, "Generated by memtrack " + D.version + " from " + D.file + ". Hover the charts for values."));
  document.documentElement.setAttribute("data-rendered", "1");
})();
