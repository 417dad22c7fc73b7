// profconv's outputs opened in their real viewers, in Debian's Chromium
// driven headless by puppeteer-core:
//  - speedscope's own app (the npm package's release build, served here on
//    127.0.0.1) imports each .speedscope.json: the profile names, the known
//    frame in its Sandwich table, no error dialog or page error;
//  - each flamegraph .svg: its frames, and inferno's search (the Search
//    button, the prompt answered) highlights the known function;
//  - `go tool pprof -http` serves each .pb.gz, and its flame graph view
//    (/ui/flamegraph) draws the known frame;
//  - each flamegraph .svg made with an option (--inverted, --colors, --title,
//    --flamechart, --reverse, --minwidth, --width): its frames and the
//    option's effect on the drawing.
//
// Usage: node run.mjs MANIFEST.json — the manifest (written by
// tests/browser.rs) names the files and what each must show:
//   { "dir": "/abs/outputs", "chromium": "/usr/bin/chromium", "go": "go",
//     "screenshots": "/abs/dir" | null,
//     "speedscope": [{ "file": "x.speedscope.json", "profiles": ["cpu (nanoseconds)", ...],
//                      "active": "cpu (nanoseconds)", "frame": "main" }],
//     "svg": [{ "file": "x.svg", "frames": ["main", ...], "search": "leaf_heavy" }],
//     "pprof": [{ "file": "x.pb.gz", "frame": "main" }],
//     "svg_options": [{ "file": "x.svg", "option": "--inverted", "frames": ["main", ...],
//                       and any of: "title", "subtitle" (the texts shown),
//                       "root_at": "top" | "bottom" (where the `all` frame is),
//                       "roots": [names drawn next to `all`],
//                       "left_of": [a, b] (a's frame left of b's), "width": pixels
//                       (the file's <svg width>), "min_percent" (no narrower frame),
//                       "absent": [names], "palette": "mem" | "hot",
//                       "count_name": "bytes" }] }
// Prints the browser's version and WebGL renderer (`# browser: …`), one line
// per check, and closes with "N passed, M failed"; exits 1 when a check
// failed. A browser without WebGL fails its own check first, and the
// speedscope checks then name that cause instead of speedscope's error screen.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import puppeteer from 'puppeteer-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const manifest = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const speedscopeDir = path.join(here, 'node_modules/speedscope/dist/release');
const TIMEOUT = 30_000;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

const TYPES = {
  '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.svg': 'image/svg+xml', '.wasm': 'application/wasm',
  '.png': 'image/png', '.woff2': 'font/woff2',
};

/// Serves speedscope's build at / and the outputs at /files/, on 127.0.0.1.
function serve() {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    let pathname = decodeURIComponent(url.pathname);
    let root = speedscopeDir;
    if (pathname.startsWith('/files/')) {
      root = manifest.dir;
      pathname = pathname.slice('/files'.length);
    }
    if (pathname === '/') pathname = '/index.html';
    const file = path.join(root, path.normalize(pathname));
    if (!file.startsWith(root + path.sep)) {
      res.writeHead(403).end();
      return;
    }
    fs.readFile(file, (err, data) => {
      if (err) {
        res.writeHead(404).end();
        return;
      }
      const type = TYPES[path.extname(file)] || 'application/octet-stream';
      res.writeHead(200, { 'content-type': type }).end(data);
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

/// A free port on 127.0.0.1 (for go tool pprof).
function freePort() {
  return new Promise((resolve) => {
    const s = http.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

let passed = 0;
let failed = 0;
async function check(name, body) {
  try {
    await body();
    passed++;
    console.log(`ok - ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok - ${name}: ${e && e.message ? e.message : e}`);
  }
}

function assert(cond, message) {
  if (!cond) throw new Error(message);
}

async function shot(page, name) {
  if (manifest.screenshots) {
    await page.screenshot({ path: path.join(manifest.screenshots, `${name}.png`) });
  }
}

/// A page that records dialogs (answering prompts with `answer`) and page errors.
async function newPage(browser, answer) {
  const page = await browser.newPage();
  await page.setViewport({ width: 1200, height: 700 });
  page.problems = [];
  page.console = [];
  page.on('pageerror', (e) => page.problems.push(`page error: ${e.message}`));
  page.on('console', (m) => page.console.push(m.text()));
  page.on('dialog', async (d) => {
    if (d.type() === 'prompt' && answer !== undefined) {
      await d.accept(answer);
    } else {
      page.problems.push(`${d.type()} dialog: ${d.message()}`);
      await d.dismiss();
    }
  });
  return page;
}

/// In the page: whether an element's own text (not its children's) is `text`
/// and it is drawn.
function shows(text) {
  return [...document.querySelectorAll('body *')].some((e) => {
    const own = [...e.childNodes]
      .filter((n) => n.nodeType === Node.TEXT_NODE)
      .map((n) => n.textContent)
      .join('')
      .trim();
    const box = e.getBoundingClientRect();
    return own === text && box.width > 0 && box.height > 0;
  });
}

/// The toolbar title of speedscope: `name (i/n)`, or `name` alone.
async function speedscopeTitle(page) {
  return page.evaluate(() => {
    const lines = document.body.innerText.split('\n').map((l) => l.trim());
    return lines.find((l) => /\(\d+\/\d+\)$/.test(l)) || null;
  });
}

async function checkSpeedscope(browser, base, item) {
  const page = await newPage(browser);
  const profileURL = `${base}/files/${encodeURIComponent(item.file)}`;
  await page.goto(`${base}/index.html#profileURL=${encodeURIComponent(profileURL)}`);
  const multi = item.profiles.length > 1;
  const active = multi
    ? `${item.active} (${item.profiles.indexOf(item.active) + 1}/${item.profiles.length})`
    : item.active;
  await page
    .waitForFunction((t) => document.body.innerText.includes(t), { timeout: TIMEOUT }, active)
    .catch(() => {});
  const stem = item.file.replace(/[^A-Za-z0-9]+/g, '_');
  await shot(page, `speedscope_${stem}`);
  assert(page.problems.length === 0, page.problems.join('; '));
  assert(
    page.console.some((m) => m.includes('Importing as speedscope json file')),
    `speedscope did not import it as its own format (console: ${page.console.join(' | ')})`,
  );
  const body = await page.evaluate(() => document.body.innerText);
  const webgl = page.console.filter((m) => /webgl/i.test(m));
  assert(
    webgl.length === 0 || !body.includes('Something went wrong'),
    `the browser has no WebGL, which speedscope draws with: a set-up problem, not the file's ` +
      `(Chromium needs --use-angle=swiftshader --enable-unsafe-swiftshader without a GPU); ` +
      `console: ${webgl.join(' | ')}`,
  );
  assert(!body.includes('Something went wrong'), `speedscope's error screen: ${body.slice(0, 300)}`);
  assert(body.includes(active), `toolbar lacks "${active}": ${body.slice(0, 300)}`);
  // Every profile, in order: speedscope's "p" key (previous profile) back to
  // the first, then "n" (next) through all; neither wraps around.
  if (multi) {
    for (let i = 0; i < item.profiles.length; i++) {
      await page.keyboard.press('p');
      await sleep(100);
    }
    const seen = [];
    for (let i = 0; i < item.profiles.length; i++) {
      seen.push((await speedscopeTitle(page)).replace(/ \(\d+\/\d+\)$/, ''));
      await page.keyboard.press('n');
      await sleep(150);
    }
    assert(
      JSON.stringify(seen) === JSON.stringify(item.profiles),
      `profiles shown ${JSON.stringify(seen)}, expected ${JSON.stringify(item.profiles)}`,
    );
  }
  // The Sandwich view lists functions in a DOM table.
  await page.keyboard.press('3');
  await page.waitForFunction(shows, { timeout: TIMEOUT }, item.frame).catch(() => {});
  await shot(page, `speedscope_${stem}_sandwich`);
  const has = await page.evaluate(shows, item.frame);
  assert(has, `the Sandwich table lacks ${item.frame}`);
  assert(page.problems.length === 0, page.problems.join('; '));
  await page.close();
}

async function checkSvg(browser, base, item) {
  const page = await newPage(browser, item.search);
  await page.goto(`${base}/files/${encodeURIComponent(item.file)}`);
  await page.waitForSelector('#frames', { timeout: TIMEOUT });
  const titles = await page.evaluate(() =>
    [...document.querySelectorAll('#frames > g > title')].map((t) => t.textContent));
  assert(titles.length > 0, 'no frames');
  for (const f of item.frames) {
    assert(titles.some((t) => t.startsWith(`${f} (`)), `no frame ${f} among ${titles.length}`);
  }
  // inferno's own search: the Search button opens a prompt (answered by newPage).
  await page.click('#search');
  await sleep(300);
  const result = await page.evaluate(() => {
    const color = window.searchcolor;
    const hits = [...document.querySelectorAll('#frames > g')]
      .filter((g) => g.querySelector('rect').getAttribute('fill') === color)
      .map((g) => g.querySelector('title').textContent);
    return { hits, matched: document.getElementById('matched').textContent, color };
  });
  const stem = item.file.replace(/[^A-Za-z0-9]+/g, '_');
  await shot(page, `svg_${stem}_search`);
  assert(result.hits.length > 0, `searching ${item.search} highlighted nothing`);
  assert(
    result.hits.every((t) => new RegExp(item.search).test(t)),
    `highlighted frames that do not match: ${result.hits.join(', ')}`,
  );
  assert(/Matched: [\d.]+%/.test(result.matched), `no "Matched:" line: ${result.matched}`);
  assert(page.problems.length === 0, page.problems.join('; '));
  await page.close();
}

/// The frames of the open flamegraph: name, count text, percentage, rect
/// geometry (x and width in percent, y in pixels) and fill.
function framesOf() {
  return [...document.querySelectorAll('#frames > g')].map((g) => {
    const title = g.querySelector('title').textContent;
    const rect = g.querySelector('rect');
    const m = /^(.*) \((.*), ([\d.]+)%\)$/.exec(title) || [title, title, '', 'NaN'];
    return {
      name: m[1], count: m[2], percent: parseFloat(m[3]),
      x: parseFloat(rect.getAttribute('x')), y: parseFloat(rect.getAttribute('y')),
      fill: rect.getAttribute('fill'),
    };
  });
}

/// Checks one option's flamegraph (see the manifest's "svg_options").
async function checkSvgOption(browser, base, item) {
  const page = await newPage(browser);
  const url = `${base}/files/${encodeURIComponent(item.file)}`;
  await page.goto(url);
  await page.waitForSelector('#frames', { timeout: TIMEOUT });
  await shot(page, `svg_option_${item.file.replace(/[^A-Za-z0-9]+/g, '_')}`);
  const frames = await page.evaluate(framesOf);
  const named = (n) => frames.filter((f) => f.name === n);
  for (const f of item.frames) assert(named(f).length > 0, `no frame ${f} among ${frames.length}`);
  const text = (id) => page.evaluate((i) => document.getElementById(i)?.textContent ?? null, id);
  if (item.title !== undefined) assert((await text('title')) === item.title, `title is ${await text('title')}`);
  if (item.subtitle !== undefined) {
    assert((await text('subtitle')) === item.subtitle, `subtitle is ${await text('subtitle')}`);
  }
  const all = named('all')[0];
  const others = frames.filter((f) => f !== all);
  if (item.root_at) {
    const top = others.every((f) => all.y < f.y);
    const bottom = others.every((f) => all.y > f.y);
    assert(item.root_at === 'top' ? top : bottom, `the root frame is not at the ${item.root_at} (y ${all.y})`);
  }
  if (item.roots) {
    const nearest = Math.min(...others.map((f) => Math.abs(f.y - all.y)));
    const roots = others.filter((f) => Math.abs(f.y - all.y) === nearest).map((f) => f.name);
    for (const r of item.roots) assert(roots.includes(r), `${r} is not a root: ${roots.join(', ')}`);
  }
  if (item.left_of) {
    const [a, b] = item.left_of.map((n) => named(n)[0]);
    assert(a && b && a.x < b.x, `${item.left_of[0]} is not left of ${item.left_of[1]}`);
  }
  if (item.width !== undefined) {
    // inferno's script drops the width attribute to fit the window: read the file.
    const width = await page.evaluate(async (u) => {
      const svg = new DOMParser().parseFromString(await (await fetch(u)).text(), 'image/svg+xml');
      return svg.documentElement.getAttribute('width');
    }, url);
    assert(width === String(item.width), `width ${width}, expected ${item.width}`);
  }
  if (item.min_percent !== undefined) {
    const narrow = frames.filter((f) => f.percent < item.min_percent);
    assert(narrow.length === 0, `frames below ${item.min_percent}%: ${narrow.map((f) => f.name).join(', ')}`);
  }
  for (const n of item.absent || []) assert(named(n).length === 0, `frame ${n} is drawn`);
  if (item.palette) {
    // mem is green-blue (no red); hot is red-orange.
    const red = (f) => parseInt(/rgb\((\d+)/.exec(f.fill)[1], 10);
    const ok = item.palette === 'mem' ? (f) => red(f) === 0 : (f) => red(f) >= 200;
    const off = frames.filter((f) => !ok(f));
    assert(off.length === 0, `not in the ${item.palette} palette: ${off.map((f) => `${f.name} ${f.fill}`).join(', ')}`);
  }
  if (item.count_name) {
    const bad = frames.filter((f) => !f.count.endsWith(` ${item.count_name}`));
    assert(bad.length === 0, `counts not in ${item.count_name}: ${bad.map((f) => f.count).join(', ')}`);
  }
  assert(page.problems.length === 0, page.problems.join('; '));
  await page.close();
}

async function waitForHttp(url, child) {
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`go tool pprof exited with ${child.exitCode}`);
    try {
      const r = await fetch(url);
      if (r.ok) return;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  throw new Error(`${url} did not answer`);
}

async function checkPprof(browser, item) {
  const port = await freePort();
  const home = fs.mkdtempSync(path.join(os.tmpdir(), 'profconv-pprof-home-'));
  const child = spawn(
    manifest.go,
    ['tool', 'pprof', `-http=127.0.0.1:${port}`, '-no_browser', path.join(manifest.dir, item.file)],
    { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, HOME: home, PPROF_TMPDIR: home } },
  );
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  try {
    const base = `http://127.0.0.1:${port}`;
    await waitForHttp(`${base}/ui/flamegraph`, child).catch((e) => {
      throw new Error(`${e.message}: ${stderr}`);
    });
    const page = await newPage(browser);
    await page.goto(`${base}/ui/flamegraph`);
    await page.waitForFunction(shows, { timeout: TIMEOUT }, item.frame).catch(() => {});
    await shot(page, `pprof_${item.file.replace(/[^A-Za-z0-9]+/g, '_')}_flamegraph`);
    assert(await page.evaluate(shows, item.frame), `/ui/flamegraph does not draw ${item.frame}`);
    assert(page.problems.length === 0, page.problems.join('; '));
    await page.close();
  } finally {
    child.kill();
  }
}

const server = await serve();
const base = `http://127.0.0.1:${server.address().port}`;
const userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'profconv-chromium-'));
const browser = await puppeteer.launch({
  executablePath: manifest.chromium,
  headless: true,
  userDataDir,
  // No GPU here: WebGL (which speedscope draws with) comes from ANGLE's
  // software renderer, SwiftShader. Current Chromium no longer falls back to it
  // by itself, and `--disable-gpu` would turn WebGL off altogether.
  args: [
    '--headless', '--no-sandbox', '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
    '--disable-background-networking', '--disable-component-update', '--no-first-run',
    '--disable-sync',
  ],
});
console.log(`# browser: ${await browser.version()} (${manifest.chromium})`);
try {
  await check('the browser has WebGL, which speedscope draws with', async () => {
    const page = await browser.newPage();
    const renderer = await page.evaluate(() => {
      const gl = document.createElement('canvas').getContext('webgl');
      return gl ? gl.getParameter(gl.RENDERER) : null;
    });
    await page.close();
    assert(renderer, 'no WebGL context: a set-up problem (Chromium needs --use-angle=swiftshader --enable-unsafe-swiftshader without a GPU)');
    console.log(`# WebGL renderer: ${renderer}`);
  });
  for (const item of manifest.speedscope || []) {
    await check(`speedscope app imports ${item.file}`, () => checkSpeedscope(browser, base, item));
  }
  for (const item of manifest.svg || []) {
    await check(`${item.file} opens and its search finds ${item.search}`, () => checkSvg(browser, base, item));
  }
  for (const item of manifest.svg_options || []) {
    await check(`${item.file} (${item.option}) opens and shows the option`, () => checkSvgOption(browser, base, item));
  }
  for (const item of manifest.pprof || []) {
    await check(`go tool pprof -http flame graph of ${item.file} shows ${item.frame}`, () => checkPprof(browser, item));
  }
} finally {
  await browser.close();
  server.close();
  fs.rmSync(userDataDir, { recursive: true, force: true });
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
