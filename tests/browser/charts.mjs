// Opens SVG charts in headless Chromium and fails when any text runs past the canvas
// (a clipped value label) or the chart draws no cells.
//
//   node tests/browser/charts.mjs BROWSER CHART.svg...
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { launch } from "./cdp.mjs";

const [browser, ...charts] = process.argv.slice(2);
if (!browser || !charts.length) {
  console.error("usage: charts.mjs BROWSER CHART.svg...");
  process.exit(2);
}
const { send, listeners, close } = launch(browser);

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
        return { texts: svg.querySelectorAll('text').length, cells: svg.querySelectorAll('rect[rx]').length, outside };
      })()`,
    });
    const { texts, cells, outside } = r.result.value;
    if (!cells) problems.push(`${chart}: no cells`);
    for (const text of outside) problems.push(`${chart}: "${text}" runs past the canvas`);
    console.log(`${chart}: ${texts} texts inside the canvas: ${texts - outside.length}; ${cells} cells`);
  }
}
function finish() {
  close();
  for (const p of problems) console.error(p);
  process.exit(problems.length ? 1 : 0);
}
setTimeout(() => { problems.push("timed out after 60 s"); finish(); }, 60_000).unref();
main().then(finish, (e) => { problems.push(String(e.stack || e)); finish(); });
