// A DevTools-protocol client for headless Chromium over a pipe (--remote-debugging-pipe:
// messages are NUL-terminated JSON on fds 3 and 4), so nothing listens on a port.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/// Start `browser`; `send(method, params, sessionId)` resolves with the result, and each
/// event goes to every function in `listeners`. `close()` ends the browser.
export function launch(browser, args = []) {
  const profile = mkdtempSync(join(tmpdir(), "hightide-browser-"));
  const chrome = spawn(browser, [
    "--headless", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
    "--no-first-run", `--user-data-dir=${profile}`, ...args,
  ], { stdio: ["ignore", "ignore", "pipe", "pipe", "pipe"] });
  let log = "";
  chrome.stderr.on("data", (d) => { log += d; });
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
        if (message.error) wait.fail(new Error(`${message.error.message} (${message.error.code})`)); else wait.ok(message.result);
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
  function close() {
    chrome.kill();
    rmSync(profile, { recursive: true, force: true });
  }
  return { chrome, send, listeners, close, log: () => log };
}
