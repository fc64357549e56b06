// Imports a .speedscope.json written by nupp-bpf into the real speedscope app (the npm
// package's build, in headless Chromium), exports what speedscope's importer made of
// it, and checks it against the nupp profile: one profile, every frame, the total
// and each frame's inclusive time.
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

check(exported.profiles.length === 1, `${exported.profiles.length} profiles, want 1`);
const prof = exported.profiles[0], frames = exported.shared.frames;
check(frames.length === t.frames.size, `speedscope has ${frames.length} frames, the profile ${t.frames.size}`);
for (const f of frames) check(t.frames.has(f.name), `frame ${JSON.stringify(f.name)} is not in the profile`);
// Inclusive time per frame from the evented profile speedscope built.
const incl = new Map(), open = new Map();
for (const e of prof.events) {
  const depth = open.get(e.frame) || 0;
  if (e.type === 'O') {
    if (!depth) incl.set(e.frame, (incl.get(e.frame) || 0) - e.at);
    open.set(e.frame, depth + 1);
  } else {
    if (depth === 1) incl.set(e.frame, incl.get(e.frame) + e.at);
    open.set(e.frame, depth - 1);
  }
}
const near = (a, b) => Math.abs(a - b) < 1e-6 * Math.max(1, b);
check(prof.unit === 'seconds', 'unit ' + prof.unit);
check(near((prof.endValue - prof.startValue) * t.freq, t.total),
  `speedscope's total is ${(prof.endValue - prof.startValue) * t.freq} samples, the profile's ${t.total}`);
let checked = 0;
frames.forEach((f, i) => {
  const want = t.frames.get(f.name).total;
  check(near((incl.get(i) || 0) * t.freq, want), `${f.name}: ${(incl.get(i) || 0) * t.freq} samples, want ${want}`);
  checked++;
});
console.log(`speedscope: imported, 1 profile, ${frames.length} frames, ${t.total} samples; ${checked} frames' totals match`);
