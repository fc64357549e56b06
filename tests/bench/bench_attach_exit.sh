#!/usr/bin/env bash
# Benchmark (not a test): how long `nupp-bpf record` takes to start sampling and to exit
# on Ctrl-C, for `record -p PID` (a busy LuaJIT loop) and `record -- CMD`. Prints the
# median of RUNS runs of: start to the "recording" line (sampling is live from then on:
# the first sample follows within 1/F s), SIGINT to the summary line (the profile is
# written), SIGINT to the exit of nupp-bpf, and the probes still attached one second
# after the exit (bpftool link; must be 0).
# usage: sudo tests/bench/bench_attach_exit.sh [BUILD_DIR] [RUNS]   (NUPP_BPF overrides the binary)
set -euo pipefail

SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${1:-$SRC/build}
RUNS=${2:-5}
LUAJIT=$BUILD/luajit/bin/luajit
NUPP=${NUPP_BPF:-$BUILD/nupp-bpf}

[ "$(id -u)" = 0 ] || { echo "bench_attach_exit.sh: needs root (BPF)" >&2; exit 77; }
[ -x "$LUAJIT" ] && [ -x "$NUPP" ] || { echo "bench_attach_exit.sh: build first ($NUPP, $LUAJIT)" >&2; exit 1; }
command -v bpftool >/dev/null || { echo "bench_attach_exit.sh: bpftool is needed (apt-get install bpftool)" >&2; exit 1; }

TMP=$(mktemp -d)
target=
cleanup() { [ -z "$target" ] || kill "$target" 2>/dev/null || true; rm -rf "$TMP"; }
trap cleanup EXIT

# A busy loop that calls a function (so LuaJIT's SIGINT hook stops it promptly).
cat >"$TMP/busy.lua" <<'EOF'
local function f(n) local s = 0 for i = 1, n do s = s + i end return s end
local t = os.clock() while os.clock() - t < (tonumber(arg[1]) or 60) do f(1000) end
EOF

# One run: python starts record (args after --), times its stderr lines, notes the ids
# of the BPF links and programs record holds (its /proc fdinfo), sends SIGINT one second
# into the recording, and prints "attach written exit links-left progs-left": seconds,
# then how many of those links and programs still exist one second after the exit.
cat >"$TMP/run.py" <<'EOF'
import json, os, select, signal, subprocess, sys, time

def held(pid):
    ids = {"link_id": set(), "prog_id": set()}
    d = "/proc/%d/fdinfo" % pid
    for fd in os.listdir(d):
        try:
            info = open(os.path.join(d, fd)).read()
        except OSError:
            continue
        kind = "link_id" if "link_id:" in info else "prog_id" if "prog_type:" in info else None
        for line in info.splitlines() if kind else ():
            if line.startswith(kind + ":"):
                ids[kind].add(int(line.split()[1]))
    return ids

def alive(what):
    out = subprocess.check_output(["bpftool", "-j", what, "show"])
    return {x["id"] for x in json.loads(out or b"[]") or []}

t0 = time.monotonic()
p = subprocess.Popen(sys.argv[1:], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
buf, t_rec, t_int, t_wrote, ids = b"", None, None, None, None
fd = p.stderr.fileno()
while True:
    now = time.monotonic()
    if t_rec is not None and t_int is None and now - t_rec >= 1.0:
        ids = held(p.pid)
        t_int = time.monotonic()
        p.send_signal(signal.SIGINT)
    r, _, _ = select.select([fd], [], [], 0.005)
    if r:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        now = time.monotonic()
        buf += chunk
        if t_rec is None and b"recording" in buf:
            t_rec = now
        if t_int is not None and t_wrote is None and b"wrote" in buf[buf.find(b"recording"):]:
            t_wrote = now
p.wait()
t_exit = time.monotonic()
# (-- CMD passes on the status of the interrupted command)
if t_rec is None or t_wrote is None or not ids or not ids["link_id"]:
    sys.stderr.write(buf.decode(errors="replace"))
    sys.exit("record failed (status %s)" % p.returncode)
time.sleep(1)
print("%.3f %.3f %.3f %d %d" % (t_rec - t0, t_wrote - t_int, t_exit - t_int,
      len(ids["link_id"] & alive("link")), len(ids["prog_id"] & alive("prog"))))
EOF

# The median of column $1 of file $2.
median() { awk -v c="$1" '{print $c}' "$2" | sort -n |
  awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# The sum of column $1 of file $2.
sum() { awk -v c="$1" '{s += $c} END {print s + 0}' "$2"; }

"$LUAJIT" "$TMP/busy.lua" 3600 & target=$!
until grep -q luajit "/proc/$target/maps" 2>/dev/null; do sleep 0.05; done
: >"$TMP/pid"; : >"$TMP/cmd"
for _ in $(seq "$RUNS"); do
  python3 "$TMP/run.py" "$NUPP" record -F 997 -o "$TMP/p.json" -p "$target" >>"$TMP/pid"
  python3 "$TMP/run.py" "$NUPP" record -F 997 -o "$TMP/c.json" -- "$LUAJIT" "$TMP/busy.lua" 60 >>"$TMP/cmd"
done

printf '%-8s %-21s %-20s %-17s %s\n' "record" "start->recording (s)" "SIGINT->written (s)" "SIGINT->exit (s)" \
  "BPF links+programs left 1 s after exit (all runs)"
for m in pid cmd; do
  name="-p PID"; [ $m = pid ] || name="-- CMD"
  printf '%-8s %-21s %-20s %-17s %s\n' "$name" "$(median 1 "$TMP/$m")" "$(median 2 "$TMP/$m")" "$(median 3 "$TMP/$m")" \
    "$(( $(sum 4 "$TMP/$m") + $(sum 5 "$TMP/$m") ))"
done
echo "(median of $RUNS runs, -F 997; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"
