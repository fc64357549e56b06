// Opens a flame graph written by nupp-bpf in headless Chromium and prints, for each
// drawn frame, whether it carries an abort mark and the tooltip a hover shows (the
// page's own describe()), one JSON object per line: {"name", "mark", "tip"}.
// Usage: node svg_marks.mjs OUT.svg
import path from 'node:path';
import { launch } from './browser.mjs';

const [file] = process.argv.slice(2);
const browser = await launch();
const page = await browser.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(e.message));
await page.goto('file://' + path.resolve(file));
await page.waitForFunction(() => typeof F !== 'undefined' && document.getElementById('frames'));
const rows = await page.evaluate(() => {
  const g = document.getElementById('frames').children;
  return F.map((f, i) => ({ name: f[0], mark: g[i].querySelector('path.a') !== null, tip: describe(i) }));
});
await browser.close();
if (errors.length) {
  console.error('errors: ' + errors.join('; '));
  process.exit(1);
}
for (const r of rows) console.log(JSON.stringify(r));
