// Reads a .pb.gz written by nupp-bpf with pprof-format (an independent JavaScript
// decoder of profile.proto) and checks it against the nupp profile: sample types,
// totals per value, per VM-state label and per function, files and lines, start time
// and duration.
// Usage: node check_pprof.mjs PROFILE.json OUT.pb.gz
import fs from 'node:fs';
import path from 'node:path';
import zlib from 'node:zlib';
import { createRequire } from 'node:module';
import { truth, check, display, nameBytes } from './truth.mjs';

const [profile, file] = process.argv.slice(2);
const t = truth(profile);
const require = createRequire(path.join(process.env.NUPP_NODE_MODULES, 'x.js'));
const { Profile } = require('pprof-format');
const p = Profile.decode(zlib.gunzipSync(fs.readFileSync(file)));
const str = (i) => p.stringTable.strings[Number(i)];

check(p.sampleType.map((v) => str(v.type) + '/' + str(v.unit)).join(',') === 'samples/count,cpu/nanoseconds',
  'sample types ' + p.sampleType.map((v) => str(v.type) + '/' + str(v.unit)));
const period = 1e9 / t.freq | 0;
check(Number(p.period) === period, `period ${p.period}, want ${period}`);
const fn = new Map(p.function.map((f) => [Number(f.id), f]));
const loc = new Map(p.location.map((l) => [Number(l.id), l]));
let total = 0, nanos = 0;
const byState = {}, incl = new Map(), self = new Map();
for (const s of p.sample) {
  const n = Number(s.value[0]);
  total += n;
  nanos += Number(s.value[1]);
  check(Number(s.value[1]) === n * period, 'cpu/nanoseconds is not samples * period');
  const st = s.label.find((l) => str(l.key) === 'vmstate');
  check(st, 'a sample without a vmstate label');
  byState[str(st.str)] = (byState[str(st.str)] || 0) + n;
  const names = s.locationId.map((id) => str(fn.get(Number(loc.get(Number(id)).line[0].functionId)).name));
  new Set(names).forEach((nm) => incl.set(nm, (incl.get(nm) || 0) + n));
  self.set(names[0], (self.get(names[0]) || 0) + n);
}
check(total === t.total, `pprof holds ${total} samples, the profile ${t.total}`);
for (const [k, v] of Object.entries(t.states))
  check((byState[k] || 0) === v, `vmstate=${k}: ${byState[k] || 0} samples, want ${v}`);
check(p.function.length === t.frames.size, `${p.function.length} functions, want ${t.frames.size}`);
for (const [nm, f] of t.frames) {
  check(incl.get(nm) === f.total, `${nm}: ${incl.get(nm)} samples in total, want ${f.total}`);
  check((self.get(nm) || 0) === f.self, `${nm}: ${self.get(nm) || 0} self samples, want ${f.self}`);
}
// Start lines: a function's first line from the profile's frame table (meta.frames, the
// lowest when a name stands for several functions); without one, where the frame name
// carries it ("states.lua:0" is the main chunk, line 0). Files from the frame names.
const table = Object.fromEntries(Object.entries(t.doc.meta.frames || {}).map(([k, v]) => [display(nameBytes(k)), v]));
for (const f of p.function) {
  const nm = str(f.name), m = /^(.*):(\d+)$/.exec(nm), c = /^([^\[].*?):[^:]+$/.exec(nm);
  if (c) check(str(f.filename) === c[1], `${nm}: file ${str(f.filename)}, want ${c[1]}`);
  if (table[nm]) {
    const want = Math.min(...table[nm].map((e) => e.firstLine));
    check(Number(f.startLine) === want, `${nm}: start line ${f.startLine}, want ${want} (meta.frames)`);
  } else if (m && !t.doc.meta.lines) {
    check(Number(f.startLine) === Number(m[2]), `${nm}: start line ${f.startLine}`);
  } else {
    check(Number(f.startLine) === 0, `${nm}: start line ${f.startLine}, want 0 (not in meta.frames)`);
  }
}
// When: time_nanos is meta.startTime in Unix nanoseconds, duration_nanos is durationSec.
const st = t.doc.meta.startTime, whole = Math.floor(st || 0);
const wantTime = st ? BigInt(whole) * 1000000000n + BigInt(Math.round((st - whole) * 1e9)) : 0n;
check(BigInt(p.timeNanos || 0) === wantTime, `time_nanos ${p.timeNanos}, want ${wantTime} (startTime ${st})`);
const wantDur = BigInt(Math.trunc((t.doc.meta.durationSec || 0) * 1e9));
check(BigInt(p.durationNanos || 0) === wantDur, `duration_nanos ${p.durationNanos}, want ${wantDur}`);
console.log(`pprof-format: ${p.sample.length} samples of ${total} (${nanos} ns), ${p.function.length} functions; ` +
  'totals, states, self and total per function match');
