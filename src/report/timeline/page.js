"use strict";
// Paints the runs embedded in #timeline-data (computed by hightide) on one shared, zoomable
// time axis. Every shape that stands for something carries its explanation in data-tip.
(function () {
  const panels = JSON.parse(document.getElementById("timeline-data").textContent);
  const END = Math.max(1, ...panels.map((p) => p.end));
  const LABEL = 170, PAD = 14, AXIS = 22, GAP = 8;
  const LANE = 18, ISR_H = 24, OFF_H = 46, ACK_H = 46, FAIL_H = 32, LOST_H = 34;
  const MIN_SPAN = 20;
  const BROKER = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#edc948", "#76b7b2", "#9c755f", "#bab0ac"];
  const HOST = { "up": "#8fd18f", "killed": "#e45756", "power-lost": "#333", "exited": "#bbb", "paused": "#f2c14e" };
  const HOST_WORDS = {
    "up": "up",
    "killed": "killed: the process is gone, the page cache survives",
    "power-lost": "no power: what the page cache held and the disk did not is lost",
    "exited": "exited: a controlled shutdown, its log dir went offline, or a truncation it may not make",
    "paused": "paused: the process runs nothing (SIGSTOP, a GC pause); its kernel still takes connections and buffers",
  };
  const KIND = {
    "fault": ["#d62728", "fault"],
    "election": ["#1f77b4", "clean election"],
    "unclean-election": ["#d62728", "unclean election"],
    "offline": ["#d62728", "no leader"],
    "leader-started": ["#555", "leader took up its epoch"],
    "isr-shrink": ["#ff7f0e", "ISR shrink"],
    "isr-expand": ["#2ca02c", "ISR expand"],
    "truncation": ["#9467bd", "follower truncation"],
    "recovery": ["#8c564b", "log recovery"],
    "log-missing": ["#d62728", "log missing after restart"],
    "log-dir-offline": ["#d62728", "log dir offline: the broker halts"],
    "truncation-not-allowed": ["#d62728", "truncation not allowed: the broker exits"],
    "fetch-failed": ["#ff7f0e", "fetches failing"],
    "fetch-resumed": ["#2ca02c", "fetches resumed"],
    "unverified": ["#9467bd", "transactional produce refused (partition verification)"],
  };
  const MARKERS_LISTED = 8;
  // Markers closer than this many pixels share one marker (they would hide each other).
  const MARKER_GAP = 11;
  let view = { t0: 0, t1: END };

  const brokerColor = (id) => BROKER[(id - 1) % BROKER.length];
  /// Kafka colours a leader by its broker id; RocketMQ by its master's place among the hosts.
  const leaderColor = (p, span) => p.system === "kafka"
    ? brokerColor(span.leader)
    : BROKER[Math.max(0, p.hosts.findIndex((h) => h.host === span.host)) % BROKER.length];
  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const secs = (ms) => (ms / 1000).toFixed(3) + " s";
  const fmt = (n) => n.toLocaleString("en-US");

  function clampView(t0, t1) {
    let span = Math.min(Math.max(t1 - t0, MIN_SPAN), END);
    t0 = Math.min(Math.max(t0, 0), END - span);
    return { t0, t1: t0 + span };
  }

  function setView(t0, t1) {
    view = clampView(t0, t1);
    renderAll();
  }

  function layout(p) {
    const rows = [];
    let y = AXIS;
    for (const host of p.hosts) { rows.push({ kind: "host", y, h: LANE, host }); y += LANE; }
    y += GAP;
    for (const log of p.logs) {
      rows.push({ kind: "offsets", y, h: OFF_H, lane: `log:${log.host}`, name: `${log.host} CommitLog`, a: log.max, b: log.flushed });
      y += OFF_H + GAP;
    }
    const kafka = p.system === "kafka";
    for (const part of p.partitions) {
      rows.push({ kind: "leader", y, h: LANE, part }); y += LANE;
      // RocketMQ's queues have no ISR: a group's master alone holds them.
      if (kafka) { rows.push({ kind: "isr", y, h: ISR_H, part }); y += ISR_H + 2; }
      const lso = part.lso && part.lso.length ? part.lso : null;
      rows.push({ kind: "offsets", y, h: OFF_H, lane: part.tp, name: kafka ? (lso ? "LEO / HW / LSO" : "LEO / HW") : "acked / consumed", a: part.leo, b: part.hw, c: lso });
      y += OFF_H + GAP;
    }
    rows.push({ kind: "faults", y, h: LANE }); y += LANE + GAP;
    rows.push({ kind: "acked", y, h: ACK_H }); y += ACK_H + 6;
    rows.push({ kind: "failed", y, h: FAIL_H }); y += FAIL_H + 6;
    rows.push({ kind: "lost", y, h: LOST_H }); y += LOST_H;
    return { rows, height: y + 6 };
  }

  function niceStep(span) {
    const raw = span / 9;
    const pow = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * pow >= raw) return m * pow;
    return 10 * pow;
  }

  /// Painter for one panel at one width: x() maps a time to a pixel.
  function painter(width) {
    const plot = width - LABEL - PAD;
    const x = (t) => LABEL + ((t - view.t0) / (view.t1 - view.t0)) * plot;
    const visible = (from, to) => to >= view.t0 && from <= view.t1;
    const clipX = (v) => Math.min(Math.max(v, LABEL - 1), width - PAD + 1);
    return { plot, x, visible, clipX };
  }

  function rect(x0, y, x1, h, fill, tip, extra) {
    const w = Math.max(x1 - x0, 0.8);
    return `<rect x="${x0.toFixed(1)}" y="${y.toFixed(1)}" width="${w.toFixed(1)}" height="${h.toFixed(1)}" fill="${fill}"` +
      (tip ? ` data-tip="${esc(tip)}"` : "") + (extra || "") + "/>";
  }

  function label(y, h, text, sub) {
    let s = `<text class="label" x="8" y="${(y + h / 2 + 4).toFixed(1)}">${esc(text)}</text>`;
    // A tall row has room for its scale under its name; a lane, at the column's right edge.
    if (sub && h >= 30) s = `<text class="label" x="8" y="${(y + h / 2 - 2).toFixed(1)}">${esc(text)}</text><text class="faint" x="8" y="${(y + h / 2 + 11).toFixed(1)}">${esc(sub)}</text>`;
    else if (sub) s += `<text class="faint" x="${LABEL - 6}" y="${(y + h / 2 + 4).toFixed(1)}" text-anchor="end">${esc(sub)}</text>`;
    return s;
  }

  function hostRow(P, row) {
    let s = label(row.y, row.h, row.host.host);
    s += `<g data-lane="host:${esc(row.host.host)}">`;
    for (const span of row.host.spans) {
      if (!P.visible(span.from, span.to)) continue;
      const tip = `${row.host.host}: ${HOST_WORDS[span.state]}\n${secs(span.from)} – ${secs(span.to)}`;
      s += rect(P.clipX(P.x(span.from)), row.y + 3, P.clipX(P.x(span.to)), row.h - 6, HOST[span.state], tip);
    }
    return s + "</g>";
  }

  function leaderRow(P, p, row, hatch) {
    const part = row.part, kafka = p.system === "kafka";
    let s = label(row.y, row.h, kafka ? `${part.tp} leader` : `${part.tp} master`);
    s += `<g data-lane="leader:${esc(part.tp)}">`;
    for (const span of part.leadership) {
      if (!P.visible(span.from, span.to)) continue;
      const x0 = P.clipX(P.x(span.from)), x1 = P.clipX(P.x(span.to));
      const isr = `{${span.isr.join(",")}}`;
      const when = `${secs(span.from)} – ${secs(span.to)}`;
      if (span.leader === null) {
        s += rect(x0, row.y + 3, x1, row.h - 6, "#d62728", `${part.tp} offline: no leader, epoch ${span.epoch}, ISR ${isr}\n${when}`);
        continue;
      }
      let tip = kafka
        ? `broker-${span.leader} leads ${part.tp}, epoch ${span.epoch}, ISR ${isr}\n${when}`
        : `${span.host}, its group's master, holds ${part.tp}\n${when}`;
      if (span.leader_down) {
        tip += kafka
          ? `\nbroker-${span.leader} is down, but the controller names it until its session times out: nobody can write to ${part.tp}`
          : `\n${span.host} is down, and without slaves or controller mode no other broker takes ${part.tp}: nobody can write to it or read it`;
      }
      s += rect(x0, row.y + 3, x1, row.h - 6, leaderColor(p, span), tip, ' fill-opacity="0.9"');
      if (span.leader_down) s += rect(x0, row.y + 3, x1, row.h - 6, `url(#${hatch})`, tip);
      if (x1 - x0 > 70 && !span.leader_down) {
        const text = kafka ? `b${span.leader} e${span.epoch} ISR ${isr}` : span.host;
        s += `<text x="${(x0 + 4).toFixed(1)}" y="${row.y + 13}" style="fill:#fff;pointer-events:none">${esc(text)}</text>`;
      }
    }
    return s + "</g>";
  }

  function isrRow(P, row) {
    const part = row.part;
    const level = (n) => row.y + row.h - (n / Math.max(part.replicas, 1)) * (row.h - 2);
    let s = label(row.y, row.h, "ISR size", `min ${part.min_isr}`);
    s += `<g data-lane="isr:${esc(part.tp)}">`;
    for (const span of part.leadership) {
      if (!P.visible(span.from, span.to)) continue;
      const n = span.isr.length, below = n < part.min_isr;
      let tip = `ISR of ${part.tp}: {${span.isr.join(",")}}, ${n} of ${part.replicas} replicas; min.insync.replicas ${part.min_isr}`;
      if (below) tip += "\nbelow it: acks=all produces fail with NOT_ENOUGH_REPLICAS";
      tip += `\n${secs(span.from)} – ${secs(span.to)}`;
      const top = level(n);
      s += rect(P.clipX(P.x(span.from)), top, P.clipX(P.x(span.to)), row.y + row.h - top, below ? "#f4a3a3" : "#a9cbe6", tip);
    }
    const y = level(part.min_isr).toFixed(1);
    s += `<line x1="${LABEL}" x2="${P.x(view.t1).toFixed(1)}" y1="${y}" y2="${y}" stroke="#d62728" stroke-dasharray="4,3" pointer-events="none"/>`;
    return s + "</g>";
  }

  /// The last point at or before t, by binary search.
  function at(series, t) {
    let lo = 0, hi = series.length;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (series[mid][0] <= t) lo = mid + 1; else hi = mid; }
    return lo > 0 ? series[lo - 1] : null;
  }

  function visiblePoints(series) {
    const out = [];
    const first = at(series, view.t0);
    if (first) out.push([view.t0, first[1]]);
    for (const pt of series) if (pt[0] > view.t0 && pt[0] <= view.t1) out.push(pt);
    if (out.length) out.push([view.t1, out[out.length - 1][1]]);
    return out;
  }

  /// Two step lines of offsets: a partition's LEO and HW (Kafka), a queue's acknowledged
  /// end and consumed offset, or a master's CommitLog end and flushed position (RocketMQ);
  /// a third, the LSO, where a transaction held it below a partition's HW.
  function offsetsRow(P, row) {
    const leo = visiblePoints(row.a), hw = visiblePoints(row.b);
    const lso = row.c ? visiblePoints(row.c) : [];
    const all = leo.concat(hw, lso).map((p) => p[1]);
    let s = label(row.y, row.h, row.name);
    s += `<g data-lane="offsets:${esc(row.lane)}">`;
    if (!all.length) return s + "</g>";
    const lo = Math.min(...all), hi = Math.max(...all, lo + 1);
    const y = (v) => row.y + row.h - 2 - ((v - lo) / (hi - lo)) * (row.h - 4);
    const path = (pts) => pts.map((p, i) => (i ? `H${P.x(p[0]).toFixed(1)}V${y(p[1]).toFixed(1)}` : `M${P.x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`)).join("");
    s += `<text class="faint" x="${LABEL - 6}" y="${row.y + 10}" text-anchor="end">${fmt(hi)}</text>`;
    s += `<text class="faint" x="${LABEL - 6}" y="${row.y + row.h - 2}" text-anchor="end">${fmt(lo)}</text>`;
    s += `<path d="${path(leo)}" fill="none" stroke="#4e79a7" stroke-width="1.5" pointer-events="none"/>`;
    s += `<path d="${path(hw)}" fill="none" stroke="#59a14f" stroke-width="1.5" stroke-dasharray="5,2" pointer-events="none"/>`;
    if (lso.length) s += `<path data-line="lso" d="${path(lso)}" fill="none" stroke="#e15759" stroke-width="1.5" stroke-dasharray="1,2" pointer-events="none"/>`;
    return s + "</g>";
  }

  /// Markers of one lane, gathered where they would overlap, so that a burst reads as one
  /// marker whose tooltip lists them all.
  function markers(P, p, lane, y, h) {
    const groups = [];
    for (const m of p.events) {
      if (m.lane !== lane || m.at < view.t0 || m.at > view.t1) continue;
      const px = P.x(m.at);
      const last = groups[groups.length - 1];
      if (last && px - last.px < MARKER_GAP) last.list.push(m); else groups.push({ px, list: [m] });
    }
    let s = "";
    for (const g of groups) {
      const first = g.list[0];
      const cx = P.x(first.at), cy = y + h / 2, r = g.list.length > 1 ? 6 : 5;
      const lines = g.list.slice(0, MARKERS_LISTED).map((m) => `${secs(m.at)}  ${m.text}`);
      if (g.list.length > MARKERS_LISTED) lines.push(`… and ${g.list.length - MARKERS_LISTED} more`);
      const color = (KIND[first.kind] || ["#555"])[0];
      const d = first.kind === "fault"
        ? `M${cx.toFixed(1)},${(cy + r).toFixed(1)}l${-r},${-2 * r}h${2 * r}z`
        : `M${cx.toFixed(1)},${(cy - r).toFixed(1)}l${r},${r}l${-r},${r}l${-r},${-r}z`;
      s += `<path class="marker" data-kind="${first.kind}" d="${d}" fill="${color}" stroke="#fff" data-tip="${esc(lines.join("\n"))}"/>`;
      if (g.list.length > 1) {
        s += `<text x="${(cx + r + 1).toFixed(1)}" y="${(cy - 2).toFixed(1)}" style="font-size:9px;pointer-events:none">${g.list.length}</text>`;
      }
    }
    return s;
  }

  /// Buckets summed into bars about 3 pixels wide.
  function bins(P, p) {
    const b0 = Math.floor(view.t0 / p.bucket), b1 = Math.min(Math.ceil(view.t1 / p.bucket), p.acked.length);
    const per = Math.max(1, Math.ceil((b1 - b0) / Math.max(1, Math.floor(P.plot / 3))));
    const out = [];
    for (let b = b0 - (b0 % per); b < b1; b += per) out.push({ from: b * p.bucket, to: Math.min(b + per, p.acked.length) * p.bucket, b, per });
    return out;
  }

  /// The top of a bar chart's scale: its tallest bar, unless a burst (the retries after a
  /// failover) would flatten the rest to nothing; then 1.5 × the 95th percentile, and the
  /// taller bars are drawn cut, with a black cap.
  function barTop(values) {
    const busy = values.filter((v) => v > 0).sort((a, b) => a - b);
    if (!busy.length) return 1;
    const max = busy[busy.length - 1], p95 = busy[Math.floor((busy.length - 1) * 0.95)];
    return max > 4 * p95 ? Math.ceil(p95 * 1.5) : max;
  }

  function barsRow(P, row, p, kind) {
    const list = bins(P, p);
    const values = list.map((bin) => {
      if (kind === "lost") return 0;
      const src = kind === "acked" ? p.acked : p.failed;
      let v = 0;
      for (let i = bin.b; i < bin.b + bin.per && i < src.length; i++) v += src[i];
      return v;
    });
    if (kind === "lost" && list.length) {
      const first = list[0].b * p.bucket, width = list[0].per * p.bucket;
      for (const t of p.lost) {
        const i = Math.floor((t - first) / width);
        if (i >= 0 && i < values.length) values[i] += 1;
      }
    }
    const max = kind === "lost" ? Math.max(1, ...values) : barTop(values);
    const cut = values.some((v) => v > max);
    const per = list.length ? list[0].per * p.bucket : p.bucket;
    const name = { acked: "acknowledged", failed: "failed or unknown", lost: "acked, later lost" }[kind];
    const color = { acked: "#2ca02c", failed: "#ff7f0e", lost: "#d62728" }[kind];
    const total = values.reduce((a, b) => a + b, 0);
    let s = label(row.y, row.h, name, total ? `${cut ? "cut at " : "top "}${fmt(max)} per ${per} ms` : "");
    s += `<g data-lane="${kind}">`;
    s += `<line x1="${LABEL}" x2="${P.x(view.t1).toFixed(1)}" y1="${row.y + row.h}" y2="${row.y + row.h}" stroke="#ccc"/>`;
    list.forEach((bin, i) => {
      const v = values[i];
      if (!v) return;
      const h = Math.max((Math.min(v, max) / max) * (row.h - 10), 1.5);
      const x0 = P.clipX(P.x(bin.from)), x1 = P.clipX(P.x(bin.to));
      let tip = kind === "lost"
        ? `${fmt(v)} acknowledged ${v === 1 ? "send" : "sends"}, acknowledged in ${secs(bin.from)} – ${secs(bin.to)}, missing from the final read: lost (the stories below say why)`
        : `${secs(bin.from)} – ${secs(bin.to)}: ${fmt(v)} ${name}`;
      if (v > max) tip += `\n(the bar is cut at ${fmt(max)} so that the steady rate stays readable)`;
      const x2 = Math.max(x1 - 0.6, x0 + 0.8);
      s += rect(x0, row.y + row.h - h, x2, h, color, tip, kind === "lost" ? ' class="marker" data-kind="lost"' : "");
      if (v > max) s += rect(x0, row.y + row.h - h - 3, x2, 3, "#222", tip);
      if (kind === "lost" && x1 - x0 >= 14) {
        s += `<text x="${((x0 + x1) / 2).toFixed(1)}" y="${(row.y + row.h - h - 2).toFixed(1)}" text-anchor="middle" style="font-size:9px;pointer-events:none">${v}</text>`;
      }
    });
    if (kind !== "lost" && !total) {
      s += `<text class="faint" x="${LABEL + 4}" y="${row.y + row.h - 6}">none in view</text>`;
    } else if (kind === "lost" && !p.lost.length) {
      s += `<text class="faint" x="${LABEL + 4}" y="${row.y + row.h - 6}">none lost</text>`;
    } else if (kind === "lost" && !total) {
      s += `<text class="faint" x="${LABEL + 4}" y="${row.y + row.h - 6}">none in view (${fmt(p.lost.length)} in the run)</text>`;
    }
    return s + "</g>";
  }

  function axis(P, height) {
    const step = niceStep(view.t1 - view.t0);
    let s = "";
    for (let t = Math.ceil(view.t0 / step) * step; t <= view.t1; t += step) {
      const x = P.x(t).toFixed(1);
      const text = step >= 1000 ? `${(t / 1000).toFixed(0)} s` : `${(t / 1000).toFixed(step >= 100 ? 1 : step >= 10 ? 2 : 3)} s`;
      s += `<line x1="${x}" x2="${x}" y1="${AXIS - 4}" y2="${height}" stroke="#eee" pointer-events="none"/>`;
      s += `<text x="${x}" y="${AXIS - 8}" text-anchor="middle" class="faint">${text}</text>`;
    }
    return s;
  }

  function renderPanel(p, i, svg) {
    const width = Math.max(svg.clientWidth || svg.parentNode.clientWidth || 1100, 500);
    const P = painter(width);
    const { rows, height } = layout(p);
    const hatch = `down-${i}`, clip = `clip-${i}`;
    let s = `<defs><pattern id="${hatch}" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="3" height="6" fill="rgba(0,0,0,.6)"/></pattern>` +
      `<clipPath id="${clip}"><rect x="${LABEL}" y="0" width="${P.plot}" height="${height}"/></clipPath></defs>`;
    s += axis(P, height);
    if (p.heal < view.t1) {
      const x0 = P.clipX(P.x(p.heal)), x1 = P.clipX(P.x(p.end));
      s += rect(x0, AXIS - 4, x1, height - AXIS + 4, "#f2f2f2", "", ' pointer-events="none"');
      s += `<text class="faint" x="${(x0 + 4).toFixed(1)}" y="${AXIS + 0}" pointer-events="none">heal phase</text>`;
    }
    let body = "", labels = "";
    for (const row of rows) {
      let part = "";
      switch (row.kind) {
        case "host": part = hostRow(P, row) + markers(P, p, row.host.host, row.y, row.h); break;
        case "leader": part = leaderRow(P, p, row, hatch) + markers(P, p, row.part.tp, row.y, row.h); break;
        case "isr": part = isrRow(P, row); break;
        case "offsets": part = offsetsRow(P, row); break;
        case "faults": part = label(row.y, row.h, "faults") + `<g data-lane="faults">` + markers(P, p, "faults", row.y, row.h) + "</g>"; break;
        default: part = barsRow(P, row, p, row.kind);
      }
      // Labels stay outside the clip; shapes inside it.
      const cut = part.indexOf("<g ");
      labels += cut < 0 ? part : part.slice(0, cut);
      body += cut < 0 ? "" : part.slice(cut);
    }
    s += labels + `<g clip-path="url(#${clip})">${body}</g>`;
    s += `<line class="cursor" x1="0" x2="0" y1="${AXIS - 4}" y2="${height}" stroke="#888" visibility="hidden" pointer-events="none"/>`;
    svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
    svg.setAttribute("height", height);
    svg.innerHTML = s;
    svg.dataset.width = width;
  }

  function renderAll() {
    document.querySelectorAll("svg.lanes").forEach((svg, i) => renderPanel(panels[i], i, svg));
    document.getElementById("range").textContent = `${secs(view.t0)} – ${secs(view.t1)} of ${secs(END)}`;
    document.body.dataset.view = `${view.t0},${view.t1}`;
  }

  function legend() {
    const items = [];
    const sw = (color, text) => items.push(`<span><i style="background:${color}"></i>${esc(text)}</span>`);
    const states = new Set(panels.flatMap((p) => p.hosts.flatMap((h) => h.spans.map((s) => s.state))));
    for (const state of Object.keys(HOST)) if (states.has(state)) sw(HOST[state], `host ${state.replace("-", " ")}`);
    const kafka = panels.filter((p) => p.system === "kafka"), rocketmq = panels.filter((p) => p.system !== "kafka");
    const leaders = new Set(kafka.flatMap((p) => p.partitions.flatMap((t) => t.leadership.map((s) => s.leader)).filter((l) => l !== null)));
    [...leaders].sort((a, b) => a - b).forEach((b) => sw(brokerColor(b), `led by broker-${b}`));
    const masters = new Map(rocketmq.flatMap((p) => p.partitions.flatMap((t) => t.leadership.filter((s) => s.host).map((s) => [s.host, leaderColor(p, s)]))));
    [...masters.keys()].sort().forEach((host) => sw(masters.get(host), `held by ${host}`));
    if (panels.some((p) => p.partitions.some((t) => t.leadership.some((s) => s.leader_down)))) {
      sw("repeating-linear-gradient(45deg,#555 0 3px,#ccc 3px 6px)", "leader named but down");
    }
    if (panels.some((p) => p.partitions.some((t) => t.leadership.some((s) => s.leader === null)))) sw("#d62728", "no leader (offline)");
    if (kafka.length) {
      sw("#a9cbe6", "ISR size");
      if (kafka.some((p) => p.partitions.some((t) => t.leadership.some((s) => s.isr.length < t.min_isr)))) sw("#f4a3a3", "ISR below min.insync.replicas");
      sw("#4e79a7", "leader LEO");
      sw("#59a14f", "high watermark");
      if (kafka.some((p) => p.partitions.some((t) => t.lso && t.lso.length))) sw("#e15759", "last stable offset (held by an open transaction)");
    }
    if (rocketmq.length) {
      sw("#4e79a7", "CommitLog end; a queue's acknowledged end");
      sw("#59a14f", "CommitLog flushed; a queue's consumed offset");
    }
    const kinds = new Set(panels.flatMap((p) => p.events.map((m) => m.kind)));
    for (const [kind, [color, text]] of Object.entries(KIND)) if (kinds.has(kind)) sw(color, text);
    document.getElementById("legend").innerHTML = items.join("");
  }

  function stories(p) {
    if (!p.stories.length) return `<p class="summary">The checkers found nothing to explain.</p>`;
    const items = p.stories.map((st) => {
      const why = st.why.length ? `<ol>${st.why.map((w) => `<li>${esc(w)}</li>`).join("")}</ol>` : "";
      return `<li><b>${esc(st.count)}</b>: ${esc(st.text)}${why}</li>`;
    });
    return `<details open><summary>What the checkers found, with how it came about (${p.stories.length} examples)</summary><ul>${items.join("")}</ul></details>`;
  }

  const main = document.getElementById("panels");
  main.innerHTML = panels.map((p, i) =>
    `<section class="panel" data-variant="${esc(p.variant)}"><h2>${esc(p.variant)}</h2><p class="summary">${esc(p.summary)}</p>` +
    `<svg class="lanes" data-panel="${i}" xmlns="http://www.w3.org/2000/svg"></svg>${stories(p)}</section>`).join("");
  legend();
  renderAll();

  const tip = document.getElementById("tip");
  function showTip(text, e) {
    tip.textContent = text;
    tip.style.display = "block";
    const w = tip.offsetWidth, h = tip.offsetHeight;
    tip.style.left = Math.min(e.clientX + 14, window.innerWidth - w - 8) + "px";
    tip.style.top = (e.clientY + 16 + h > window.innerHeight ? e.clientY - h - 10 : e.clientY + 16) + "px";
  }
  /// The time under the mouse in an svg, or null outside the plot.
  function timeAt(svg, e) {
    const box = svg.getBoundingClientRect();
    const width = Number(svg.dataset.width);
    const px = ((e.clientX - box.left) / box.width) * width;
    if (px < LABEL || px > width - PAD) return null;
    return { px, t: view.t0 + ((px - LABEL) / (width - LABEL - PAD)) * (view.t1 - view.t0) };
  }
  function offsetsAt(p, t) {
    const value = (series) => { const pt = at(series, t); return pt ? fmt(pt[1]) : "–"; };
    const logs = p.logs.map((log) => `${log.host} CommitLog: end ${value(log.max)}, flushed ${value(log.flushed)}`);
    return logs.concat(p.partitions.map((part) => p.system === "kafka"
      ? `${part.tp}: LEO ${value(part.leo)}, HW ${value(part.hw)}` + (part.lso && part.lso.length ? `, LSO ${value(part.lso)}` : "")
      : `${part.tp}: acknowledged end ${value(part.leo)}, consumed ${value(part.hw)}`));
  }

  let drag = null;
  main.addEventListener("mousemove", (e) => {
    const svg = e.target.closest && e.target.closest("svg.lanes");
    document.querySelectorAll("line.cursor").forEach((l) => l.setAttribute("visibility", "hidden"));
    if (!svg || drag) { tip.style.display = "none"; return; }
    const here = timeAt(svg, e);
    if (here) {
      const cursor = svg.querySelector("line.cursor");
      cursor.setAttribute("x1", here.px); cursor.setAttribute("x2", here.px);
      cursor.setAttribute("visibility", "visible");
    }
    const shape = e.target.closest("[data-tip]");
    if (shape && shape.dataset.tip) { showTip(shape.dataset.tip, e); return; }
    if (here) {
      const p = panels[Number(svg.dataset.panel)];
      showTip([`t = ${secs(here.t)}`].concat(offsetsAt(p, here.t)).join("\n"), e);
      return;
    }
    tip.style.display = "none";
  });
  main.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  main.addEventListener("wheel", (e) => {
    const svg = e.target.closest && e.target.closest("svg.lanes");
    if (!svg) return;
    const here = timeAt(svg, e);
    if (!here) return;
    e.preventDefault();
    const factor = Math.exp(e.deltaY * 0.0015);
    const span = view.t1 - view.t0, next = Math.min(Math.max(span * factor, MIN_SPAN), END);
    const t0 = here.t - ((here.t - view.t0) * next) / span;
    setView(t0, t0 + next);
  }, { passive: false });
  main.addEventListener("mousedown", (e) => {
    const svg = e.target.closest && e.target.closest("svg.lanes");
    if (!svg || e.button !== 0) return;
    drag = { x: e.clientX, view: { ...view }, scale: (view.t1 - view.t0) / (svg.getBoundingClientRect().width * (1 - (LABEL + PAD) / Number(svg.dataset.width))) };
    svg.classList.add("dragging");
    e.preventDefault();
  });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const dt = (e.clientX - drag.x) * drag.scale;
    setView(drag.view.t0 - dt, drag.view.t1 - dt);
  });
  window.addEventListener("mouseup", () => {
    drag = null;
    document.querySelectorAll("svg.dragging").forEach((s) => s.classList.remove("dragging"));
  });
  main.addEventListener("dblclick", () => setView(0, END));
  const zoom = (factor) => {
    const mid = (view.t0 + view.t1) / 2, span = (view.t1 - view.t0) * factor;
    setView(mid - span / 2, mid + span / 2);
  };
  document.getElementById("zoom-in").addEventListener("click", () => zoom(0.5));
  document.getElementById("zoom-out").addEventListener("click", () => zoom(2));
  document.getElementById("zoom-reset").addEventListener("click", () => setView(0, END));
  window.addEventListener("resize", renderAll);

  window.timeline = { panels, view: () => ({ ...view }), setView };
  document.body.dataset.ready = "1";
})();
