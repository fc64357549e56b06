// Opens a flame graph written by nupp-bpf in headless Chromium and uses it as a person
// would: it renders (title, frames, no script error), frames of known VM states have
// their state's colour, a search typed after Ctrl-F reports the matched share the
// profile gives, a click zooms the frame to the full width and Reset Zoom undoes it.
// Usage: node check_svg.mjs PROFILE.json OUT.svg SCREENSHOT.png [FRAME=STATE ...]
import path from 'node:path';
import { launch } from './browser.mjs';
import { truth, check } from './truth.mjs';

const [profile, file, shot, ...expect] = process.argv.slice(2);
const t = truth(profile);
const browser = await launch();
const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
const errors = [];
page.on('pageerror', (e) => errors.push(e.message));
page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
page.on('request', (r) => { if (!r.url().startsWith('file:')) errors.push('network request: ' + r.url()); });
await page.goto('file://' + path.resolve(file));
await page.waitForFunction(() => typeof F !== 'undefined' && document.getElementById('frames'));
check(errors.length === 0, 'errors: ' + errors.join('; '));

// Renders: the title is the profiled command, every drawn frame has a box.
const title = await page.textContent('#title');
check(title === (t.doc.meta.target || t.doc.meta.command), `title [${title}]`);
const n = await page.$$eval('#frames > g', (g) => g.length);
check(n >= 2, `${n} frames drawn`);
const sub = await page.textContent('#subtitle');
check(sub.includes(`${t.total.toLocaleString('en-US')} samples`), `subtitle [${sub}] lacks the sample count`);

// The frame element of a name (the first drawn with it).
const frame = (name) => page.evaluateHandle((nm) => {
  const i = F.findIndex((f) => f[0] === nm);
  return i < 0 ? null : document.getElementById('frames').children[i];
}, name);
const rgb = (s) => s.match(/\d+/g).map(Number);

// Colours follow VM states: FRAME=STATE arguments name frames and the state most of
// their samples are in; the fill is that state's colour family.
for (const e of expect) {
  const [name, state] = e.split('=');
  const g = await frame(name);
  check(await g.evaluate((x) => x !== null), `no frame ${name}`);
  const vm = await g.evaluate((x) => x.getAttribute('data-vm'));
  check(vm === state, `${name}: drawn as ${vm}, want ${state}`);
  const [r, gr, b] = rgb(await g.evaluate((x) => x.querySelector('rect').getAttribute('fill')));
  const family = { compiled: gr > r && gr > b, interpreted: r > gr && r > b, cCode: b > r && b > gr }[state];
  check(family !== false, `${name}: fill rgb(${r},${gr},${b}) is not ${state}'s colour`);
  const legend = await page.$eval(`#legend g[data-state="${state}"] text`, (x) => x.textContent);
  check(legend.includes((100 * t.states[state] / t.total).toFixed(1) + '%'), `legend [${legend}]`);
}

// Search: Ctrl-F focuses the box; typing a name highlights it and shows its share.
// The target: the widest frame that does not already span the whole graph.
const [target] = [...t.frames.entries()].filter(([, f]) => f.total < 0.7 * t.total)
  .sort((a, b) => b[1].total - a[1].total).map(([nm]) => nm);
check(target, 'no frame under 70% of the samples to search and zoom');
await page.mouse.click(600, 30);
await page.keyboard.press('Control+f');
check(await page.evaluate(() => document.activeElement && document.activeElement.id === 'searchbox'),
  'Ctrl-F did not focus the search box');
const literal = target.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
await page.keyboard.type('^' + literal + '$');
const want = 'Matched: ' + (100 * t.frames.get(target).total / t.total).toFixed(1) + '%';
const got = await page.textContent('#matched');
check(got === want, `search for ${target}: [${got}], want [${want}]`);
const hits = await page.$$eval('#frames rect[fill="#e600e6"]', (r) => r.length);
check(hits >= 1, 'no frame highlighted');
await page.keyboard.press('Escape');
check((await page.textContent('#matched')) === '', 'Escape did not clear the search');

// Click zooms: the frame spans the full width, frames outside it are hidden.
const g = await frame(target);
const before = await g.evaluate((x) => +x.querySelector('rect').getAttribute('width'));
const box = await g.evaluate((x) => { const r = x.querySelector('rect').getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; });
await page.mouse.click(box[0] + Math.min(box[2] / 2, 20), box[1] + box[3] / 2);
const after = await g.evaluate((x) => +x.querySelector('rect').getAttribute('width'));
check(after > 1170 && after > before, `after a click the frame is ${after} px wide (was ${before})`);
const hidden = await page.$$eval('#frames > g', (gs) => gs.filter((x) => x.style.display === 'none').length);
check(hidden > 0, 'zoomed, but no frame outside it was hidden');
check(await page.isVisible('#unzoom'), 'Reset Zoom is not shown');
await page.screenshot({ path: shot });
await page.click('#unzoom');
const reset = await g.evaluate((x) => +x.querySelector('rect').getAttribute('width'));
check(Math.abs(reset - before) < 0.02, `after Reset Zoom the frame is ${reset} px wide, want ${before}`);
check(errors.length === 0, 'errors: ' + errors.join('; '));
await browser.close();
console.log(`svg: ${n} frames rendered; "${target}" ${want}; click zoomed ${before.toFixed(1)} -> ${after.toFixed(1)} px; ` +
  `${expect.length} VM-state colours right; screenshot ${shot}`);
