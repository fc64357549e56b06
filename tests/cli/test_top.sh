#!/usr/bin/env bash
# nupp-bpf top: --once (and a stdout that is not a terminal) prints one table whose rows
# and shares are those record gives of the same run, and those the program measures of
# itself; on a terminal (a pty) it takes the alternate screen, redraws every interval,
# sorts by the keys, switches to source lines, quits on q and gives the terminal back as
# it was; errors name the cause; nothing is left in the kernel.
. "$(dirname "$0")/../support/lib.sh"
need_root

DATA="$NUPP_SOURCE_DIR/tests/data/report"

# 1. top --once and record on the same run of a workload of known shares: heavy (50 %,
# interpreted), medium (30 %) and light (20 %, compiled) by the program's own clock, in
# chunks of random length. Both start at once for 8 s, at rates that share no period (two
# samplers of one rate on one process drift apart by up to 2 points, measured with two
# records): 12,000-16,000 samples each; 2 points is the limit.
"$NUPP_LUAJIT" "$NUPP_SOURCE_DIR/tests/data/cli/shares.lua" 12 2>"$TMP/shares.err" &
target=$!
PIDS+=("$target")
wait_luajit "$target"
sleep 0.5
"$NUPP_BPF" record -q -F 1499 -d 8 -p "$target" -o "$TMP/r.json" &
rec=$!
PIDS+=("$rec")
"$NUPP_BPF" top --once -F 1999 -i 8 -p "$target" >"$TMP/once.txt" 2>"$TMP/once.err" &
top=$!
PIDS+=("$top")
for i in $(seq 100); do held_bpf "$top" >"$TMP/held" || true; [ -s "$TMP/held" ] && break; sleep 0.1; done
[ -s "$TMP/held" ] || fail "top holds no BPF object while it runs"
wait "$top" || { cat "$TMP/once.err" >&2; fail "top --once failed"; }
wait "$rec" || fail "record beside top failed"
wait "$target" || true
wait_released "$TMP/held"
cat "$TMP/once.txt"
# No escape sequence when stdout is a file.
! grep -qa $'\e' "$TMP/once.txt" || fail "top --once wrote terminal escapes to a file"
python3 - "$TMP/once.txt" "$TMP/r.json" "$TMP/shares.err" <<'EOF' || fail "top --once disagrees with record or the program"
import json, re, sys
rows = {}
total = None
for line in open(sys.argv[1]):
    m = re.match(r"samples: (\d+) in the last [\d.]+ s, (\d+) in all", line)
    if m:
        total = int(m.group(2))
        assert int(m.group(1)) == total, "the once table's interval is not the whole run"
    f = line.split()
    if len(f) >= 10 and f[0].endswith("%") and f[2].endswith("%"):
        pct = lambda s: float(s.rstrip("%")) if s != "-" else 0.0
        rows[" ".join(f[9:])] = dict(self=pct(f[2]), total=pct(f[3]), comp=pct(f[4]), interp=pct(f[5]))
assert total and total > 14000, f"too few samples: {total}"
prof = json.load(open(sys.argv[2]))
n = prof["meta"]["samples"]
def rec(fn, key):
    s = 0
    for r in prof["samples"]:
        fr = r["stack"].split(";")
        if (key == "self" and fr[-1] == fn) or (key == "total" and fn in fr):
            s += r["count"]
    return 100.0 * s / n
spent = {k: float(v) for k, v in re.findall(r"(heavy|medium|light) ([\d.]+)", open(sys.argv[3]).read())}
clock = sum(spent.values())
worst = worst_truth = 0.0
for fn, state in (("heavy", "interp"), ("medium", "comp"), ("light", "comp")):
    name = "shares.lua:" + fn
    assert name in rows, f"{name} is not a row: {sorted(rows)}"
    r = rows[name]
    for key in ("self", "total"):
        worst = max(worst, abs(r[key] - rec(name, key)))
        assert abs(r[key] - rec(name, key)) <= 2.0, f"{name} {key}: top {r[key]} %, record {rec(name, key):.1f} %"
    assert r[state] >= 98.0, f"{name}: {r[state]} % of its samples {state}"
    # Of the three functions' samples, as of the program's clock of the whole run.
    share = 100.0 * r["self"] / sum(rows["shares.lua:" + g]["self"] for g in spent)
    worst_truth = max(worst_truth, abs(share - 100.0 * spent[fn] / clock))
    assert abs(share - 100.0 * spent[fn] / clock) <= 3.0, f"{name}: {share:.1f} % of the three, its clock {100 * spent[fn] / clock:.1f} %"
assert rows["shares.lua:0"]["total"] >= 98.0, "the main chunk is not under every sample"
print(f"top --once: record differs by {worst:.1f} points at most, the program's clock by {worst_truth:.1f}")
EOF

# 2. A stdout that is not a terminal, without --once: one table, then exit 0.
"$NUPP_LUAJIT" "$DATA/spin.lua" &
target=$!
PIDS+=("$target")
wait_luajit "$target"
"$NUPP_BPF" top -i 1 -n 3 -p "$target" >"$TMP/pipe.txt" 2>"$TMP/pipe.err" || {
  kill -9 "$target"; cat "$TMP/pipe.err" >&2; fail "top into a file failed"; }
assert_contains "$TMP/pipe.txt" "spin.lua:f"
assert_eq "$(grep -cE '^ +[0-9.]+%' "$TMP/pipe.txt")" 3 "rows with --rows 3"

# 3. On a terminal: a pty, keys typed, the terminal given back.
cat >"$TMP/tty_keys.py" <<'EOF'
import os, pty, select, sys, termios, time
bpf, pid = sys.argv[1], sys.argv[2]
child, fd = pty.fork()
if child == 0:
    os.execv(bpf, [bpf, "top", "-F", "199", "-i", "0.5", "-p", pid])
before = termios.tcgetattr(fd)
out = b""
def read_for(secs, until=None):
    global out
    end = time.time() + secs
    while time.time() < end:
        r, _, _ = select.select([fd], [], [], 0.1)
        if r:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return False
            if not chunk:
                return False
            out += chunk
            if until and until(out):
                return True
    return True
def frames(b):
    return b.count(b"\x1b[H\x1b[2J")
def fail(msg):
    sys.stdout.write(out.decode("utf-8", "replace"))
    print("FAIL:", msg)
    os.kill(child, 9)
    sys.exit(1)
read_for(60, lambda b: frames(b) >= 3 and b"spin.lua:f" in b)
if b"\x1b[?1049h" not in out:
    fail("no alternate screen")
if frames(out) < 3 or b"spin.lua:f" not in out:
    fail("the table was not drawn and redrawn with the hot function")
raw = termios.tcgetattr(fd)
if raw[3] & termios.ECHO or raw[3] & termios.ICANON:
    fail("the keyboard is not raw while top runs")
n = len(out)
os.write(fd, b"t")
read_for(10, lambda b: b"functions by total" in b[n:])
if b"functions by total" not in out[n:]:
    fail("t did not sort by total")
n = len(out)
os.write(fd, b"l")
read_for(60, lambda b: b"source lines by total" in b[n:] and b"spin.lua:3" in b[n:])
if b"spin.lua:3" not in out[n:]:
    fail("l did not switch to source lines (spin.lua:3)")
n = len(out)
os.write(fd, b"l")
read_for(10, lambda b: b"functions by total" in b[n:])
if b"functions by total" not in out[n:]:
    fail("a second l did not switch back to functions")
os.write(fd, b"q")
t = time.time()
while read_for(0.2):
    if time.time() - t > 20:
        fail("top did not quit on q")
_, status = os.waitpid(child, 0)
if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
    fail(f"top's exit status {status}")
if not out.rstrip().endswith(b"\x1b[?25h\x1b[?1049l"):
    fail("the main screen and cursor were not given back last")
print(f"pty: {frames(out)} frames drawn, quit in {time.time() - t:.1f} s")
EOF
python3 "$TMP/tty_keys.py" "$NUPP_BPF" "$target" || { kill -9 "$target"; fail "top on a terminal"; }

# 4. Ctrl-C on a terminal gives the terminal back too (script(1) keeps its settings).
cat >"$TMP/tty_sigint.py" <<'EOF'
import os, pty, select, signal, sys, termios, time
bpf, pid = sys.argv[1], sys.argv[2]
child, fd = pty.fork()
if child == 0:
    os.execv(bpf, [bpf, "top", "-i", "0.5", "-p", pid])
out = b""
end = time.time() + 60
while time.time() < end and out.count(b"\x1b[H\x1b[2J") < 2:
    if select.select([fd], [], [], 0.1)[0]:
        out += os.read(fd, 65536)
os.kill(child, signal.SIGINT)
try:
    while True:
        c = os.read(fd, 65536)
        if not c:
            break
        out += c
except OSError:
    pass
_, status = os.waitpid(child, 0)
assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"status {status}"
assert out.rstrip().endswith(b"\x1b[?25h\x1b[?1049l"), "terminal not given back after Ctrl-C"
print("Ctrl-C: terminal given back, exit 0")
EOF
python3 "$TMP/tty_sigint.py" "$NUPP_BPF" "$target" || { kill -9 "$target"; fail "top and Ctrl-C"; }
# 4b. Ctrl-Z under a job-control shell: top gives the terminal back and stops; fg takes
# it again and redraws; q quits.
cat >"$TMP/tty_stop.py" <<'EOF'
import os, pty, select, sys, time
bpf, pid = sys.argv[1], sys.argv[2]
child, fd = pty.fork()
if child == 0:
    os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])
out = b""
def read_until(pred, secs):
    global out
    end = time.time() + secs
    while time.time() < end and not pred(out):
        if select.select([fd], [], [], 0.1)[0]:
            try:
                out += os.read(fd, 65536)
            except OSError:
                break
    return pred(out)
def fail(msg):
    sys.stdout.write(out.decode("utf-8", "replace"))
    print("FAIL:", msg)
    os.kill(child, 9)
    sys.exit(1)
os.write(fd, f"PS1='$ '; {bpf} top -i 0.5 -p {pid}\n".encode())
if not read_until(lambda b: b.count(b"\x1b[H\x1b[2J") >= 2, 60):
    fail("top did not draw under bash")
n = len(out)
os.write(fd, b"\x1a")
if not read_until(lambda b: b"\x1b[?1049l" in b[n:] and b"Stopped" in b[n:], 20):
    fail("Ctrl-Z did not give the terminal back and stop top")
n = len(out)
os.write(fd, b"fg\n")
if not read_until(lambda b: b"\x1b[?1049h" in b[n:] and b"\x1b[H\x1b[2J" in b[n:], 20):
    fail("fg did not take the terminal again and redraw")
os.write(fd, b"q")
# The shell's prompt after top's exit (input typed before it would be flushed with the
# terminal's settings).
read_until(lambda b: b"\x1b[?1049l" in b[n:] and b"$ " in b[n:].split(b"\x1b[?1049l")[-1], 20)
os.write(fd, b"echo top-status=$?\n")
if not read_until(lambda b: b"top-status=0" in b, 20):
    fail("top did not quit with status 0 after fg")
os.write(fd, b"exit\n")
os.waitpid(child, 0)
print("Ctrl-Z: terminal given back, stopped; fg redrew; q quit with 0")
EOF
python3 "$TMP/tty_stop.py" "$NUPP_BPF" "$target" || fail "top and Ctrl-Z"
kill -9 "$target"
wait "$target" 2>/dev/null || true

# 5. Errors: the cause, and doctor.
st=0
"$NUPP_BPF" top --once -p 4194303 2>"$TMP/e1" || st=$?
assert_eq "$st" 1 "top of no process"
assert_contains "$TMP/e1" "no such process"
st=0
"$NUPP_BPF" top --once -p $$ 2>"$TMP/e2" || st=$?
assert_eq "$st" 1 "top of a shell"
assert_contains "$TMP/e2" "doctor"
st=0
"$NUPP_BPF" top -i 0 -p 1 2>"$TMP/e3" || st=$?
assert_eq "$st" 2 "a bad interval"
assert_contains "$TMP/e3" "invalid interval"

# 6. top -- COMMAND: the command's run, one table when it exits, its exit status.
st=0
"$NUPP_BPF" top -F 499 -i 60 -- "$NUPP_LUAJIT" "$NUPP_SOURCE_DIR/tests/data/cli/shares.lua" 1 >"$TMP/cmd.txt" 2>"$TMP/cmd.err" || st=$?
assert_eq "$st" 0 "top -- COMMAND status"
assert_contains "$TMP/cmd.txt" "shares.lua:heavy"
assert_contains "$TMP/cmd.err" "exited"
echo "PASS"
