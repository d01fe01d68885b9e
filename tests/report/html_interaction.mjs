// node --experimental-websocket tests/report/html_interaction.mjs PAGE.html PROFILE_DIR
// Drives headless Chromium through the DevTools protocol (on the loopback interface only) the way
// a person uses the picture page: hovers a forward block and reads the details it shows, zooms
// with the wheel, drags to pan. Prints what it saw; exits 1 when the page did not react.
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

const [page, profile] = process.argv.slice(2);
const chromium = spawn("chromium", ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,900",
  "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", `--user-data-dir=${profile}`, `file://${page}`],
  { stdio: "ignore" });
const deadline = setTimeout(() => { console.log("FAIL: timed out"); chromium.kill(); process.exit(1); }, 60000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function fail(message) {
  console.log("FAIL: " + message);
  chromium.kill();
  process.exit(1);
}

let port = null;
for (let i = 0; i < 200 && port === null; i++) {
  const file = join(profile, "DevToolsActivePort");
  if (existsSync(file)) port = readFileSync(file, "utf8").split("\n")[0];
  else await sleep(100);
}
if (!port) fail("chromium did not open its DevTools port");
let target = null;
for (let i = 0; i < 100 && !target; i++) {
  const list = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
  target = list.find((t) => t.type === "page" && t.url.startsWith("file://"));
  if (!target) await sleep(100);
}
if (!target) fail("no page");

const ws = new WebSocket(target.webSocketDebuggerUrl);
await new Promise((r) => ws.addEventListener("open", r));
let next = 1;
const waiting = new Map();
ws.addEventListener("message", (ev) => {
  const msg = JSON.parse(ev.data);
  if (msg.id && waiting.has(msg.id)) { waiting.get(msg.id)(msg); waiting.delete(msg.id); }
});
const send = (method, params = {}) => new Promise((resolve) => {
  const id = next++;
  waiting.set(id, resolve);
  ws.send(JSON.stringify({ id, method, params }));
});
const evaluate = async (expression) => (await send("Runtime.evaluate", { expression, returnByValue: true })).result.result.value;
const mouse = (type, x, y, extra = {}) => send("Input.dispatchMouseEvent", { type, x, y, ...extra });

for (let i = 0; i < 100 && !(await evaluate("document.querySelectorAll('#chart g.lane').length")); i++) await sleep(100);

// Hover: the first forward block of the first lane that shows a micro-batch number.
const box = await evaluate(`(() => {
  const texts = [...document.querySelectorAll('#chart g.lane g.row text')];
  const t = texts.find((e) => e.textContent === '2');
  const r = (t || document.querySelector('#chart rect[data-b]')).getBoundingClientRect();
  return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
})()`);
await mouse("mouseMoved", box.x, box.y - 4);
await sleep(100);
const tip = await evaluate("[getComputedStyle(document.getElementById('tip')).display, document.getElementById('tip').textContent]");
console.log("hover shows: " + JSON.stringify(tip[1]));
if (tip[0] !== "block" || !/micro-batch 2/.test(tip[1]) || !/forward/.test(tip[1])) fail("hovering a block shows no details");

// Zoom in with the wheel, then pan by dragging.
const view0 = await evaluate("document.getElementById('view').textContent");
await mouse("mouseWheel", 700, box.y, { deltaX: 0, deltaY: -300 });
await sleep(100);
const view1 = await evaluate("document.getElementById('view').textContent");
await mouse("mousePressed", 700, box.y, { button: "left", clickCount: 1 });
await mouse("mouseMoved", 500, box.y, { button: "left" });
await mouse("mouseReleased", 500, box.y, { button: "left", clickCount: 1 });
await sleep(100);
const view2 = await evaluate("document.getElementById('view').textContent");
console.log(`views: "${view0}" -> wheel "${view1}" -> drag "${view2}"`);
if (view1 === view0 || view2 === view1) fail("wheel or drag did not change the view");

clearTimeout(deadline);
ws.close();
chromium.kill();
console.log("hover, zoom and pan work");
