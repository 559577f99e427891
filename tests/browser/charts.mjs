// Opens SVG charts in headless Chromium and fails when any text runs past the canvas
// (a clipped value label) or the chart draws no bars.
//
//   node tests/browser/charts.mjs BROWSER CHART.svg...
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [browser, ...charts] = process.argv.slice(2);
if (!browser || !charts.length) {
  console.error("usage: charts.mjs BROWSER CHART.svg...");
  process.exit(2);
}
const profile = mkdtempSync(join(tmpdir(), "hightide-browser-"));
const chrome = spawn(browser, [
  "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
  "--no-first-run", `--user-data-dir=${profile}`,
], { stdio: ["ignore", "ignore", "ignore", "pipe", "pipe"] });

let nextId = 1;
const waiting = new Map();
const listeners = [];
let buffer = Buffer.alloc(0);
chrome.stdio[4].on("data", (chunk) => {
  buffer = Buffer.concat([buffer, chunk]);
  let end;
  while ((end = buffer.indexOf(0)) >= 0) {
    const message = JSON.parse(buffer.subarray(0, end).toString("utf8"));
    buffer = buffer.subarray(end + 1);
    const wait = message.id && waiting.get(message.id);
    if (wait) {
      waiting.delete(message.id);
      if (message.error) wait.fail(new Error(message.error.message)); else wait.ok(message.result);
    } else {
      for (const listen of listeners) listen(message);
    }
  }
});
function send(method, params = {}, sessionId) {
  const id = nextId++;
  chrome.stdio[3].write(JSON.stringify({ id, method, params, sessionId }) + "\0");
  return new Promise((ok, fail) => waiting.set(id, { ok, fail }));
}

const problems = [];
async function main() {
  const { targetId } = await send("Target.createTarget", { url: "about:blank" });
  const { sessionId } = await send("Target.attachToTarget", { targetId, flatten: true });
  const call = (method, params) => send(method, params, sessionId);
  await call("Page.enable");
  for (const chart of charts) {
    const loaded = new Promise((ok) => listeners.push((m) => { if (m.method === "Page.loadEventFired") ok(); }));
    await call("Page.navigate", { url: pathToFileURL(resolve(chart)).href });
    await loaded;
    listeners.length = 0;
    const r = await call("Runtime.evaluate", {
      returnByValue: true,
      expression: `(() => {
        const svg = document.documentElement;
        const width = Number(svg.getAttribute('width')), height = Number(svg.getAttribute('height'));
        const outside = [...svg.querySelectorAll('text')].filter(t => {
          const b = t.getBBox();
          return b.x < 0 || b.y < 0 || b.x + b.width > width || b.y + b.height > height;
        }).map(t => t.textContent);
        return { texts: svg.querySelectorAll('text').length, bars: svg.querySelectorAll('rect[rx]').length, outside };
      })()`,
    });
    const { texts, bars, outside } = r.result.value;
    if (!bars) problems.push(`${chart}: no bars`);
    for (const text of outside) problems.push(`${chart}: "${text}" runs past the canvas`);
    console.log(`${chart}: ${texts} texts inside the canvas: ${texts - outside.length}; ${bars} bars`);
  }
}
function finish() {
  chrome.kill();
  rmSync(profile, { recursive: true, force: true });
  for (const p of problems) console.error(p);
  process.exit(problems.length ? 1 : 0);
}
setTimeout(() => { problems.push("timed out after 60 s"); finish(); }, 60_000).unref();
main().then(finish, (e) => { problems.push(String(e.stack || e)); finish(); });
