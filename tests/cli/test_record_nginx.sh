#!/usr/bin/env bash
# OpenResty as it runs in production: nginx with Debian's lua-nginx-module (unpacked by
# scripts/fetch-nginx-lua) on our luajit2, two workers forked by the master before the
# attach, a content_by_lua_block handler doing known CPU work in named functions
# (tests/data/nginx/h.lua) under a curl load. `record -p MASTER --subprocesses`:
# - every worker is profiled, each under its own pid, and so are the two new workers a
#   reload half way through starts;
# - spin_a and spin_b hold the shares of the handler's samples that the workers' own CPU
#   clock gives them, within 3 points;
# - every request's stack is a path of the handler's call graph, nginx's own code is
#   [host], and its other phases (configuration, init_worker) never show the handler;
# - the abort table equals the one jit.attach reports inside the workers.
. "$(dirname "$0")/../support/lib.sh"
need_root
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
[ -x "$NGINX" ] || fail "nginx is not installed (scripts/bootstrap installs it)"
command -v curl >/dev/null || fail "curl is not installed (scripts/bootstrap installs it)"
L2=$NUPP_BINARY_DIR/luajit2
[ -f "$L2/lib/libluajit-5.1.so.2" ] || fail "our luajit2 is not built in $L2"
MOD=$NUPP_BINARY_DIR/nginx-lua
"$NUPP_SOURCE_DIR/scripts/fetch-nginx-lua" "$MOD" || fail "cannot unpack lua-nginx-module"
D=$NUPP_SOURCE_DIR/tests/data
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$TMP/logs" "$TMP/out"
# The workers run as nginx's default user (nobody), as in production: they write there.
chmod 755 "$TMP" && chmod 1777 "$TMP/out"
cat >"$TMP/nginx.conf" <<CONF
load_module $MOD/root/usr/lib/nginx/modules/ndk_http_module.so;
load_module $MOD/root/usr/lib/nginx/modules/ngx_http_lua_module.so;
daemon off;
master_process on;
worker_processes 2;
error_log $TMP/logs/error.log;
pid $TMP/nginx.pid;
events {}
http {
  lua_package_path "$D/nginx/?.lua;$MOD/root/usr/share/lua/5.1/?.lua;;";
  access_log off;
  init_worker_by_lua_block { package.loaded.oracle = dofile("$D/trace/oracle.lua"); package.loaded.oracle.start() }
  exit_worker_by_lua_block {
    local o, pid = package.loaded.oracle, ngx.worker.pid()
    o.stop()
    o.write("$TMP/out/oracle." .. pid)
    require("h").write_truth("$TMP/out/truth." .. pid)
  }
  server {
    listen 127.0.0.1:$PORT;
    location /ready { return 204; }
    location /work { content_by_lua_block { ngx.say(require("h").handle()) } }
    location /abort { content_by_lua_block { ngx.say(require("h").abort()) } }
  }
}
CONF
LD_LIBRARY_PATH=$L2/lib "$NGINX" -p "$TMP" -c "$TMP/nginx.conf" 2>"$TMP/nginx.err" &
master=$!
PIDS+=("$master")
for i in $(seq 100); do
  workers=$(pgrep -P "$master" | sort -n | tr '\n' ' ' || true)
  [ "$(echo $workers | wc -w)" = 2 ] && curl -sf "http://127.0.0.1:$PORT/ready" >/dev/null 2>&1 && break
  sleep 0.1
done
[ "$(echo $workers | wc -w)" = 2 ] || { cat "$TMP/nginx.err" "$TMP/logs/error.log" >&2; fail "nginx did not start 2 workers"; }
for w in $workers; do PIDS+=("$w"); done
grep -q "$L2/lib/libluajit-5.1.so.2" /proc/"$master"/maps || fail "nginx does not run on our luajit2"

"$NUPP_BPF" record -p "$master" --subprocesses -F 997 -d 8 -o "$TMP/p.json" --aborts "$TMP/a.csv" \
  2>"$TMP/rec.err" &
rec=$!
PIDS+=("$rec")
wait_recording "$TMP/rec.err"
# The load: two clients for 5 s, and 20 requests whose loop aborts its traces.
end=$((SECONDS + 5)) load=()
for c in 1 2; do
  (while [ $SECONDS -lt $end ]; do curl -sf "http://127.0.0.1:$PORT/work" >/dev/null || exit 1; done) &
  PIDS+=("$!")
  load+=("$!")
done
for i in $(seq 10); do curl -sf "http://127.0.0.1:$PORT/abort" >/dev/null || fail "request /abort failed"; done
# A reload half way: the master starts two new workers, the old ones finish and exit.
sleep 2
kill -HUP "$master"
for i in $(seq 100); do
  new=$(pgrep -P "$master" | sort -n | grep -vxF -f <(echo $workers | tr ' ' '\n') | tr '\n' ' ' || true)
  [ "$(echo $new | wc -w)" -ge 2 ] && break
  sleep 0.05
done
[ "$(echo $new | wc -w)" -ge 2 ] || fail "no new workers after the reload"
for w in $new; do PIDS+=("$w"); done
for i in $(seq 10); do curl -sf "http://127.0.0.1:$PORT/abort" >/dev/null || fail "request /abort failed"; done
wait "${load[@]}" || fail "a /work request failed"
wait "$rec" || { cat "$TMP/rec.err" >&2; fail "record failed"; }
cat "$TMP/rec.err"
kill -QUIT "$master" # graceful: each worker writes its oracle and CPU times as it exits
wait "$master" || true
workers="$workers $new"
if grep -E 'exited on signal|\[(alert|emerg|crit)\]' "$TMP/logs/error.log"; then fail "nginx reported the errors above"; fi
for w in $workers; do [ -f "$TMP/out/truth.$w" ] || { cat "$TMP/logs/error.log" >&2; fail "worker $w wrote no truth"; }; done

python3 - "$TMP/p.json" "$TMP/a.csv" "$TMP/out" "$master" $workers <<'PY'
import collections, csv, glob, json, re, sys
prof, ours_csv, out, master = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3], int(sys.argv[4])
workers = [int(w) for w in sys.argv[5:]]

per_pid = collections.Counter()
n = collections.Counter()
bad = []
for s in prof["samples"]:
    per_pid[s["pid"]] += s["count"]
    f = s["stack"].split(";")
    if f[0] not in ("[host]", "[coroutine]"):
        # nginx's other phases: the master reading its configuration (a new VM, loading
        # lua-resty-core), init_worker_by_lua and exit_worker_by_lua (the abort oracle).
        # The handler's functions run only in requests.
        ok = not any(x.startswith("h.lua:") and x != "h.lua:0" for x in f)
    elif f[0] == "[host]":
        # nginx's own code (and libc's): never a Lua frame.
        ok = len(f) == 2 and not re.search(r"\.lua:|^\[coroutine\]", f[1])
    else:
        # [coroutine];content_by_lua(nginx.conf:N):0;h.lua:handle;h.lua:spin_a|b, or
        # ...;h.lua:abort; a builtin or C function as a leaf (os.clock, ngx.say ...).
        ok = f[0] == "[coroutine]" and re.fullmatch(r"content_by_lua\(nginx\.conf:\d+\):0", f[1] if len(f) > 1 else "")
        lua = f[2:]
        # The abort oracle's jit.attach handler (and what it calls) runs on the thread
        # whose trace starts or aborts, over the frame being recorded.
        o = [i for i, x in enumerate(lua) if x.startswith("oracle.lua:")]
        if o:
            lua = lua[:o[0]]
        if ok and lua and not lua[-1].startswith("h.lua:"):
            lua = lua[:-1]
        # A worker's first request loads h.lua: require, its Lua loader, the module's chunk.
        if ok and lua[:1] == ["lj_cf_package_require"] and all(x.startswith("lj_cf_package_") or x == "h.lua:0" for x in lua):
            lua = []
        ok = ok and lua in ([], ["h.lua:handle"], ["h.lua:handle", "h.lua:spin_a"], ["h.lua:handle", "h.lua:spin_b"],
                            ["h.lua:abort"])
        if ok and "h.lua:spin_a" in f: n["a"] += s["count"]
        if ok and "h.lua:spin_b" in f: n["b"] += s["count"]
    if not ok:
        bad.append((s["count"], s["stack"]))
assert not bad, f"{sum(c for c, _ in bad)} samples off the call graph: {sorted(bad, reverse=True)[:8]}"
host = sum(s["count"] for s in prof["samples"] if s["stack"].startswith("[host];"))
print(f"{len(workers)} workers (2 before the reload, 2 after): samples {dict(per_pid)}; {host} in nginx's own code")
for w in workers:
    assert per_pid[w] >= 30, f"worker {w}: {per_pid[w]} samples ({dict(per_pid)})"
assert host > 0, "no sample in nginx's own code"
assert set(per_pid) <= set(workers) | {master}, dict(per_pid)

ta = tb = 0.0
for w in workers:
    a, b = map(float, open(f"{out}/truth.{w}").read().split())
    ta, tb = ta + a, tb + b
truth, got = ta / (ta + tb), n["a"] / (n["a"] + n["b"])
print(f"spin_a: {100 * got:.1f} % of the handler's samples, {100 * truth:.1f} % by the workers' clocks "
      f"({n['a']} + {n['b']} samples; {ta:.2f} + {tb:.2f} s)")
assert abs(got - truth) <= 0.03, (got, truth)

def rows(path):
    with open(path, newline="") as f:
        return [(r["severity"], r["reason"], r["location"], int(r["count"])) for r in csv.DictReader(f)]
want = collections.Counter()
for p in glob.glob(f"{out}/oracle.*.default.csv"):
    for sev, reason, loc, c in rows(p):
        want[(sev, reason, loc)] += c
have = collections.Counter()
for sev, reason, loc, c in rows(ours_csv):
    have[(sev, reason, loc)] += c
print("aborts:", dict(have))
assert have == want, (dict(have), dict(want))
assert any("FastFunc ffi.typeof" in k[1] for k in have), dict(have)
PY
