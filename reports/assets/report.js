(function () {
  "use strict";
  // Every string from the trace is written with textContent: never parsed as markup.
  var data = JSON.parse(document.getElementById("audit-data").textContent);
  var S = data.strings, cols = data.columns, rows = data.rows, shown = data.shown, details = data.details;
  var PAGE = 300;
  var col = {};
  cols.forEach(function (c, i) { col[c.key] = i; });
  var det = {};
  data.detail_fields.forEach(function (f, i) { det[f] = i; });

  // Numbers are shown as costmodel/units.py wrote them (the payload's `shown`), as every format prints them.
  function show(r, j) {
    var c = cols[j], v = rows[r][j];
    if (c.fmt === "text") return S[v];
    if (c.fmt === "bool") return v ? "\u25cf" : "";
    return S[shown[r][j]];
  }
  function value(r, key) { var i = col[key]; return i === undefined ? null : rows[r][i]; }
  function text(r, key) { var v = value(r, key); return v === null ? "" : S[v]; }

  // ---- op table: sort, filter, paginate ----
  var table = document.getElementById("ops-table");
  var state = { sort: col.measured_s !== undefined ? col.measured_s : col.expected_s, dir: -1, limit: PAGE };
  var order = rows.map(function (_, i) { return i; });
  var searchKeys = ["name", "module", "opcode", "framework_op", "source"];

  function compare(a, b) {
    var c = cols[state.sort], x = rows[a][state.sort], y = rows[b][state.sort];
    if (c.fmt === "text") { x = S[x]; y = S[y]; }
    var xn = x === null || x === "", yn = y === null || y === "";
    if (xn || yn) return xn === yn ? a - b : (xn ? 1 : -1);  // unknowns last either way
    var d = c.fmt === "text" ? x.localeCompare(y) : x - y;
    return d === 0 ? a - b : state.dir * d;
  }
  function matches(r) {
    var q = document.getElementById("op-filter").value.trim().toLowerCase();
    var bound = document.getElementById("bound-filter").value;
    var flagOnly = document.getElementById("flagged-only").checked;
    if (bound && text(r, "bound_by") !== bound) return false;
    if (flagOnly && !value(r, "flagged")) return false;
    if (!q) return true;
    return searchKeys.some(function (k) { return text(r, k).toLowerCase().indexOf(q) >= 0; });
  }
  function renderTable() {
    if (!table) return;
    var shown = order.filter(matches);
    var body = document.createElement("tbody");
    shown.slice(0, state.limit).forEach(function (r) {
      var tr = document.createElement("tr");
      tr.dataset.i = r;
      if (value(r, "flagged")) tr.className = "flagged";
      cols.forEach(function (c, j) {
        var td = document.createElement("td");
        td.textContent = show(r, j);
        td.className = c.fmt === "text" ? "text" : "num";
        if (c.key === "bound_by") td.className += " b-" + S[rows[r][j]];
        if (c.fmt === "text") td.title = S[rows[r][j]];
        tr.appendChild(td);
      });
      body.appendChild(tr);
    });
    table.replaceChild(body, table.tBodies[0]);
    var more = document.getElementById("show-all");
    more.hidden = shown.length <= state.limit;
    more.textContent = "Show all " + shown.length + " rows";
    document.getElementById("op-count").textContent =
      (shown.length < rows.length ? shown.length + " of " + rows.length : rows.length) + " ops" +
      (shown.length > state.limit ? " (first " + state.limit + " shown)" : "");
  }
  function sortBy(j) {
    if (state.sort === j) state.dir = -state.dir;
    else { state.sort = j; state.dir = cols[j].fmt === "text" ? 1 : -1; }
    order.sort(compare);
    table.querySelectorAll("th").forEach(function (th) {
      var k = +th.dataset.col;
      th.setAttribute("aria-sort", k === state.sort ? (state.dir > 0 ? "ascending" : "descending") : "none");
    });
    renderTable();
  }
  if (table) {
    table.querySelectorAll("th").forEach(function (th) {
      th.addEventListener("click", function () { sortBy(+th.dataset.col); });
    });
    ["op-filter", "bound-filter", "flagged-only"].forEach(function (id) {
      document.getElementById(id).addEventListener("input", function () { state.limit = PAGE; renderTable(); });
    });
    document.getElementById("show-all").addEventListener("click", function () { state.limit = Infinity; renderTable(); });
    state.dir = 1;
    sortBy(state.sort);
  }

  // Printing opens collapsed lists; the op table prints the rows on screen.
  window.addEventListener("beforeprint", function () {
    document.querySelectorAll("details").forEach(function (d) { d.open = true; });
  });

  // ---- roofline hover card ----
  var tip = document.getElementById("tip"), chart = document.getElementById("roofline");
  function line(parent, label, content) {
    if (!content) return;
    var d = document.createElement("div");
    d.textContent = label ? label + ": " + content : content;
    parent.appendChild(d);
  }
  function fill(r) {
    while (tip.firstChild) tip.removeChild(tip.firstChild);
    var b = document.createElement("b");
    b.textContent = text(r, "name");
    tip.appendChild(b);
    var info = details[r];
    function field(k) { return col[k] === undefined ? "" : show(r, col[k]); }
    line(tip, "", text(r, "module") + " \u00b7 " + text(r, "opcode") + " \u00b7 " + S[info[det.category]] +
         " \u00b7 " + S[info[det.dtype]]);
    line(tip, "", text(r, "bound_by") + "-bound" + (value(r, "flagged") ? " \u00b7 flagged" : ""));
    line(tip, data.predicted ? "expected" : "measured",
         data.predicted ? field("expected_s") : field("measured_s") + " \u00b7 expected " + field("expected_s") +
         " \u00b7 roofline fraction " + field("efficiency"));
    line(tip, "intensity", field("intensity") + " \u00b7 " + field("flops") + " \u00b7 " + field("bytes"));
    if (!data.predicted && info[det.measured_s_max] !== null)
      line(tip, "slowest device", S[info[det.slowest]] + " of " + info[det.devices] + " device(s)");
    if (!data.predicted) line(tip, "achieved", field("achieved_flops_per_s") + " \u00b7 " + field("achieved_bytes_per_s"));
    line(tip, "framework op", text(r, "framework_op"));
    line(tip, "source", text(r, "source"));
    line(tip, "why", S[info[det.reasons]]);
    line(tip, "try", S[info[det.suggestion]]);
    line(tip, "provenance", S[info[det.provenance]]);
  }
  if (chart && tip) {
    chart.addEventListener("mouseover", function (ev) {
      var t = ev.target;
      if (!t.classList || !t.classList.contains("pt")) return;
      fill(+t.getAttribute("data-i"));
      var box = chart.parentNode.getBoundingClientRect(), p = t.getBoundingClientRect();
      tip.hidden = false;
      var left = p.left - box.left + p.width + 8;
      if (left + tip.offsetWidth > box.width) left = Math.max(0, p.left - box.left - tip.offsetWidth - 8);
      tip.style.left = left + "px";
      tip.style.top = Math.max(0, p.top - box.top - 8) + "px";
    });
    chart.addEventListener("mouseout", function (ev) {
      if (ev.target.classList && ev.target.classList.contains("pt")) tip.hidden = true;
    });
    // Clicking a point finds its op in the table.
    chart.addEventListener("click", function (ev) {
      var t = ev.target;
      if (!t.classList || !t.classList.contains("pt") || !table) return;
      var filter = document.getElementById("op-filter");
      filter.value = text(+t.getAttribute("data-i"), "name");
      state.limit = PAGE;
      renderTable();
      table.scrollIntoView({ block: "start" });
    });
    // Hovering a table row lights up its point.
    var lit = null;
    if (table) table.addEventListener("mouseover", function (ev) {
      var tr = ev.target.closest ? ev.target.closest("tbody tr") : null;
      var pt = tr ? chart.querySelector('circle[data-i="' + (+tr.dataset.i) + '"]') : null;
      if (lit && lit !== pt) lit.classList.remove("hot");
      if (pt) pt.classList.add("hot");
      lit = pt;
    });
  }
})();
