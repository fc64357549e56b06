// Opens a flame graph in headless Chromium and prints how long it took to be usable:
// the load event's end (parsed, rendered once, script initialised), then a search
// and a zoom, in milliseconds, as the page's own clock measures them.
// Usage: NUPP_NODE_MODULES=build/node/node_modules node svg_open.mjs FILE.svg
import path from 'node:path';
import { launch } from '../format/browser.mjs';

const file = path.resolve(process.argv[2]);
const browser = await launch();
const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
await page.goto('file://' + file, { waitUntil: 'load' });
const load = await page.evaluate(() => performance.getEntriesByType('navigation')[0].loadEventEnd);
const paint = await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => r(performance.now()))));
const search = await page.evaluate(() => { const t = performance.now(); search('f1'); return performance.now() - t; });
const zoom = await page.evaluate(() => { const t = performance.now(); zoom(1); return performance.now() - t; });
const frames = await page.evaluate(() => F.length);
await browser.close();
console.log(JSON.stringify({ frames, load, paint, search, zoom }));
