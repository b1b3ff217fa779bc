// mcphost console: polls <base>/api/state and draws it. Text from the host (tool names, errors,
// client names) only ever goes through textContent, never through HTML.
"use strict";

const base = document.body.dataset.base;
const pollMs = Number(document.body.dataset.poll) || 1000;
const confirming = new Set();  // sessions whose End button was pressed once
let catalogDigest = null;
let pinsVersion = null;   // the pin store's version when the pins section was last drawn
let catalogOffset = 0;     // the catalog and budgets tables are paged by the server
let budgetsOffset = 0;
let budgetsPage = 50;
const CATALOG_PAGE = 100;

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svgEl(tag, attrs) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, String(value));
  return node;
}

function byId(id) { return document.getElementById(id); }
function fill(node, ...children) { node.replaceChildren(...children.flat(Infinity).filter(c => c !== null && c !== undefined)); }
// On a narrow screen each row is drawn as a card: every cell carries its column's name.
function label(table) {
  const names = [...table.tHead.rows[0].cells].map(cell => cell.textContent);
  for (const row of table.tBodies[0].rows) [...row.cells].forEach((cell, i) => cell.setAttribute("data-label", names[i] || ""));
}

function badge(state, text) { return el("span", {class: "badge", "data-state": state}, text || state); }

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 90) return `${seconds.toFixed(seconds < 10 ? 1 : 0)} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

function ms(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const value = seconds * 1000;
  return value < 10 ? `${value.toFixed(2)} ms` : `${Math.round(value)} ms`;
}

function describe(list, limit) {
  if (list === null || list === undefined) return "all";
  if (!list.length) return "none";
  const shown = list.slice(0, limit).join(", ");
  return list.length > limit ? `${shown} … (+${list.length - limit})` : shown;
}

function dl(pairs) {
  return el("dl", {}, pairs.filter(p => p).map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

// -- sections ------------------------------------------------------------------------------------

function renderHealth(state) {
  const h = state.health;
  byId("server-name").textContent = state.server.name;
  byId("server-version").textContent = `mcphost ${state.server.version}`;
  fill(byId("health-cards"),
    el("div", {class: "card"}, el("h3", {}, "Readiness ", badge(h.ready ? "ready" : "unavailable", h.ready ? "ready" : "not ready")),
       dl([["node", h.node], ["workers", String(h.workers)], ["sessions here", String(h.sessions)]])),
    el("div", {class: "card"}, el("h3", {}, "Backend ", badge(h.backend.healthy ? "ready" : "unavailable", h.backend.healthy ? "healthy" : "unhealthy")),
       dl([["name", h.backend.name], ["shared", h.backend.shared ? "yes (cluster)" : "no (this process)"]])));
}

// -- problems first -------------------------------------------------------------------------------

function renderProblems(problems) {
  const errors = problems.filter(p => p.severity === "error").length;
  byId("problems-count").textContent = problems.length
    ? `${problems.length}${errors ? `, ${errors} ${errors === 1 ? "error" : "errors"}` : ""}` : "";
  byId("problems-none").hidden = problems.length > 0;
  byId("problems").dataset.state = errors ? "error" : problems.length ? "warning" : "ok";
  fill(byId("problems-list"), problems.map(p => el("li", {class: `problem sev-${p.severity}`, "data-kind": p.kind, "data-severity": p.severity},
    badge(p.severity === "error" ? "failed" : "restarting", p.kind),
    " ", el("a", {class: "problem-title", href: p.link || "#"}, p.title),
    p.detail ? el("span", {class: "problem-detail muted"}, ` ${p.detail}`) : null)));
}

function renderPlugins(plugins) {
  const rank = {failed: 0, active: 1, "not configured": 2};  // failures, what serves, what waits, what is off
  const ordered = [...plugins].sort((a, b) => (a.builtin - b.builtin) || ((rank[a.status] ?? 3) - (rank[b.status] ?? 3))
                                               || a.name.localeCompare(b.name));
  const failed = plugins.filter(p => p.status === "failed").length;
  byId("plugins-count").textContent = `${plugins.length} loaded${failed ? `, ${failed} failed` : ""}`;
  fill(byId("plugins-list"), ordered.map(p => {
    const unconfigured = p.status === "not configured";
    const provides = Object.entries(p.provides || {}).filter(([kind]) => kind !== "upstreams");
    const shown = ([k]) => k !== "upstreams" && k !== "signed_in";
    const report = p.report && Object.entries(p.report).filter(shown).length
      ? Object.fromEntries(Object.entries(p.report).filter(shown)) : null;
    return el("div", {class: `card plugin${p.status === "failed" ? " failed" : ""}`, "data-plugin": p.name,
                      id: `plugin-${p.name}`},
      el("h3", {}, el("span", {class: "plugin-name"}, p.name),
         unconfigured ? badge("unconfigured", "not configured") : badge(p.status),
         el("small", {class: "muted"}, [p.distribution, p.version].filter(Boolean).join(" ") + (p.builtin ? " (built in)" : ""))),
      p.error ? el("div", {class: "error plugin-error"}, p.error) : null,
      unconfigured && p.wake ? el("div", {class: "muted plugin-wake"}, `waits for ${p.wake}`) : null,
      p.where ? el("div", {class: "muted plugin-where"}, `at ${p.where}`) : null,
      dl([
        ["hooks", p.hooks.length ? el("span", {class: "tags"}, p.hooks.map(h => el("span", {class: "tag"}, h.replace(/^mcphost_/, "")))) : "none"],
        ...provides.map(([kind, names]) => {
          const total = (p.provides_total || {})[kind] ?? names.length;
          const shown = names.slice(0, 6).join(", ");
          return [kind, `${total}: ${shown}${total > 6 ? ` … (+${total - 6})` : ""}`];
        }),
      ]),
      report ? el("pre", {}, JSON.stringify(report, null, 2)) : null);
  }));
}

function renderUpstreams(upstreams) {
  byId("upstreams").hidden = !upstreams.length;
  const down = upstreams.filter(u => u.state !== "running").length;
  byId("upstreams-count").textContent = upstreams.length ? `${upstreams.length}${down ? `, ${down} not running` : ""}` : "";
  // Those not running first: they are what the operator came for.
  const ordered = [...upstreams].sort((a, b) => (a.state === "running") - (b.state === "running"));
  fill(byId("upstreams-table").tBodies[0], ordered.map(u => el("tr", {"data-upstream": u.name, id: `upstream-${u.name}`,
                                                                   class: u.state === "running" ? null : "down"},
    el("td", {}, el("code", {}, u.name), u.principal ? el("div", {class: "muted upstream-principal"}, `for ${u.principal}`) : null,
       u.required ? el("div", {class: "muted"}, "required") : null),
    el("td", {class: "upstream-state"}, badge(u.state),
       u.retry_in !== null && u.retry_in !== undefined ? el("small", {class: "muted"}, ` next try in ${duration(u.retry_in)}`) : null),
    el("td", {}, u.transport, el("div", {class: "muted upstream-era"}, [u.era, ...(u.extensions || [])].filter(Boolean).join(" · "))),
    el("td", {}, el("code", {}, u.target || "")),
    el("td", {class: "num"}, u.tools),
    el("td", {class: "num upstream-restarts"}, u.restarts),
    el("td", {class: "error"}, u.error || ""))));
  label(byId("upstreams-table"));
}

function renderCredentials(credentials, total) {
  byId("credentials").hidden = !credentials.length;
  byId("credentials-count").textContent = credentials.length ? `${total}${total > credentials.length ? `, ${credentials.length} shown` : ""}` : "";
  const now = Date.now() / 1000;
  fill(byId("credentials-table").tBodies[0], credentials.map(c => el("tr", {"data-upstream": c.upstream, class: "credential"},
    el("td", {class: "credential-principal"}, el("code", {}, c.principal)),
    el("td", {class: "credential-upstream"}, el("code", {}, c.upstream)),
    el("td", {class: "credential-expiry"}, c.expires_at ? `${new Date(c.expires_at * 1000).toISOString().replace(/\.\d+Z$/, "Z")}${c.expires_at < now ? " (expired)" : ""}` : "-"),
    el("td", {}, c.refreshable ? "yes" : "no"))));
  label(byId("credentials-table"));
}

function renderSessions(sessions, listing) {
  const shown = listing && !listing.complete ? `${sessions.length} of ${listing.total}` : `${sessions.length}`;
  byId("sessions-count").textContent = listing && listing.error ? `${shown} (store unreadable: ${listing.error})` : shown;
  byId("sessions-empty").hidden = sessions.length > 0;
  for (const id of [...confirming]) if (!sessions.some(s => s.id === id)) confirming.delete(id);
  fill(byId("sessions-table").tBodies[0], sessions.map(s => {
    const allowed = Object.entries(s.allowed).filter(([, v]) => v !== null);
    const principal = s.principal ? `${s.principal.subject}${s.principal.client_id ? ` (${s.principal.client_id})` : ""}` : "anonymous";
    const button = el("button", {class: "end-session", type: "button", onclick: () => endSession(s.id)},
                      confirming.has(s.id) ? "Confirm end" : "End");
    return el("tr", {"data-session": s.id},
      el("td", {}, el("b", {class: "client-name"}, s.client.name || "?"), " ", el("span", {class: "muted"}, s.client.version || ""),
         el("div", {class: "muted"}, el("code", {}, `${s.id.slice(0, 10)}…`))),
      el("td", {}, principal, el("div", {class: "muted"}, s.quota)),
      el("td", {}, `${s.era} · ${s.protocol_version || "?"}`,
         el("div", {class: "muted session-node"}, `${s.transport} · ${s.node || "?"}${s.held_here ? " (here)" : ""}`)),
      el("td", {class: "num"}, duration(s.age)),
      el("td", {class: "num"}, duration(s.idle)),
      el("td", {class: "num"}, s.inflight === null ? el("span", {class: "muted", title: "known only to the process holding it"}, "?")
         : `${s.inflight}${s.waiting_on_client ? ` (+${s.waiting_on_client} asking the client)` : ""}`),
      el("td", {}, allowed.length ? allowed.map(([k, v]) => el("div", {}, `${k}: ${describe(v, 5)}`)) : "everything"),
      el("td", {}, describe(s.subscriptions, 3)),
      el("td", {}, button));
  }));
  label(byId("sessions-table"));
}

async function endSession(id) {
  if (!confirming.has(id)) {
    confirming.add(id);  // a second press within 5 s ends it
    setTimeout(() => { if (confirming.delete(id)) poll(); }, 5000);
    poll();
    return;
  }
  confirming.delete(id);
  const response = await fetch(`${base}/api/sessions/${encodeURIComponent(id)}/end`, {
    method: "POST", credentials: "same-origin", headers: {"x-mcphost-console": "1"}});
  if (!response.ok) setLive("offline", `ending failed: ${response.status}`);
  poll();
}

// A word diff as mcphost.pins writes it: [-removed-] and {+added+}, drawn as <del> and <ins>.
function wordDiff(text) {
  const parts = [];
  const marks = /\[-([\s\S]*?)-\]|\{\+([\s\S]*?)\+\}/g;
  let at = 0;
  for (const m of text.matchAll(marks)) {
    if (m.index > at) parts.push(text.slice(at, m.index));
    parts.push(m[1] !== undefined ? el("del", {}, m[1]) : el("ins", {}, m[2]));
    at = m.index + m[0].length;
  }
  parts.push(text.slice(at));
  return el("pre", {class: "pin-diff"}, ...parts);
}

function renderPins(answer) {
  byId("pins").hidden = answer.awaiting === 0;
  byId("pins-count").textContent = answer.awaiting > answer.shown.length
    ? `${answer.shown.length} of ${answer.awaiting}` : `${answer.awaiting}`;
  fill(byId("pins-list"), answer.shown.map(p => el("li", {class: "pin", id: `pin-${p.upstream}-${p.name}`, "data-name": p.name, "data-upstream": p.upstream},
    el("b", {}, p.name), " ", el("span", {class: "muted"}, `${p.kind.replace(/s$/, "")} of upstream ${p.upstream}${p.new ? " (new)" : " (changed)"}`), " ",
    el("button", {type: "button", class: "pin-approve", onclick: () => decidePin(p, true)}, "Approve"), " ",
    el("button", {type: "button", class: "pin-reject", onclick: () => decidePin(p, false)}, "Reject"),
    wordDiff(p.diff))));
}

async function loadPins() {
  const answer = await fetch(`${base}/api/pins`, {cache: "no-store", credentials: "same-origin"});
  if (!answer.ok) return false;
  const data = await answer.json();
  changed("pins", data, () => renderPins(data));
  return true;
}

async function decidePin(pin, approve) {
  const response = await fetch(`${base}/api/pins/decide`, {
    method: "POST", credentials: "same-origin",
    headers: {"x-mcphost-console": "1", "content-type": "application/json"},
    body: JSON.stringify({name: pin.name, upstream: pin.upstream, approve})});
  if (!response.ok) setLive("offline", `${approve ? "approving" : "rejecting"} failed: ${response.status}`);
  pinsVersion = null;  // drawn again on the next poll
  poll();
}

// A bar per 10 s bucket (calls; errors in red) with the p99 latency as a line, over the last
// 5 minutes: the left axis counts calls per bucket, the right one is milliseconds, the bottom one time.
function nice(value) {
  if (value <= 1) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  const step = [1, 2, 5, 10].find(m => m * power >= value);
  return step * power;
}

function axisText(x, y, text, anchor, cls) {
  const node = svgEl("text", {x, y, "text-anchor": anchor, class: cls || "axis"});
  node.textContent = text;
  return node;
}

function chart(buckets) {
  const width = 360, height = 130, left = 34, right = 48, top = 20, bottom = 18;
  const plotW = width - left - right, plotH = height - top - bottom, n = buckets.calls.length;
  const barWidth = plotW / n;
  const most = nice(Math.max(1, ...buckets.calls));
  const p99 = buckets.p99.map((v, i) => [i, v]).filter(([, v]) => v !== null);
  const slowest = nice(Math.max(0, ...p99.map(([, v]) => v)) * 1000) / 1000;
  const y = calls => top + plotH - (calls / most) * plotH;
  const svg = svgEl("svg", {class: "chart", viewBox: `0 0 ${width} ${height}`, role: "img"});
  // axes and grid
  svg.append(svgEl("line", {class: "grid", x1: left, y1: top, x2: left + plotW, y2: top}));
  svg.append(svgEl("line", {class: "grid", x1: left, y1: top + plotH / 2, x2: left + plotW, y2: top + plotH / 2}));
  svg.append(svgEl("line", {class: "axis-line", x1: left, y1: top, x2: left, y2: top + plotH}));
  svg.append(svgEl("line", {class: "axis-line", x1: left, y1: top + plotH, x2: left + plotW, y2: top + plotH}));
  svg.append(axisText(left - 3, top + 4, String(most), "end"), axisText(left - 3, top + plotH / 2 + 4, String(most / 2), "end"),
             axisText(left - 3, top + plotH + 4, "0", "end"),
             axisText(2, 10, `calls / ${buckets.seconds} s`, "start", "axis unit"));
  const span = n * buckets.seconds;
  svg.append(axisText(left, height - 4, `−${span / 60} min`, "start"),
             axisText(left + plotW / 2, height - 4, `−${span / 120} min`, "middle"),
             axisText(left + plotW, height - 4, "now", "end"));
  buckets.calls.forEach((calls, i) => {
    if (!calls) return;
    svg.append(svgEl("rect", {x: left + i * barWidth, y: y(calls), width: Math.max(1, barWidth - 1), height: top + plotH - y(calls)}));
    const errors = buckets.errors[i];
    if (errors) svg.append(svgEl("rect", {class: "err", x: left + i * barWidth, y: y(errors), width: Math.max(1, barWidth - 1),
                                          height: top + plotH - y(errors)}));
  });
  if (p99.length && slowest > 0) {
    const ly = v => top + plotH - (v / slowest) * plotH;
    svg.append(svgEl("line", {class: "axis-line p99-axis", x1: left + plotW, y1: top, x2: left + plotW, y2: top + plotH}));
    svg.append(axisText(left + plotW + 3, top + 4, ms(slowest), "start", "axis p99-label"),
               axisText(left + plotW + 3, top + plotH + 4, "0", "start", "axis p99-label"),
               axisText(width - 2, 10, "p99 latency", "end", "axis unit p99-label"));
    const points = p99.map(([i, v]) => `${left + i * barWidth + barWidth / 2},${ly(v)}`);
    svg.append(p99.length > 1 ? svgEl("polyline", {points: points.join(" ")})
                              : svgEl("circle", {class: "p99-dot", cx: points[0].split(",")[0], cy: points[0].split(",")[1], r: 2}));
  }
  const title = svgEl("title", {});
  title.textContent = `calls per ${buckets.seconds} s over the last ${span / 60} min (errors in red), p99 latency line (right axis, ms)`;
  svg.append(title);
  return svg;
}

function renderTraffic(traffic, total) {
  const refusedOf = t => Object.values(t.refused || {}).reduce((a, b) => a + b, 0);
  const used = Object.entries(traffic).sort((a, b) => (b[1].calls + refusedOf(b[1])) - (a[1].calls + refusedOf(a[1])));
  byId("traffic-empty").hidden = used.length > 0;
  byId("traffic-count").textContent = total > used.length
    ? `per tool, last 5 minutes: the ${used.length} busiest of ${total}` : "per tool, last 5 minutes";
  fill(byId("traffic-list"), used.map(([name, t]) => el("div", {class: "card tool-traffic", "data-tool": name, id: `tool-${name}`},
    el("h3", {}, el("code", {}, name)),
    el("div", {class: "figures"},
      el("span", {}, el("b", {class: "tool-calls"}, t.calls), " calls"),
      el("span", {}, el("b", {class: "tool-errors"}, t.errors), " errors"),
      el("span", {}, "p50 ", el("b", {}, ms(t.recent.p50))),
      el("span", {}, "p99 ", el("b", {}, ms(t.recent.p99)))),
    el("div", {class: "figures refused"},
      el("span", {}, "refused: "),
      ["invalid arguments", "scope", "budget"].map(reason => el("span", {"data-reason": reason},
        el("b", {class: "tool-refused"}, (t.refused || {})[reason] || 0), ` ${reason}`))),
    chart(t.buckets),
    el("div", {class: "legend"}, `last ${t.recent.seconds / 60} min: ${t.recent.calls} calls, ${t.recent.errors} errors`))));
}

// Every budget of the ledger, one column each: what the caller holds here / its limit, and
// under it the 429s that budget answered it.
function amount(name, value) {
  if (!name.endsWith(" bytes")) return String(value);
  return value >= 1048576 ? `${(value / 1048576).toFixed(1)} MB` : value >= 1024 ? `${Math.round(value / 1024)} kB` : `${value} B`;
}

function pager(id, offset, size, total, go) {
  const node = byId(id);
  node.hidden = total <= size && offset === 0;
  node.querySelector(".page-info").textContent = total ? `${offset + 1}–${Math.min(total, offset + size)} of ${total}` : "";
  const prev = node.querySelector(".page-prev"), next = node.querySelector(".page-next");
  prev.disabled = offset <= 0;
  next.disabled = offset + size >= total;
  prev.onclick = () => go(Math.max(0, offset - size));
  next.onclick = () => go(offset + size);
}

function renderBudgets(budgets) {
  const list = budgets.budgets;
  const table = byId("budgets-table");
  byId("budgets-limits").textContent = budgets.shared
    ? "Per-principal limits hold across the cluster; figures are this process's."
    : "Per-principal limits hold in this process.";
  pager("budgets-pager", budgets.offset || 0, budgetsPage, budgets.callers_total ?? budgets.callers.length,
        offset => { budgetsOffset = offset; poll(); });
  fill(table.tHead.rows[0], el("th", {}, "caller"), list.map(b => el("th", {title: `server.${b.setting}`}, b.name)),
       el("th", {}, "refused (429)"));
  fill(table.tBodies[0], budgets.callers.map(c => el("tr", {},
    el("td", {}, el("code", {}, c.caller)),
    list.map(b => {
      const held = c.held[b.name] || 0;
      const refused = c.refusals[b.name] || 0;
      return el("td", {class: "num", "data-budget": b.name},
        `${amount(b.name, held)}${b.perPrincipal ? ` / ${amount(b.name, b.perPrincipal)}` : ""}`,
        refused ? el("div", {class: "muted refusals"}, `${refused} × 429`) : null);
    }),
    el("td", {class: "num"}, c.refused))));
  label(table);
}

const KIND_LABEL = {tools: "tool", resources: "resource", resourceTemplates: "template", prompts: "prompt"};

function provider(r) {
  // A mounted record credits the upstream it came from (the proxy plugin only carries it).
  const via = r.origin ? `${r.origin} (upstream via ${r.plugin})` : r.plugin;
  return [via, r.distribution && `(${r.distribution} ${r.version || ""})`].filter(Boolean).join(" ");
}

function renderCatalog(page) {
  const query = page.query;
  byId("catalog-count").textContent = query
    ? `${page.matched}${page.more ? "+" : ""} of ${page.total} match “${query}”` : `${page.total}`;
  fill(byId("catalog-table").tBodies[0], page.records.map(r => el("tr", {"data-record": r.name},
    el("td", {}, KIND_LABEL[r.kind] || r.kind), el("td", {}, el("code", {}, r.name)),
    el("td", {class: "provider"}, provider(r)), el("td", {class: "muted"}, r.description))));
  pager("catalog-pager", page.offset, page.limit, page.matched, offset => { catalogOffset = offset; loadCatalog(); });
  const refused = page.refused || [];
  byId("refused-empty").hidden = refused.length > 0;
  fill(byId("refused-list"), refused.map(r => el("li", {class: "error"},
    [r.plugin, r.kind, r.name].filter(Boolean).join(" · ") + (r.reason ? `: ${r.reason}` : ""))),
    page.refused_total > refused.length ? el("li", {class: "muted"}, `… and ${page.refused_total - refused.length} more`) : null);
}

let catalogAsked = 0;
async function loadCatalog() {
  const asked = ++catalogAsked;  // a later search wins over an earlier answer
  const query = byId("catalog-search").value.trim();
  const url = `${base}/api/catalog?offset=${catalogOffset}&limit=${CATALOG_PAGE}&q=${encodeURIComponent(query)}`;
  const answer = await fetch(url, {cache: "no-store", credentials: "same-origin"});
  if (!answer.ok || asked !== catalogAsked) return false;
  const page = await answer.json();
  if (asked !== catalogAsked) return false;
  renderCatalog(page);
  return true;
}

function renderConfig(health, changes) {
  byId("config-text").textContent = JSON.stringify(health.config, null, 2);
  byId("config-changed-count").textContent = changes.length ? `${changes.length}` : "";
  byId("config-defaults-only").hidden = changes.length > 0;
  const shown = v => v === null || v === undefined ? "–" : typeof v === "string" ? v : JSON.stringify(v);
  fill(byId("config-changes").tBodies[0], changes.map(c => el("tr", {"data-setting": `${c.section}.${c.key}`},
    el("td", {}, el("code", {}, `[${c.section}] ${c.key}`)), el("td", {}, el("code", {}, shown(c.value))),
    el("td", {class: "muted"}, el("code", {}, shown(c.default))))));
}

// -- polling -------------------------------------------------------------------------------------

function setLive(state, text) {
  const live = byId("live");
  live.dataset.state = state;
  live.textContent = text;
}

// A section is drawn again only when its data changed: what the operator is reading, hovering or
// about to click stays where it is.
const drawn = new Map();
function changed(name, data, draw) {
  const text = JSON.stringify(data);
  if (drawn.get(name) === text) return;
  draw();
  drawn.set(name, text);
}

let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  try {
    const response = await fetch(`${base}/api/state?budgets_offset=${budgetsOffset}`, {cache: "no-store", credentials: "same-origin"});
    if (!response.ok) {
      setLive("offline", `error ${response.status}`);
      return;
    }
    const state = await response.json();
    changed("problems", state.problems, () => renderProblems(state.problems || []));
    changed("upstreams", state.upstreams, () => renderUpstreams(state.upstreams));
    changed("credentials", state.credentials, () => renderCredentials(state.credentials || [], state.credentials_total || 0));
    if (state.pins_version !== pinsVersion && await loadPins()) pinsVersion = state.pins_version;
    changed("health", [state.server, {...state.health, config: null}], () => renderHealth(state));
    changed("plugins", state.plugins, () => renderPlugins(state.plugins));
    renderSessions(state.sessions, state.sessions_listing);  // ages change every poll
    changed("traffic", [state.traffic, state.traffic_tools], () => renderTraffic(state.traffic, state.traffic_tools || 0));
    changed("budgets", state.budgets, () => renderBudgets(state.budgets));
    changed("config", [state.health.config, state.config_changes], () => renderConfig(state.health, state.config_changes || []));
    if (state.catalog_digest !== catalogDigest && await loadCatalog()) catalogDigest = state.catalog_digest;
    setLive("live", `live · ${new Date().toLocaleTimeString()}`);
  } catch (error) {
    setLive("offline", "offline");
  } finally {
    polling = false;
  }
}

let searching = null;
byId("catalog-search").addEventListener("input", () => {  // the server searches; ask once typing pauses
  clearTimeout(searching);
  searching = setTimeout(() => { catalogOffset = 0; loadCatalog(); }, 200);
});
poll();
setInterval(poll, pollMs);
