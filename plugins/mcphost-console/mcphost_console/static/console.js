// mcphost console: polls <base>/api/state and draws it. Text from the host (tool names, errors,
// client names) only ever goes through textContent, never through HTML.
"use strict";

const base = document.body.dataset.base;
const pollMs = Number(document.body.dataset.poll) || 1000;
const confirming = new Set();  // sessions whose End button was pressed once
let catalogDigest = null;
let catalog = null;

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
  byId("config-text").textContent = JSON.stringify(h.config, null, 2);
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
    const shown = ([k]) => k !== "upstreams";
    const report = p.report && Object.entries(p.report).filter(shown).length
      ? Object.fromEntries(Object.entries(p.report).filter(shown)) : null;
    return el("div", {class: `card plugin${p.status === "failed" ? " failed" : ""}`, "data-plugin": p.name},
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
  fill(byId("upstreams-table").tBodies[0], upstreams.map(u => el("tr", {"data-upstream": u.name},
    el("td", {}, el("code", {}, u.name)),
    el("td", {class: "upstream-state"}, badge(u.state),
       u.retry_in !== null && u.retry_in !== undefined ? el("small", {class: "muted"}, ` next try in ${duration(u.retry_in)}`) : null),
    el("td", {}, u.transport),
    el("td", {}, el("code", {}, u.target || "")),
    el("td", {class: "num"}, u.tools),
    el("td", {class: "num upstream-restarts"}, u.restarts),
    el("td", {class: "error"}, u.error || ""))));
  label(byId("upstreams-table"));
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

function chart(buckets) {
  const width = 300, height = 48, n = buckets.calls.length, gap = 1;
  const barWidth = width / n;
  const top = Math.max(1, ...buckets.calls);
  const svg = svgEl("svg", {class: "chart", viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: "none", role: "img"});
  buckets.calls.forEach((calls, i) => {
    if (!calls) return;
    const h = Math.max(1, (calls / top) * (height - 4));
    svg.append(svgEl("rect", {x: i * barWidth, y: height - h, width: barWidth - gap, height: h}));
    const errors = buckets.errors[i];
    if (errors) {
      const eh = Math.max(1, (errors / top) * (height - 4));
      svg.append(svgEl("rect", {class: "err", x: i * barWidth, y: height - eh, width: barWidth - gap, height: eh}));
    }
  });
  const p99 = buckets.p99.map((v, i) => [i, v]).filter(([, v]) => v !== null);
  const slowest = Math.max(0, ...p99.map(([, v]) => v));
  if (p99.length > 1 && slowest > 0) {
    svg.append(svgEl("polyline", {points: p99.map(([i, v]) => `${i * barWidth + barWidth / 2},${height - 2 - (v / slowest) * (height - 6)}`).join(" ")}));
  }
  const title = svgEl("title", {});
  title.textContent = `calls per ${buckets.seconds} s (errors in red), p99 line`;
  svg.append(title);
  return svg;
}

function renderTraffic(traffic) {
  const used = Object.entries(traffic).filter(([, t]) => t.calls > 0).sort((a, b) => b[1].calls - a[1].calls);
  byId("traffic-empty").hidden = used.length > 0;
  fill(byId("traffic-list"), used.map(([name, t]) => el("div", {class: "card tool-traffic", "data-tool": name},
    el("h3", {}, el("code", {}, name)),
    el("div", {class: "figures"},
      el("span", {}, el("b", {class: "tool-calls"}, t.calls), " calls"),
      el("span", {}, el("b", {class: "tool-errors"}, t.errors), " errors"),
      el("span", {}, "p50 ", el("b", {}, ms(t.recent.p50))),
      el("span", {}, "p99 ", el("b", {}, ms(t.recent.p99)))),
    chart(t.buckets),
    el("div", {class: "legend"}, `last ${t.recent.seconds / 60} min: ${t.recent.calls} calls, ${t.recent.errors} errors`))));
}

// Every budget of the ledger, one column each: what the caller holds here / its limit, and
// under it the 429s that budget answered it.
function amount(name, value) {
  if (!name.endsWith(" bytes")) return String(value);
  return value >= 1048576 ? `${(value / 1048576).toFixed(1)} MB` : value >= 1024 ? `${Math.round(value / 1024)} kB` : `${value} B`;
}

function renderBudgets(budgets) {
  const list = budgets.budgets;
  const table = byId("budgets-table");
  byId("budgets-limits").textContent = budgets.shared
    ? "Per-principal limits hold across the cluster; figures are this process's."
    : "Per-principal limits hold in this process.";
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

function renderCatalog() {
  if (!catalog) return;
  const query = byId("catalog-search").value.trim().toLowerCase();
  const rows = [];
  const kinds = {tools: "tool", resources: "resource", resourceTemplates: "template", prompts: "prompt"};
  let total = 0;
  for (const [kind, label] of Object.entries(kinds)) {
    for (const r of catalog[kind] || []) {
      total += 1;
      const provider = [r.plugin, r.distribution && `(${r.distribution} ${r.version || ""})`].filter(Boolean).join(" ");
      const text = `${label} ${r.name} ${r.title || ""} ${provider} ${r.description}`.toLowerCase();
      if (query && !text.includes(query)) continue;
      if (rows.length >= 500) continue;
      rows.push(el("tr", {"data-record": r.name},
        el("td", {}, label), el("td", {}, el("code", {}, r.name)), el("td", {}, provider),
        el("td", {class: "muted"}, r.description)));
    }
  }
  byId("catalog-count").textContent = query ? `${rows.length} of ${total} shown` : `${total}`;
  fill(byId("catalog-table").tBodies[0], rows);
  const refused = catalog.refused || [];
  byId("refused-empty").hidden = refused.length > 0;
  fill(byId("refused-list"), refused.map(r => el("li", {class: "error"},
    [r.plugin, r.kind, r.name].filter(Boolean).join(" · ") + (r.reason ? `: ${r.reason}` : ""))));
}

// -- polling -------------------------------------------------------------------------------------

function setLive(state, text) {
  const live = byId("live");
  live.dataset.state = state;
  live.textContent = text;
}

let polling = false;
async function poll() {
  if (polling) return;
  polling = true;
  try {
    const response = await fetch(`${base}/api/state`, {cache: "no-store", credentials: "same-origin"});
    if (!response.ok) {
      setLive("offline", `error ${response.status}`);
      return;
    }
    const state = await response.json();
    renderHealth(state);
    renderPlugins(state.plugins);
    renderUpstreams(state.upstreams);
    renderSessions(state.sessions, state.sessions_listing);
    renderTraffic(state.traffic);
    renderBudgets(state.budgets);
    if (state.catalog_digest !== catalogDigest) {
      const answer = await fetch(`${base}/api/catalog`, {cache: "no-store", credentials: "same-origin"});
      if (answer.ok) {
        catalog = await answer.json();
        catalogDigest = state.catalog_digest;
        renderCatalog();
      }
    }
    setLive("live", `live · ${new Date().toLocaleTimeString()}`);
  } catch (error) {
    setLive("offline", "offline");
  } finally {
    polling = false;
  }
}

byId("catalog-search").addEventListener("input", renderCatalog);
poll();
setInterval(poll, pollMs);
