// Opens a timeline page in headless Chromium over the DevTools protocol (through a pipe, so
// nothing listens on a port) and fails on any console error or uncaught exception, on a
// missing lane, or on a tooltip that does not appear; it zooms, pans and saves a screenshot.
//
//   node tests/browser/timeline.mjs BROWSER PAGE.html SCREENSHOT.png PANELS [kafka|rocketmq]
import { writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { launch } from "./cdp.mjs";

const [browser, page, screenshot, panelsWanted, system = "kafka"] = process.argv.slice(2);
const kafka = system === "kafka";
if (!browser || !page || !screenshot || !panelsWanted) {
  console.error("usage: timeline.mjs BROWSER PAGE.html SCREENSHOT.png PANELS");
  process.exit(2);
}
const { chrome, send, listeners, close, log } = launch(browser, ["--hide-scrollbars", "--window-size=1400,1000"]);

const problems = [];
const checks = [];
function check(ok, what) {
  checks.push(what);
  if (!ok) problems.push(`failed: ${what}`);
}

async function main() {
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
  const call = (method, params) => send(method, params, sessionId);
  listeners.push((m) => {
    if (m.sessionId !== sessionId) return;
    if (m.method === "Runtime.exceptionThrown") {
      const d = m.params.exceptionDetails;
      problems.push(`uncaught: ${d.exception ? d.exception.description : d.text} at ${d.url}:${d.lineNumber}`);
    } else if (m.method === "Runtime.consoleAPICalled" && (m.params.type === "error" || m.params.type === "warning")) {
      problems.push(`console ${m.params.type}: ${m.params.args.map((a) => a.value ?? a.description).join(" ")}`);
    } else if (m.method === "Log.entryAdded" && m.params.entry.level === "error") {
      problems.push(`log error: ${m.params.entry.text}`);
    }
  });
  await call("Runtime.enable");
  await call("Log.enable");
  await call("Page.enable");
  await call("Emulation.setDeviceMetricsOverride", { width: 1400, height: 1000, deviceScaleFactor: 1, mobile: false });
  const loaded = new Promise((ok) => listeners.push((m) => { if (m.sessionId === sessionId && m.method === "Page.loadEventFired") ok(); }));
  await call("Page.navigate", { url: pathToFileURL(resolve(page)).href });
  await loaded;
  const evaluate = async (expression) => {
    const r = await call("Runtime.evaluate", { expression, returnByValue: true, awaitPromise: true });
    if (r.exceptionDetails) throw new Error(`evaluating ${expression}: ${r.exceptionDetails.exception?.description}`);
    return r.result.value;
  };
  const mouse = (type, x, y, extra = {}) => call("Input.dispatchMouseEvent", { type, x, y, button: "none", ...extra });

  check(await evaluate("document.body.dataset.ready") === "1", "the page's script ran to the end");
  const panels = await evaluate("document.querySelectorAll('section.panel').length");
  check(panels === Number(panelsWanted), `${panelsWanted} panels (found ${panels})`);
  const lanes = await evaluate(`(() => {
    const first = document.querySelector('section.panel');
    const kinds = {};
    for (const g of first.querySelectorAll('[data-lane]')) {
      const kind = g.dataset.lane.split(':')[0];
      kinds[kind] = (kinds[kind] || 0) + g.querySelectorAll('rect, path').length;
    }
    return kinds;
  })()`);
  // RocketMQ's queues have no ISR: a group's master alone holds them.
  const isr = kafka ? ["isr"] : [];
  for (const kind of ["host", "leader", ...isr, "offsets", "faults", "acked", "failed", "lost"]) {
    check(kind in lanes, `a ${kind} lane`);
  }
  if (!kafka) check(!("isr" in lanes), "no ISR lane");
  for (const kind of ["host", "leader", ...isr, "offsets", "acked"]) {
    check(lanes[kind] > 0, `the ${kind} lanes draw something (${lanes[kind] || 0} shapes)`);
  }
  if (!kafka) {
    const logs = await evaluate("document.querySelectorAll('[data-lane^=\"offsets:log:\"] path').length");
    check(logs > 0, `a master's CommitLog lane draws its lines (${logs} paths)`);
  }
  const kinds = await evaluate("[...new Set([...document.querySelectorAll('.marker')].map(m => m.dataset.kind))].sort()");
  check(kinds.includes("fault"), `fault markers (kinds drawn: ${kinds.join(", ")})`);
  check(kinds.length >= (kafka ? 3 : 2), `markers of at least ${kafka ? "three" : "two"} kinds`);
  const legend = await evaluate("document.getElementById('legend').textContent");
  check(/host up/.test(legend) && /fault/.test(legend), `a legend (${legend.slice(0, 80)}…)`);

  // Hover every kind of marker once: its tooltip must show, with the marker's own words.
  const targets = await evaluate(`[...new Set([...document.querySelectorAll('.marker')].map(m => m.dataset.kind))].map(kind => {
    const m = document.querySelector('.marker[data-kind="' + kind + '"]');
    m.scrollIntoView({ block: 'center' });
    const r = m.getBoundingClientRect();
    return { kind, x: r.left + r.width / 2, y: r.top + r.height / 2, tip: m.dataset.tip };
  })`);
  for (const t of targets) {
    await evaluate(`document.querySelector('.marker[data-kind="${t.kind}"]').scrollIntoView({ block: 'center' })`);
    const box = await evaluate(`(() => { const r = document.querySelector('.marker[data-kind="${t.kind}"]').getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; })()`);
    await mouse("mouseMoved", box[0], box[1]);
    const shown = await evaluate("(() => { const t = document.getElementById('tip'); return t.style.display === 'block' ? t.textContent : null; })()");
    check(shown === t.tip, `hovering a ${t.kind} marker shows its tooltip (${(shown || "nothing").split("\n")[0].slice(0, 90)})`);
  }
  // Hover a leader lane: the tooltip names the leader, its epoch and the ISR.
  await evaluate("window.scrollTo(0, 0)");
  const leader = await evaluate(`(() => {
    for (const rect of document.querySelectorAll('[data-lane^="leader"] rect')) {
      const r = rect.getBoundingClientRect();
      for (let x = r.left + 1; x < r.right; x += 4) {
        if (document.elementFromPoint(x, r.top + r.height / 2) === rect) return [x, r.top + r.height / 2];
      }
    }
    return [0, 0];
  })()`);
  await mouse("mouseMoved", leader[0], leader[1]);
  const leaderTip = await evaluate("document.getElementById('tip').textContent");
  const named = kafka ? /leads .*, epoch \d+, ISR \{/ : /broker-[a-z]-0, its group's master, holds /;
  check(named.test(leaderTip) || /offline/.test(leaderTip), `the leader lane's tooltip (${leaderTip.split("\n")[0]})`);

  // Zoom in with the wheel over the middle of the first panel, then drag to pan.
  const before = await evaluate("window.timeline.view()");
  const plot = await evaluate(`(() => { const r = document.querySelector('svg.lanes').getBoundingClientRect(); return [r.left + r.width * 0.6, r.top + 30]; })()`);
  await mouse("mouseWheel", plot[0], plot[1], { deltaX: 0, deltaY: -600 });
  const zoomed = await evaluate("window.timeline.view()");
  check(zoomed.t1 - zoomed.t0 < (before.t1 - before.t0) / 2, `the wheel zooms in (${Math.round(before.t1 - before.t0)} ms → ${Math.round(zoomed.t1 - zoomed.t0)} ms)`);
  await mouse("mousePressed", plot[0], plot[1], { button: "left", clickCount: 1 });
  await mouse("mouseMoved", plot[0] - 200, plot[1], { button: "left" });
  await mouse("mouseReleased", plot[0] - 200, plot[1], { button: "left", clickCount: 1 });
  const panned = await evaluate("window.timeline.view()");
  check(panned.t0 > zoomed.t0 && Math.abs((panned.t1 - panned.t0) - (zoomed.t1 - zoomed.t0)) < 1, `dragging pans (${Math.round(zoomed.t0)} → ${Math.round(panned.t0)} ms)`);
  const axisText = await evaluate("[...document.querySelector('svg.lanes').querySelectorAll('text.faint')].map(t => t.textContent).join(' ')");
  check(/\d s/.test(axisText), "the time axis is labelled");
  await evaluate("window.timeline.setView(0, Infinity)");

  // The screenshot of the whole page, at the zoom a person first sees.
  const height = await evaluate("document.documentElement.scrollHeight");
  await call("Emulation.setDeviceMetricsOverride", { width: 1400, height: Math.min(height, 4000), deviceScaleFactor: 1, mobile: false });
  const shot = await call("Page.captureScreenshot", { format: "png", captureBeyondViewport: true });
  writeFileSync(screenshot, Buffer.from(shot.data, "base64"));
  await new Promise((ok) => setTimeout(ok, 100));
}

const timeout = setTimeout(() => { problems.push("timed out after 60 s"); finish(); }, 60_000);
function finish() {
  clearTimeout(timeout);
  close();
  for (const what of checks) console.log(`ok? ${problems.some((p) => p === `failed: ${what}`) ? "NO " : "yes"} ${what}`);
  if (problems.length) {
    for (const p of problems) console.error(p);
    if (log().trim()) console.error(`browser stderr:\n${log().trim().slice(-2000)}`);
    process.exit(1);
  }
  console.log(`timeline page: ${checks.length} checks passed, no console errors; screenshot ${screenshot}`);
  process.exit(0);
}
chrome.on("error", (e) => { problems.push(`cannot start ${browser}: ${e.message}`); finish(); });
main().then(finish, (e) => { problems.push(String(e.stack || e)); finish(); });
