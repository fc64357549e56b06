// The flame graph's own script: hover details, click to zoom, search with Ctrl-F.
// Embedded in every SVG nupp-bpf writes (user/report/report_svg.c); data F, A and M precede it.
// F[i] = [name, offset, samples, depth, compiled, interpreted, C, GC, JIT, self, abort index]
// for the i-th child of #frames; A = abort texts; M = layout and totals.
"use strict";
var frames, details, matched, unzoomBtn, box, zoomed = -1, COLORS = M.colors;

// Formats an integer with thousands separators.
function num(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
// A share in percent with one decimal.
function pct(a, b) { return b ? (100 * a / b).toFixed(1) + "%" : "-"; }

// The label that fits w pixels (the writer truncates the same way).
function fit(name, w) {
  var n = Math.floor((w - 6) / (M.fontsize * 0.59));
  if (n < 3) return "";
  return name.length <= n ? name : name.substr(0, n - 2) + "..";
}

// The tooltip text of frame i.
function describe(i) {
  var f = F[i], t = f[0] + "\n" + num(f[2]) + " samples (" + pct(f[2], M.total) + ")", k, known = 0, s = [];
  if (f[9]) t += ", self " + num(f[9]) + " (" + pct(f[9], M.total) + ")";
  for (k = 0; k < 5; k++) known += f[4 + k];
  for (k = 0; k < 5; k++) if (f[4 + k]) s.push(M.states[k] + " " + pct(f[4 + k], f[2]));
  if (known < f[2]) s.push("state unknown " + pct(f[2] - known, f[2]));
  t += "\nVM states: " + s.join(", ");
  if (typeof D !== "undefined")
    t += "\nchange from BASE: " + (D[i] >= 0 ? "+" : "") + D[i].toFixed(2) + " points of the samples";
  if (f[10] >= 0) t += "\nJIT trace aborts:\n" + A[f[10]];
  return t;
}

// Places frame i at x, width w (pixels) with label, VM-state strip and abort mark.
function place(i, x, w) {
  var g = frames[i], f = F[i], r = g.querySelector("rect"), t = g.querySelector("text"), k, m, e, j;
  r.setAttribute("x", x.toFixed(2));
  r.setAttribute("width", Math.max(w - 0.5, 0).toFixed(2));
  t.setAttribute("x", (x + 3).toFixed(2));
  t.textContent = fit(f[0], w);
  var strip = g.querySelectorAll("rect[data-k]");
  for (j = 0; j < strip.length; j++) {
    e = strip[j];
    k = +e.getAttribute("data-k");
    var before = 0;
    for (m = 0; m < k; m++) before += f[4 + m];
    e.setAttribute("x", (x + w * before / f[2]).toFixed(2));
    e.setAttribute("width", Math.max(w * f[4 + k] / f[2] - 0.5, 0).toFixed(2));
  }
  e = g.querySelector("path.a");
  if (e) {
    e.setAttribute("transform", "translate(" + (x + w - 0.5).toFixed(2) + ",0)");
    e.style.display = w >= 8 ? "" : "none";
  }
}

// Zooms so that frame z spans the width (-1: the whole profile).
function zoom(z) {
  var full = M.width - 2 * M.pad, zo = 0, zn = M.total, zd = 0, i, f;
  if (z >= 0) { zo = F[z][1]; zn = F[z][2]; zd = F[z][3]; }
  for (i = 0; i < F.length; i++) {
    f = F[i];
    var g = frames[i], inside = f[1] >= zo && f[1] + f[2] <= zo + zn && f[3] >= zd;
    var above = f[3] < zd && f[1] <= zo && f[1] + f[2] >= zo + zn;
    if (inside) {
      g.style.display = "";
      g.classList.remove("parent");
      place(i, M.pad + (f[1] - zo) / zn * full, f[2] / zn * full);
    } else if (above) {
      g.style.display = "";
      g.classList.add("parent");
      place(i, M.pad, full);
    } else {
      g.style.display = "none";
    }
  }
  zoomed = z;
  unzoomBtn.style.display = z >= 0 ? "" : "none";
  if (box.value) search(box.value);
}

// Highlights the frames whose name matches term (a regular expression, or the literal
// text if it is not one) and shows the share of samples under them.
function search(term) {
  var re = null, i, spans = [], total = 0, end = -1;
  if (term) {
    try { re = new RegExp(term); } catch (e) { re = new RegExp(term.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")); }
  }
  for (i = 0; i < F.length; i++) {
    var r = frames[i].querySelector("rect"), hit = re && F[i][0].charAt(0) !== "\u2026" && re.test(F[i][0]);
    r.setAttribute("fill", hit ? M.searchColor : r.getAttribute("data-fill"));
    if (hit) spans.push([F[i][1], F[i][1] + F[i][2]]);
  }
  spans.sort(function (a, b) { return a[0] - b[0] || b[1] - a[1]; });
  for (i = 0; i < spans.length; i++) {
    if (spans[i][1] <= end) continue;
    total += spans[i][1] - Math.max(spans[i][0], end);
    end = spans[i][1];
  }
  matched.textContent = re ? "Matched: " + pct(total, M.total) : "";
  matched.setAttribute("data-samples", re ? total : 0);
}

// The frame index of the element under an event, or -1.
function frameOf(e) {
  for (var n = e.target; n && n !== document; n = n.parentNode)
    if (n.getAttribute && n.getAttribute("class") && n.parentNode && n.parentNode.id === "frames")
      return Array.prototype.indexOf.call(frames, n);
  return -1;
}

function init() {
  frames = document.getElementById("frames").children;
  details = document.getElementById("details").firstChild;
  matched = document.getElementById("matched");
  unzoomBtn = document.getElementById("unzoom");
  box = document.getElementById("searchbox");
  var fr = document.getElementById("frames");
  fr.addEventListener("mouseover", function (e) {
    var i = frameOf(e);
    if (i < 0) return;
    var g = frames[i];
    if (!g.querySelector("title")) {
      var t = document.createElementNS("http://www.w3.org/2000/svg", "title");
      t.textContent = describe(i);
      g.appendChild(t);
    }
    details.nodeValue = describe(i).split("\n").slice(0, 2).join(": ");
  });
  fr.addEventListener("mouseout", function () { details.nodeValue = " "; });
  fr.addEventListener("click", function (e) { var i = frameOf(e); if (i >= 0) zoom(i); });
  unzoomBtn.addEventListener("click", function () { zoom(-1); });
  box.addEventListener("input", function () { search(box.value); });
  document.getElementById("searchclear").addEventListener("click", function () { box.value = ""; search(""); });
  window.addEventListener("keydown", function (e) {
    if ((e.ctrlKey || e.metaKey) && (e.key === "f" || e.key === "F") || e.key === "F3") {
      e.preventDefault();
      box.focus();
      box.select();
    } else if (e.key === "Escape") {
      if (document.activeElement === box && box.value) { box.value = ""; search(""); }
      else zoom(-1);
    }
  });
  var q = /[?&]s=([^&]*)/.exec(location.search);
  if (q) { box.value = decodeURIComponent(q[1]); search(box.value); }
}
