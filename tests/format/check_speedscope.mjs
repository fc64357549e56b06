// Imports a .speedscope.json written by nupp-bpf into the real speedscope app (the npm
// package's build, in headless Chromium), exports what speedscope's importer made of
// it, and checks it against the nupp profile: one profile per process and thread, every
// frame, the total and each frame's inclusive time. Prints "profile NAME: N samples"
// for each profile speedscope made.
// Usage: node check_speedscope.mjs PROFILE.json OUT.speedscope.json WORKDIR
import fs from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { launch } from './browser.mjs';
import { truth, check } from './truth.mjs';

const [profile, file, work] = process.argv.slice(2);
const t = truth(profile);
const require = createRequire(path.join(process.env.NUPP_NODE_MODULES, 'x.js'));
const app = path.join(path.dirname(require.resolve('speedscope/package.json')), 'dist/release/index.html');
// The speedscope CLI's way in: a script calling speedscope.loadFileFromBase64.
const loader = path.join(work, 'speedscope-load.js');
fs.writeFileSync(loader, `speedscope.loadFileFromBase64(${JSON.stringify(path.basename(file))}, ` +
  `${JSON.stringify(fs.readFileSync(file).toString('base64'))})`);

const browser = await launch();
const page = await browser.newPage({ acceptDownloads: true });
const errors = [];
page.on('pageerror', (e) => errors.push(e.message));
page.on('dialog', (d) => { errors.push('dialog: ' + d.message()); d.dismiss(); });
const logs = [];
page.on('console', (m) => logs.push(m.text()));
await page.goto('file://' + app + '#localProfilePath=' + loader);
await page.getByText('Export').waitFor({ timeout: 60000 });
const [dl] = await Promise.all([page.waitForEvent('download'), page.getByText('Export').click()]);
const exported = JSON.parse(fs.readFileSync(await dl.path(), 'utf8'));
await browser.close();
check(errors.length === 0, 'speedscope reported: ' + errors.join('; '));
check(logs.some((l) => l.includes('Importing as speedscope json file')), 'not imported as a speedscope file: ' + logs);

// One profile per (process, thread) of the rows.
const threads = new Set(t.doc.samples.filter((r) => r.count).map((r) => `${r.pid || 0}/${r.tid || 0}`));
check(exported.profiles.length === Math.max(1, threads.size),
  `${exported.profiles.length} profiles, want ${threads.size}`);
const frames = exported.shared.frames;
// speedscope's export lists a frame once per profile that has it: compare names.
const names = new Set(frames.map((f) => f.name));
check(names.size === t.frames.size, `speedscope has ${names.size} frames, the profile ${t.frames.size}`);
for (const f of frames) check(t.frames.has(f.name), `frame ${JSON.stringify(f.name)} is not in the profile`);
// Inclusive time per frame from the evented profiles speedscope built.
const incl = new Map();
let span = 0;
for (const prof of exported.profiles) {
 check(prof.unit === 'seconds', 'unit ' + prof.unit);
 span += prof.endValue - prof.startValue;
 const open = new Map();
 for (const e of prof.events) {
  const depth = open.get(e.frame) || 0;
  if (e.type === 'O') {
    if (!depth) incl.set(frames[e.frame].name, (incl.get(frames[e.frame].name) || 0) - e.at);
    open.set(e.frame, depth + 1);
  } else {
    if (depth === 1) incl.set(frames[e.frame].name, incl.get(frames[e.frame].name) + e.at);
    open.set(e.frame, depth - 1);
  }
 }
}
const near = (a, b) => Math.abs(a - b) < 1e-6 * Math.max(1, b);
check(near(span * t.freq, t.total), `speedscope's total is ${span * t.freq} samples, the profile's ${t.total}`);
let checked = 0;
names.forEach((nm) => {
  const want = t.frames.get(nm).total;
  check(near((incl.get(nm) || 0) * t.freq, want), `${nm}: ${(incl.get(nm) || 0) * t.freq} samples, want ${want}`);
  checked++;
});
for (const prof of exported.profiles)
  console.log(`profile ${prof.name}: ${Math.round((prof.endValue - prof.startValue) * t.freq)} samples`);
console.log(`speedscope: imported, ${exported.profiles.length} profile(s), ${names.size} frames, ${t.total} samples; ${checked} frames' totals match`);
