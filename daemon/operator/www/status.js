// SPDX-License-Identifier: BSD-3-Clause
// The status page: draws /status.json every second. Everything a client
// chose (resource and client names) is set as text, never as markup.
'use strict';

const REFRESH_MS = 1000;
const TIMEOUT_MS = 5000;
const TOKEN_KEY = 'rlockd-status-token';

let previous = null; // the last document drawn, for the rate of grants
let updates = 0;

function $(id) {
  return document.getElementById(id);
}

function setText(id, text) {
  $(id).textContent = text;
}

function setBadge(id, text, tone) {
  const el = $(id);
  el.textContent = text;
  el.className = 'badge ' + tone;
}

// "1.5 s", "250 ms", "3 min 4 s" ...
function duration(ms) {
  if (ms < 1000) return Math.round(ms) + ' ms';
  if (ms < 60000) return (ms / 1000).toFixed(ms < 10000 ? 1 : 0) + ' s';
  const s = Math.floor(ms / 1000);
  if (s < 3600) return Math.floor(s / 60) + ' min ' + (s % 60) + ' s';
  if (s < 86400) return Math.floor(s / 3600) + ' h ' + Math.floor((s % 3600) / 60) + ' min';
  return Math.floor(s / 86400) + ' d ' + Math.floor((s % 86400) / 3600) + ' h';
}

function micros(us) {
  return us === 0 ? '0' : duration(us / 1000);
}

// From the URL's fragment (#token=...), which no request carries, then this tab's storage.
function token() {
  const given = new URLSearchParams(location.hash.slice(1)).get('token');
  if (given) {
    sessionStorage.setItem(TOKEN_KEY, given);
    history.replaceState(null, '', location.pathname + location.search);
  }
  return sessionStorage.getItem(TOKEN_KEY);
}

function showLogin(why) {
  $('main').hidden = true;
  $('login').hidden = false;
  setText('login-why', why);
  setBadge('state', 'locked', 'warn');
  $('token').focus();
}

function holderText(h) {
  if (!h) return ['', ''];
  if (!h.here) {
    const who = h.foreign ? 'held outside rlockd' : 'held outside this daemon';
    return [h.ttl_left_ms ? who + ', ttl left ' + duration(h.ttl_left_ms) : who, ''];
  }
  let text = (h.client || 'unnamed client') + ' · session ' + h.session.slice(0, 8) +
    ' · owner ' + h.owner;
  if (h.kind !== 'exclusive') text += ' · ' + h.kind;
  if (h.holders > 1) text += ' (+' + (h.holders - 1) + ' more)';
  return [text, duration(h.held_ms)];
}

function cell(row, text, cls) {
  const td = document.createElement('td');
  td.textContent = text;
  if (cls) td.className = cls;
  row.appendChild(td);
}

// The columns of a table of resources: heading, class of its cells.
const COLUMNS = [
  ['Resource', 'resource'], ['Holder', 'holder'], ['Held for', 'held'],
  ['Waiting now', 'n waiters'], ['Waited in all', 'n wait'], ['Wait p99', 'n p99'],
  ['Contended', 'n contended'], ['Timeouts', 'n timeouts'], ['Losses', 'n losses'],
];

// One table of resources (status.json's contention.waiting or .top).
function drawList(id, list, empty) {
  const table = $(id);
  if (!table.tHead) {
    const head = table.createTHead().insertRow();
    for (const [name, cls] of COLUMNS) {
      const th = document.createElement('th');
      th.textContent = name;
      th.className = cls.startsWith('n ') ? 'n' : '';
      head.appendChild(th);
    }
  }
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const r of list) {
    const row = document.createElement('tr');
    row.dataset.resource = r.resource;
    const [holder, held] = holderText(r.holder);
    const texts = [
      r.resource, holder, held,
      r.waiters + (r.waiters_max > r.waiters ? ' (max ' + r.waiters_max + ')' : ''),
      micros(r.wait_total_us), micros(r.wait_p99_us), String(r.contended), String(r.timeouts),
      String(r.losses),
    ];
    texts.forEach((text, i) => cell(row, text, COLUMNS[i][1]));
    body.appendChild(row);
  }
  if (list.length === 0) {
    const row = document.createElement('tr');
    cell(row, empty, 'empty');
    row.firstChild.colSpan = COLUMNS.length;
    body.appendChild(row);
  }
}

function drawContention(c) {
  const off = 'not followed ([metrics] top_resources = 0)';
  drawList('waiting', c.waiting, c.capacity ? 'no acquire waits' : off);
  drawList('top', c.top, c.capacity ? 'no acquire has waited yet' : off);
  setText('top-note', 'By time waited (waits still going count once they end). ' + c.followed +
    ' of at most ' + c.capacity + ' resources followed; a weight is overstated by at most ' +
    micros(c.error_bound) + ' (the resources it displaced).');
}

function draw(s) {
  setText('daemon', 'rlockd ' + s.version + ' · pid ' + s.pid + ' · ' + s.listen + ' · up ' +
    duration(s.uptime_ms));
  setBadge('state', s.state, s.state === 'serving' ? 'good' : 'warn');
  setText('sessions', String(s.sessions));
  setText('locks', String(s.locks));
  setText('waiters', String(s.waiters));
  setText('lost', String(s.locks_lost));
  if (previous && s.now_ms > previous.now_ms && s.pid === previous.pid) {
    const rate = (s.grants - previous.grants) * 1000 / (s.now_ms - previous.now_ms);
    setText('grants-rate', rate.toFixed(rate < 10 ? 1 : 0));
  }
  const r = s.redis;
  const health = r.ready === r.connections ? ['healthy', 'good']
    : r.ready > 0 ? ['degraded', 'warn'] : ['down', 'bad'];
  setBadge('redis-health', health[0], health[1]);
  setText('redis-topology', r.topology + (r.nodes ? ' (' + r.nodes + ' nodes)' : ''));
  setText('redis-where', r.where);
  setText('redis-ready', r.ready + ' of ' + r.connections);
  setText('redis-pubsub', r.pubsub ? 'connected' : 'not connected');
  setText('redis-counts', r.failovers + ' · ' + r.errors + ' · ' + r.script_reloads);
  drawContention(s.contention);
  previous = s;
  $('error').hidden = true;
  $('login').hidden = true;
  $('main').hidden = false;
  setText('updated', 'updated ' + new Date(s.now_ms).toLocaleTimeString());
  document.body.dataset.updates = String(++updates);
}

async function refresh() {
  const t = token();
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  try {
    const res = await fetch('status.json', {
      headers: t ? { Authorization: 'Bearer ' + t } : {},
      cache: 'no-store',
      signal: ctl.signal,
    });
    if (res.status === 401 || res.status === 403) {
      sessionStorage.removeItem(TOKEN_KEY);
      showLogin(res.status === 403 ? 'That token is not an admin token: an admin token is needed.'
        : t ? 'That token is not known to this daemon.'
          : "An admin token is needed to see this daemon's state.");
      return; // until a token is given
    }
    if (!res.ok) throw new Error('HTTP ' + res.status + ': ' + (await res.text()).trim());
    draw(await res.json());
  } catch (e) {
    const el = $('error');
    el.textContent = 'rlockd does not answer (' + (e.name === 'AbortError' ? 'timed out' : e.message) +
      '); the figures below are from ' + (previous ? new Date(previous.now_ms).toLocaleTimeString()
        : 'nowhere yet') + '. Retrying.';
    el.hidden = false;
    setBadge('state', 'no answer', 'bad');
  } finally {
    clearTimeout(timer);
  }
  setTimeout(refresh, REFRESH_MS);
}

$('login').addEventListener('submit', (ev) => {
  ev.preventDefault();
  const t = $('token').value.trim();
  if (!t) return;
  sessionStorage.setItem(TOKEN_KEY, t);
  $('token').value = '';
  refresh();
});

refresh();
