// Renders a flame graph written by nupp-bpf in headless Chromium to a PNG picture of
// the whole graph (at the SVG's own width and height, nothing hovered or zoomed), then
// checks the picture as a reader would see it: the PNG decodes (Chromium's own image
// decoder, drawn on a canvas), has the SVG's size, and is not blank (many distinct
// colours, most of the picture not background).
// Usage: node render_png.mjs IN.svg OUT.png
import fs from 'node:fs';
import path from 'node:path';
import { launch } from './browser.mjs';
import { check } from './truth.mjs';

const [file, out] = process.argv.slice(2);
const browser = await launch();
const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
const errors = [];
page.on('pageerror', (e) => errors.push(e.message));
page.on('request', (r) => { if (!r.url().startsWith('file:') && !r.url().startsWith('data:')) errors.push('network request: ' + r.url()); });
await page.goto('file://' + path.resolve(file));
await page.waitForFunction(() => typeof F !== 'undefined' && document.getElementById('frames'));
const [w, h] = await page.evaluate(() => [+document.documentElement.getAttribute('width'),
  +document.documentElement.getAttribute('height')]);
check(w > 0 && h > 0, `the SVG has no size: ${w}x${h}`);
await page.setViewportSize({ width: w, height: h });
await page.mouse.move(w - 1, h - 1);
await page.screenshot({ path: out, clip: { x: 0, y: 0, width: w, height: h } });

// The file: a PNG signature and an IHDR of the SVG's size.
const png = fs.readFileSync(out);
check(png.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), `${out} is not a PNG`);
check(png.toString('latin1', 12, 16) === 'IHDR', `${out} has no IHDR`);
const [pw, ph] = [png.readUInt32BE(16), png.readUInt32BE(20)];
check(pw === w && ph === h, `${out} is ${pw}x${ph}, want the SVG's ${w}x${h}`);

// Decoded by Chromium: every pixel read back from a canvas.
const img = await browser.newPage();
const stats = await img.evaluate(async (b64) => {
  const im = new Image();
  im.src = 'data:image/png;base64,' + b64;
  await im.decode();
  const c = document.createElement('canvas');
  c.width = im.naturalWidth; c.height = im.naturalHeight;
  const x = c.getContext('2d');
  x.drawImage(im, 0, 0);
  const d = x.getImageData(0, 0, c.width, c.height).data;
  const count = new Map();
  for (let i = 0; i < d.length; i += 4) {
    const k = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
    count.set(k, (count.get(k) || 0) + 1);
  }
  const top = Math.max(...count.values());
  return { w: c.width, h: c.height, colours: count.size, background: top / (d.length / 4) };
}, png.toString('base64'));
check(stats.w === w && stats.h === h, `decoded ${stats.w}x${stats.h}, want ${w}x${h}`);
check(stats.colours >= 50, `only ${stats.colours} distinct colours: the picture is blank`);
check(stats.background < 0.8, `${(100 * stats.background).toFixed(0)}% of the picture is one colour`);
check(errors.length === 0, 'errors: ' + errors.join('; '));
await browser.close();
console.log(`png: ${out} ${w}x${h}, ${png.length} bytes, ${stats.colours} distinct colours, ` +
  `the commonest ${(100 * stats.background).toFixed(0)}% of the pixels`);
