// The truth the format checks compare against, computed from the nupp profile JSON
// itself (not from any output): totals, distinct frames, each frame's inclusive and
// self samples, the VM-state totals; names in the display form the outputs use.
import fs from 'node:fs';

// The bytes a name in the nupp profile stands for (U+EF80..U+EFFF are raw bytes).
export function nameBytes(s) {
  const out = [];
  for (const ch of s) {
    const cp = ch.codePointAt(0);
    if (cp >= 0xef80 && cp <= 0xefff) out.push(cp - 0xef00);
    else out.push(...Buffer.from(ch, 'utf8'));
  }
  return Buffer.from(out);
}

// Length of the well-formed UTF-8 sequence at b[i], or 0.
function seqLen(b, i) {
  const c = b[i], cont = (k) => i + k < b.length && (b[i + k] & 0xc0) === 0x80;
  if (c >= 0xc2 && c <= 0xdf && cont(1)) return 2;
  if (c >= 0xe0 && c <= 0xef && cont(1) && cont(2)) {
    const cp = ((c & 0x0f) << 12) | ((b[i + 1] & 0x3f) << 6) | (b[i + 2] & 0x3f);
    return cp >= 0x800 && !(cp >= 0xd800 && cp <= 0xdfff) ? 3 : 0;
  }
  if (c >= 0xf0 && c <= 0xf4 && cont(1) && cont(2) && cont(3)) {
    const cp = ((c & 7) << 18) | ((b[i + 1] & 0x3f) << 12) | ((b[i + 2] & 0x3f) << 6) | (b[i + 3] & 0x3f);
    return cp >= 0x10000 && cp <= 0x10ffff ? 4 : 0;
  }
  return 0;
}

// The display form of bytes: control characters and bytes not in well-formed UTF-8
// as \xHH, the rest as it is.
export function display(b) {
  let s = '';
  for (let i = 0; i < b.length;) {
    if (b[i] >= 0x20 && b[i] < 0x7f) { s += String.fromCharCode(b[i++]); continue; }
    const n = b[i] >= 0x80 ? seqLen(b, i) : 0;
    if (n) { s += b.subarray(i, i + n).toString('utf8'); i += n; continue; }
    s += '\\x' + b[i].toString(16).toUpperCase().padStart(2, '0');
    i++;
  }
  return s;
}

const STATES = ['compiled', 'interpreted', 'cCode', 'collecting', 'compiling'];

// Reads the profile at path: { doc, total, freq, frames: Map(display name ->
// {total, self}), states: {state: n} }.
export function truth(path) {
  const doc = JSON.parse(fs.readFileSync(path, 'utf8'));
  const frames = new Map(), states = Object.fromEntries(STATES.map((k) => [k, 0]));
  let total = 0;
  for (const r of doc.samples) {
    if (!r.count) continue;
    total += r.count;
    for (const k of STATES) states[k] += r[k] || 0;
    const parts = nameBytes(r.stack).toString('latin1').split(';').map((p) => display(Buffer.from(p, 'latin1')));
    const seen = new Set();
    parts.forEach((p, i) => {
      if (!frames.has(p)) frames.set(p, { total: 0, self: 0 });
      const f = frames.get(p);
      if (!seen.has(p)) { f.total += r.count; seen.add(p); }
      if (i === parts.length - 1) f.self += r.count;
    });
  }
  if (total !== doc.meta.samples) throw new Error(`rows hold ${total} samples, meta says ${doc.meta.samples}`);
  return { doc, total, freq: doc.meta.frequencyHz, frames, states };
}

// Fails with a message unless cond.
export function check(cond, msg) {
  if (!cond) { console.error('FAIL: ' + msg); process.exit(1); }
}
