"""The report's fixed text: inline CSS and JS (no network access) and the page head and tail around the body."""

from __future__ import annotations

import base64
import hashlib
from html import escape

CSS = """
:root{--bg:#f5f6f8;--card:#fff;--line:#e1e4e8;--text:#1f2328;--muted:#656d76;--accent:#3b5bdb;
--ok:#1a7f37;--ok-bg:#dafbe1;--bad:#cf222e;--bad-bg:#ffebe9;--warn:#9a6700;--warn-bg:#fff8c5;--none:#8c959f}
*{box-sizing:border-box}
[hidden]{display:none!important}
html{scroll-padding-top:8px}
body{margin:0;background:var(--bg);color:var(--text);font:13px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,
"Liberation Sans",sans-serif}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;font-size:12px}
a{color:var(--accent);text-decoration:none}
a:hover{text-decoration:underline}
.wrap{max-width:1680px;margin:0 auto;padding:16px 20px 40px}
header.top{display:flex;align-items:baseline;gap:14px;margin-bottom:12px}
header.top h1{font-size:18px;margin:0;font-weight:600}
header.top .sub{color:var(--muted)}
.runs{display:grid;grid-template-columns:repeat(auto-fill,minmax(340px,1fr));gap:10px;margin-bottom:14px}
.run-card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.run-card h2{font-size:14px;margin:0 0 2px;font-weight:600;overflow-wrap:anywhere}
.run-card .kv{color:var(--muted);font-size:12px;overflow-wrap:anywhere}
.run-card .rate{font-size:22px;font-weight:600;margin:6px 0 2px}
.run-card .rate small{font-size:12px;font-weight:400;color:var(--muted);margin-left:6px}
.bar{display:flex;height:6px;border-radius:3px;overflow:hidden;background:#eaeef2;margin:4px 0 6px}
.bar span{display:block}
.bar .b-success{background:var(--ok)}.bar .b-failure{background:var(--bad)}
.bar .b-infra_failure{background:#d4a72c}.bar .b-unfinished{background:var(--none)}
.counts{display:flex;flex-wrap:wrap;gap:4px 10px;font-size:12px;color:var(--muted)}
.panel{background:var(--card);border:1px solid var(--line);border-radius:8px}
.filters{display:flex;flex-wrap:wrap;align-items:center;gap:8px 16px;padding:8px 12px;
border-bottom:1px solid var(--line)}
.filters label{display:flex;align-items:center;gap:5px;cursor:pointer;user-select:none}
.filters select,.filters input[type=search]{font:inherit;padding:3px 6px;border:1px solid var(--line);
border-radius:5px;background:#fff}
.filters input[type=search]{width:260px}
.filters select{max-width:300px}
.filters .count{margin-left:auto;color:var(--muted)}
.filters .keys{color:var(--muted);font-size:12px}
kbd{font:11px ui-monospace,Menlo,Consolas,"Liberation Mono",monospace;border:1px solid var(--line);
border-bottom-width:2px;border-radius:3px;padding:0 4px;background:#fff}
.table-scroll{max-height:46vh;overflow:auto}
table.task-table{border-collapse:collapse;width:100%}
.task-table th{position:sticky;top:0;background:#f6f8fa;text-align:left;font-weight:600;font-size:12px;
padding:6px 10px;border-bottom:1px solid var(--line);white-space:nowrap;z-index:1}
.task-table td{padding:4px 10px;border-bottom:1px solid #eef0f2;vertical-align:middle}
.task-table tr.task-row{cursor:pointer}
.task-table tr.task-row:hover td{background:#f6f8fa}
.task-table tr.task-row.current td{background:#eef2ff}
.task-table td.domain{color:var(--muted);white-space:nowrap}
.task-table td.tid{white-space:nowrap;font-weight:500}
.task-table td.instr{color:var(--muted);max-width:520px;overflow:hidden;text-overflow:ellipsis;white-space:nowrap}
.task-table td.mark{white-space:nowrap}
.sym{display:inline-block;width:18px;text-align:center;font-weight:700}
.st-success .sym,.sym.st-success,.badge.st-success{color:var(--ok)}
.st-failure .sym,.sym.st-failure,.badge.st-failure{color:var(--bad)}
.st-infra_failure .sym,.sym.st-infra_failure,.badge.st-infra_failure{color:var(--warn)}
.st-missing .sym,.st-unfinished .sym,.sym.st-unfinished,.badge.st-missing,.badge.st-unfinished{color:var(--none)}
.mark .meta{color:var(--muted);font-size:12px}
.badge{display:inline-block;padding:0 6px;border-radius:9px;font-size:11px;font-weight:600;line-height:18px;
border:1px solid currentColor;white-space:nowrap}
.badge.st-success,.badge.ok{background:var(--ok-bg);color:var(--ok);border-color:#aceebb}
.badge.st-failure,.badge.bad{background:var(--bad-bg);color:var(--bad);border-color:#ffcecb}
.badge.st-infra_failure,.badge.warn{background:var(--warn-bg);color:var(--warn);border-color:#eed888}
.badge.st-missing,.badge.st-unfinished{background:#f6f8fa;border-color:var(--line)}
.task-detail{display:none;margin-top:16px}
.task-detail:target{display:block}
.detail-head{display:flex;align-items:baseline;gap:12px;flex-wrap:wrap;padding:10px 12px 4px}
.detail-head h2{font-size:16px;margin:0;font-weight:600;overflow-wrap:anywhere}
.detail-head .domain{color:var(--muted)}
.detail-head .nav{margin-left:auto;display:flex;gap:12px}
.instruction{margin:0;padding:4px 12px 10px;font-size:14px;white-space:pre-wrap;overflow-wrap:anywhere}
.grid{display:grid;grid-template-columns:40px repeat(var(--runs),minmax(0,1fr));border-top:1px solid var(--line)}
.grid>div{padding:8px 10px;border-bottom:1px solid var(--line);border-left:1px solid var(--line);min-width:0}
.grid>.step-no{border-left:0;color:var(--muted);font-weight:600;text-align:right;padding-right:6px}
.grid>.run-head{position:sticky;top:0;background:#f6f8fa;z-index:2;display:flex;flex-wrap:wrap;gap:4px 10px;
align-items:center}
.run-head .name{font-weight:600;overflow-wrap:anywhere}
.run-head .meta{color:var(--muted);font-size:12px}
.grid>.corner{position:sticky;top:0;background:#f6f8fa;z-index:2}
.cell{display:flex;flex-wrap:wrap;gap:8px 12px;align-items:flex-start;align-content:flex-start}
.cell.empty{background:repeating-linear-gradient(135deg,#fafbfc 0 6px,#f3f4f6 6px 12px)}
.shot{position:relative;flex:1 1 520px;max-width:1100px;background:#eaeef2;border:1px solid var(--line);
border-radius:4px;overflow:hidden}
.shot img{position:absolute;inset:0;width:100%;height:100%;display:block}
.shot .noimg{position:absolute;inset:0;display:flex;align-items:center;justify-content:center;color:var(--muted)}
.shot svg.overlay{position:absolute;inset:0;width:100%;height:100%;pointer-events:none;overflow:hidden}
.ov-label{position:absolute;transform:translate(var(--tx,10px),var(--ty,-125%));background:rgba(20,22,26,.86);color:#fff;
padding:1px 6px;border-radius:4px;border-left:3px solid;font:11px/1.5 ui-monospace,Menlo,Consolas,
"Liberation Mono",monospace;white-space:nowrap;max-width:70%;overflow:hidden;text-overflow:ellipsis;
pointer-events:none}
.ov-label.ov-left{--tx:calc(-100% - 10px)}
.ov-label.ov-below{--ty:45%}
.ov-banner{position:absolute;left:6px;top:6px;max-width:calc(100% - 12px);background:rgba(20,22,26,.86);
color:#fff;padding:2px 7px;border-radius:4px;font:11px/1.5 ui-monospace,Menlo,Consolas,"Liberation Mono",
monospace;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.info{flex:1 1 240px;min-width:0;display:flex;flex-direction:column;gap:5px}
.act{display:flex;flex-wrap:wrap;gap:6px;align-items:center}
.act code{background:#f6f8fa;border:1px solid var(--line);border-radius:4px;padding:1px 5px;
overflow-wrap:anywhere}
.thought{white-space:pre-wrap;overflow-wrap:anywhere;max-height:9.5em;overflow:auto;color:#2d333b}
.who{display:inline-block;padding:0 5px;border-radius:3px;font-size:10px;font-weight:700;line-height:16px;
text-transform:uppercase;letter-spacing:.04em;color:#fff;vertical-align:1px}
.who.planner{background:#6f42c1}.who.executor{background:#0b7285}
.note{font-size:12px;overflow-wrap:anywhere;white-space:pre-wrap}
.note.bad{color:var(--bad)}.note.warn{color:var(--warn)}
.stats{display:flex;flex-wrap:wrap;gap:2px 10px;color:var(--muted);font-size:12px}
.pos{color:var(--ok);font-weight:600}.neg{color:var(--bad);font-weight:600}.zero{color:var(--muted)}
details.raw summary{cursor:pointer;color:var(--muted);font-size:12px}
details.raw pre{white-space:pre-wrap;overflow-wrap:anywhere;max-height:320px;overflow:auto;background:#f6f8fa;
border:1px solid var(--line);border-radius:4px;padding:6px;margin:4px 0 0}
.final .summary{display:flex;flex-wrap:wrap;gap:4px 10px;align-items:center}
.empty-note{color:var(--muted);padding:16px 12px}
.reasons{display:flex;flex-wrap:wrap;gap:4px 6px;align-items:center;margin-top:6px}
button.reason{font:inherit;font-size:12px;border:1px solid var(--line);border-radius:9px;background:#fff;
padding:0 7px;cursor:pointer;color:var(--text)}
button.reason:hover{border-color:var(--accent)}
button.reason b{color:var(--bad)}
.task-table td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
.mark .sym.hit,td.mark.hit .sym{outline:2px solid var(--accent);border-radius:3px}
.group-stats{padding:0 12px 10px}
.muted{color:var(--muted)}
.run-head .why{color:var(--bad);font-size:12px;flex-basis:100%}
.run-head .meta span+span:before{content:" · "}
.views>.mode{display:flex;align-items:center;gap:5px;padding:6px 12px;border-top:1px solid var(--line);
cursor:pointer;user-select:none;color:var(--muted)}
.views.compact>.grid,.views:not(.compact)>.strips{display:none}
.strips{border-top:1px solid var(--line);padding:4px 12px 10px;overflow-x:auto}
.strip{display:flex;gap:10px;align-items:flex-start;padding:6px 0;border-bottom:1px solid #eef0f2}
.strip-head{flex:0 0 150px;display:flex;flex-wrap:wrap;gap:4px;align-items:center}
.thumbs{display:grid;grid-auto-flow:column;grid-auto-columns:120px;gap:6px}
.thumb{font:inherit;padding:0;border:1px solid var(--line);border-radius:4px;background:#fff;cursor:pointer;
width:120px;text-align:left;overflow:hidden;color:var(--text);position:relative}
.tadv{position:absolute;right:2px;top:2px;z-index:1;background:rgba(255,255,255,.92);border-radius:3px;
padding:0 3px;font-size:10px}
.thumb.invalid{border-color:var(--bad)}
.thumb.open{outline:2px solid var(--accent)}
.thumb .shot{flex:none;width:100%;border:0;border-radius:0}
.thumb .ov-label,.thumb .ov-banner{display:none}
.thumb svg g[class$="click"],.thumb svg g.ov-move{transform-box:fill-box;transform-origin:center;transform:scale(2.5)}
.tcap{display:block;font-size:11px;padding:1px 4px;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}
.tcap code{font-size:10px}
.expanded{margin-top:8px;border:1px solid var(--line);border-radius:6px}
.expanded-head{display:flex;gap:6px;align-items:center;padding:4px 10px;background:#f6f8fa;font-weight:600;
border-bottom:1px solid var(--line)}
.expanded>.cell{padding:8px 10px}
details.prompt .msg{margin:4px 0;padding:2px 6px;border-left:3px solid var(--line);display:flex;flex-wrap:wrap;
gap:4px 8px;align-items:flex-start}
details.prompt .role{font-weight:600;font-size:11px;text-transform:uppercase;color:var(--muted);flex:0 0 100%}
details.prompt .msg pre{flex:1 1 100%;margin:0}
details.prompt .same{color:var(--muted);font-style:italic;font-size:12px}
.pimg{display:inline-flex;flex-direction:column;align-items:center;width:110px;font-size:10px;color:var(--muted);
border:1px solid var(--line);border-radius:3px;padding:2px;text-align:center;overflow-wrap:anywhere}
.pimg img{width:100%;height:auto;display:block}
.pimg.omitted{opacity:.6;border-style:dashed}
"""

JS = """
(function () {
  "use strict";
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr.task-row"));
  var byId = function (id) { return document.getElementById(id); };
  var failed = byId("f-failed"), disagree = byId("f-disagree"), domain = byId("f-domain");
  var search = byId("f-search"), count = byId("f-count"), reason = byId("f-reason");
  var each = function (root, sel, fn) { Array.prototype.forEach.call(root.querySelectorAll(sel), fn); };
  function apply() {
    var q = search ? search.value.trim().toLowerCase() : "";
    var shown = 0;
    rows.forEach(function (tr) {
      var st = tr.getAttribute("data-statuses").split(",");
      var ok = true;
      if (failed && failed.checked && st.every(function (s) { return s === "success"; })) ok = false;
      if (disagree && disagree.checked && !(st.indexOf("success") >= 0 && st.indexOf("failure") >= 0)) ok = false;
      if (domain && domain.value && tr.getAttribute("data-domain") !== domain.value) ok = false;
      if (q && tr.getAttribute("data-search").indexOf(q) < 0) ok = false;
      var why = reason ? reason.value : "";
      if (why && (tr.getAttribute("data-reasons") || "").split(" ").indexOf(why) < 0) ok = false;
      each(tr, "[data-reason]", function (m) {
        m.classList.toggle("hit", !!why && m.getAttribute("data-reason") === why);
      });
      tr.hidden = !ok;
      if (ok) shown += 1;
    });
    if (count) count.textContent = shown + " of " + rows.length + " " + (count.getAttribute("data-noun") || "tasks");
  }
  function cellOf(section, col, step) {  // a step's (or "end": the final) cell of the grid's column `col`
    var sel = step === "end" ? ".cell.final" : '.cell.step[data-step="' + step + '"]';
    return section.querySelector('.grid > ' + sel + '[data-run="' + col + '"]');
  }
  function fillPrompt(details) {  // a prompt's images, from the grid's screenshots, once it is first opened
    var section = details.closest(".task-detail");
    each(details, ".pimg[data-shot]", function (p) {
      var cell = p.closest("[data-run]");
      var img = cell && section.querySelector('.grid > [data-run="' + cell.getAttribute("data-run") +
        '"] .shot[data-shot="' + CSS.escape(p.getAttribute("data-shot")) + '"] img');
      if (img && !p.querySelector("img")) p.insertBefore(img.cloneNode(), p.firstChild);
    });
  }
  function fillStrips(views) {  // the thumbnails, from the grid's screenshots, once the filmstrips are first shown
    var section = views.closest(".task-detail");
    each(views, ".thumb", function (t) {
      var cell = cellOf(section, t.getAttribute("data-col"), t.getAttribute("data-step"));
      var shot = cell && cell.querySelector(".shot");
      if (!shot || t.querySelector(".shot")) return;
      var copy = shot.cloneNode(true), link = copy.querySelector("a");
      if (link) link.parentNode.replaceChild(link.firstChild, link);
      t.insertBefore(copy, t.firstChild);
    });
  }
  function expand(t) {  // a thumbnail's step in full under its strip; clicked again: closed
    var views = t.closest(".views"), box = views.querySelector(".expanded"), open = t.classList.contains("open");
    var step = t.getAttribute("data-step"), cell = cellOf(t.closest(".task-detail"), t.getAttribute("data-col"), step);
    each(views, ".thumb.open", function (o) { o.classList.remove("open"); });
    box.innerHTML = "";
    box.hidden = open || !cell;
    if (open || !cell) return;
    t.classList.add("open");
    var head = document.createElement("div");
    head.className = "expanded-head";
    head.innerHTML = t.closest(".strip").querySelector(".strip-head").innerHTML;  // our own escaped markup
    head.appendChild(document.createTextNode(step === "end" ? " the end" : " step " + step));
    box.appendChild(head);
    box.appendChild(cell.cloneNode(true));
    t.closest(".strip").after(box);
  }
  function hydrate(section) {
    each(section, ".views.compact", fillStrips);
    each(section, ".thumb", function (t) { t.addEventListener("click", function () { expand(t); }); });
    each(section, ".compact-toggle", function (box) {
      box.addEventListener("change", function () {
        var views = box.closest(".views");
        views.classList.toggle("compact", box.checked);
        if (box.checked) fillStrips(views);
      });
    });
  }
  document.addEventListener("toggle", function (ev) {  // toggle does not bubble: caught on its way down
    if (ev.target.matches && ev.target.matches("details.prompt") && ev.target.open) fillPrompt(ev.target);
  }, true);
  function current() {
    rows.forEach(function (tr) {
      tr.classList.toggle("current", location.hash === "#" + tr.getAttribute("data-detail"));
    });
    var section = location.hash.length > 1 && document.getElementById(location.hash.slice(1));
    if (!section || !section.classList.contains("task-detail")) return;
    var data = section.querySelector("script.detail-data");
    if (data) {  // our own escaped markup, kept as a JSON string until the task is first opened
      section.innerHTML = JSON.parse(data.textContent);
      hydrate(section);
      section.scrollIntoView();
    }
  }
  [failed, disagree, domain, search, reason].forEach(function (el) {
    if (el) { el.addEventListener("input", apply); el.addEventListener("change", apply); }
  });
  each(document, "button.reason", function (b) {  // a failure count: show only its episodes (again: all)
    b.addEventListener("click", function () {
      if (!reason) return;
      reason.value = reason.value === b.getAttribute("data-reason") ? "" : b.getAttribute("data-reason");
      apply();
      reason.scrollIntoView({block: "nearest"});
    });
  });
  rows.forEach(function (tr) {
    tr.addEventListener("click", function (ev) {
      if (ev.target.closest("a")) return;
      location.hash = tr.getAttribute("data-detail");
    });
  });
  document.addEventListener("keydown", function (ev) {  // j / k: next / previous shown task; Escape: the list
    if (ev.ctrlKey || ev.metaKey || ev.altKey || ev.target.closest("input, select, textarea")) return;
    var shown = rows.filter(function (tr) { return !tr.hidden; });
    var at = shown.findIndex(function (tr) { return location.hash === "#" + tr.getAttribute("data-detail"); });
    var to = ev.key === "j" ? shown[at + 1] : ev.key === "k" ? shown[Math.max(at - 1, 0)] : null;
    if (to) location.hash = to.getAttribute("data-detail");
    else if (ev.key === "Escape" && at >= 0) location.hash = shown[at].id;
  });
  window.addEventListener("hashchange", current);
  apply();
  current();
})();
"""


# Only this exact script may run (a hash-pinned CSP): were model text ever to slip into the page as markup, no
# injected script would execute, and nothing may be fetched from the network.
SCRIPT_HASH = base64.b64encode(hashlib.sha256(JS.encode()).digest()).decode()
CSP = f"default-src 'none'; img-src 'self' data: file:; style-src 'unsafe-inline'; script-src 'sha256-{SCRIPT_HASH}'"


def head(title: str) -> str:
    """The document from `<!doctype>` to the opening of `<body>`, with the inline stylesheet."""
    return (
        '<!doctype html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f'<title>{escape(title)}</title><style>{CSS}</style></head>\n<body><div class="wrap">\n'
    )


def tail() -> str:
    """The inline script and the closing tags."""
    return f"</div><script>{JS}</script></body></html>\n"
