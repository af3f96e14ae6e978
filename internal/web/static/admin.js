// The admin's pages (agents, templates, provisioners, users, audit) and every user's tokens. The
// pages whose endpoints may be missing on an older server (tokens, users, PATCH agents) say so
// instead of failing.
import { h, clear, fill, fmtTime, toast, confirmDialog } from './dom.js';
import { api, get, enc } from './api.js';

const listOf = (v, key) => (Array.isArray(v) ? v : (v && v[key]) || []);

function missing(e) { return e && (e.status === 404 || e.status === 405); }

function unavailable(main, title, what) {
  fill(main, h('h1', {}, title), h('p', { class: 'note', testid: 'unavailable' }, what + ' is not available on this server (it answered 404). Upgrade the server, or use the hangar command line.'));
}

function failed(main, title, e) {
  fill(main, h('h1', {}, title), h('p', { class: 'error', role: 'alert' }, e.message));
}

function table(testid, cols, rows, rowFn) {
  return h('table', { testid }, h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col' }, c)))), h('tbody', {}, rows.map(rowFn)));
}

function secretBox(label, secret) {
  return h('div', { class: 'note', testid: 'new-secret', role: 'status' }, label + ' (shown once, copy it now): ', h('code', { class: 'mono', testid: 'new-secret-value' }, secret));
}

// --- Agents ------------------------------------------------------------------------------------

export async function agentsPage(main) {
  let agents;
  try { agents = listOf(await get('/api/v1/agents'), 'agents'); } catch (e) { return failed(main, 'Agents', e); }
  const connected = (a) => (a.connected === undefined ? 'unknown' : a.connected ? 'connected' : 'not connected');
  fill(main, h('h1', {}, 'Agents'),
    agents.length ? table('agents-table', ['Name', 'Connection', 'Last seen', 'Created', 'Config'], agents, (a) => {
      const cfg = h('textarea', { class: 'mono', rows: 6, 'aria-label': 'Configuration of ' + a.name, testid: 'agent-config' }, JSON.stringify(a.config, null, 2));
      const save = h('button', { testid: 'agent-save' }, 'Save config');
      save.addEventListener('click', async () => {
        let config;
        try { config = JSON.parse(cfg.value); } catch (e) { toast('config: not JSON: ' + e.message); return; }
        try { await api('PATCH', '/api/v1/agents/' + enc(a.name), { config }); toast('Saved ' + a.name); } catch (e) {
          toast(missing(e) ? 'Changing an agent\u2019s config is not available on this server.' : 'Save failed: ' + e.message);
        }
      });
      return h('tr', { testid: 'agent-row', 'data-name': a.name }, h('td', {}, a.name), h('td', { testid: 'agent-connected' }, connected(a)),
        h('td', {}, a.last_seen_at ? fmtTime(a.last_seen_at) : a.connected === undefined ? 'unknown' : 'never'), h('td', {}, fmtTime(a.created_at)),
        h('td', {}, h('details', {}, h('summary', {}, 'config'), cfg, save)));
    }) : h('p', { class: 'muted' }, 'No agent. Create one with ', h('code', {}, 'hangar agents create NAME'), '.'));
}

// --- Templates ---------------------------------------------------------------------------------

export async function templatesPage(main, me, nav) {
  let ts;
  try { ts = listOf(await get('/api/v1/templates'), 'templates'); } catch (e) { return failed(main, 'Templates', e); }
  fill(main, h('h1', {}, 'Templates'),
    ts.length ? table('templates-table', ['Name', 'Kind', 'Active version', 'Updated'], ts, (t) => h('tr', { testid: 'template-row', 'data-name': t.name },
      h('td', {}, h('a', { href: '/ui/admin/templates/' + enc(t.name), 'data-link': true }, t.name)), h('td', {}, t.kind), h('td', {}, t.active_version ? 'v' + t.active_version : ''), h('td', {}, fmtTime(t.updated_at))))
      : h('p', { class: 'muted' }, 'No template. Push one with ', h('code', {}, 'hangar templates push'), '.'));
}

export async function templatePage(main, me, nav, name) {
  const load = async () => {
    let t;
    try { t = await get('/api/v1/templates/' + enc(name)); } catch (e) { return failed(main, name, e); }
    const versions = [...(t.versions || [])].sort((a, b) => b.number - a.number);
    // Delete, behind the confirmation; a refusal (workspaces or presets still use it) stays on
    // the page, naming them.
    const refusal = h('p', { class: 'error', role: 'alert', testid: 'template-delete-error' });
    const del = h('button', { class: 'danger', testid: 'template-delete' }, 'Delete template');
    del.addEventListener('click', async () => {
      if (!(await confirmDialog('Delete template ' + name + '?', 'Its versions go with it and its name may be pushed again. It is refused while workspaces of it are not deleted, or while it has presets.', 'Delete'))) return;
      try { await api('DELETE', '/api/v1/templates/' + enc(name)); toast('Template ' + name + ' deleted'); nav('/ui/admin/templates'); } catch (e) { refusal.textContent = e.message; }
    });
    fill(main, h('h1', {}, 'Template ', name), h('p', { class: 'muted' }, t.kind + ' · created by ' + t.created_by + ' ' + fmtTime(t.created_at)),
      h('p', { class: 'row' }, del), refusal,
      h('h2', {}, 'Versions'),
      table('versions-table', ['Version', 'Created', 'Parameters', ''], versions, (v) => {
        const promote = h('button', { testid: 'version-promote', disabled: v.active }, v.active ? 'active' : 'Promote');
        promote.addEventListener('click', async () => {
          if (!(await confirmDialog('Promote v' + v.number + '?', 'New workspaces and updates use this version.', 'Promote'))) return;
          try { await api('POST', '/api/v1/templates/' + enc(name) + '/versions/' + v.number + '/promote'); toast('v' + v.number + ' is active'); load(); } catch (e) { toast('Promote failed: ' + e.message); }
        });
        return h('tr', { testid: 'version-row', 'data-number': v.number, 'data-active': v.active ? 'true' : 'false' }, h('td', {}, 'v' + v.number), h('td', {}, fmtTime(v.created_at) + ' by ' + v.created_by),
          h('td', {}, (v.parameters || []).map((p) => p.name).join(', ')), h('td', {}, promote));
      }));
  };
  await load();
}

// --- Provisioners ------------------------------------------------------------------------------

export async function provisionersPage(main) {
  let ps;
  try { ps = listOf(await get('/api/v1/provisioners'), 'provisioners'); } catch (e) { return failed(main, 'Provisioners', e); }
  fill(main, h('h1', {}, 'Provisioners'),
    ps.length ? table('provisioners-table', ['Name', 'Last seen', 'Created'], ps, (p) => h('tr', { testid: 'provisioner-row', 'data-name': p.name },
      h('td', {}, p.built_in ? p.name + ' (in the server, ' + p.daemons + (p.daemons === 1 ? ' daemon)' : ' daemons)') : p.name),
      h('td', {}, p.last_seen_at ? fmtTime(p.last_seen_at) : 'never'), h('td', {}, p.built_in ? 'with the server' : fmtTime(p.created_at))))
      : h('p', { class: 'muted' }, 'No provisioner. Create one with ', h('code', {}, 'hangar provisioners create NAME'), '.'));
}

// --- Audit -------------------------------------------------------------------------------------

export function auditPage(main) {
  const fields = ['actor', 'action', 'target_kind', 'target'];
  const inputs = Object.fromEntries(fields.map((f) => [f, h('input', { id: 'audit-' + f, name: f, testid: 'audit-' + f })]));
  const outcome = h('select', { id: 'audit-outcome', testid: 'audit-outcome' }, ['', 'success', 'failure'].map((o) => h('option', { value: o }, o || 'any')));
  const tbody = h('tbody', { testid: 'audit-rows' });
  const more = h('button', { testid: 'audit-more', hidden: true }, 'Older entries');
  const form = h('form', { class: 'row', testid: 'audit-filter' }, fields.map((f) => h('label', { for: 'audit-' + f }, f.replace('_', ' '), inputs[f])),
    h('label', { for: 'audit-outcome' }, 'outcome', outcome), h('button', { type: 'submit' }, 'Filter'));
  let before = 0;
  const load = async (reset) => {
    const q = new URLSearchParams({ limit: '100' });
    for (const f of fields) if (inputs[f].value.trim()) q.set(f, inputs[f].value.trim());
    if (outcome.value) q.set('outcome', outcome.value);
    if (!reset && before) q.set('before_id', String(before));
    let page;
    try { page = await get('/api/v1/audit?' + q); } catch (e) { toast(e.message); return; }
    if (reset) clear(tbody);
    for (const e of page.entries || []) {
      tbody.append(h('tr', { testid: 'audit-row' }, h('td', {}, fmtTime(e.time)), h('td', {}, e.actor), h('td', {}, e.action),
        h('td', {}, [e.target_kind, e.target_name].filter(Boolean).join(' ')), h('td', { class: e.outcome === 'failure' ? 'error' : '' }, e.outcome + (e.error ? ': ' + e.error : ''))));
    }
    before = page.next_before_id || 0;
    more.hidden = !before;
  };
  form.addEventListener('submit', (e) => { e.preventDefault(); load(true); });
  more.addEventListener('click', () => load(false));
  fill(main, h('h1', {}, 'Audit log'), form,
    h('table', { testid: 'audit-table' }, h('thead', {}, h('tr', {}, ['Time', 'Actor', 'Action', 'Target', 'Outcome'].map((c) => h('th', { scope: 'col' }, c)))), tbody), more);
  load(true);
}

// --- Users (admin) -----------------------------------------------------------------------------

export async function usersPage(main, me) {
  let users;
  try { users = listOf(await get('/api/v1/users'), 'users'); } catch (e) {
    if (missing(e)) return unavailable(main, 'Users', 'The list of users');
    return failed(main, 'Users', e);
  }
  const reload = () => usersPage(main, me);
  const nameIn = h('input', { id: 'new-user', required: true, testid: 'user-new-name', autocomplete: 'off' });
  const adminIn = h('input', { type: 'checkbox', id: 'new-user-admin', testid: 'user-new-admin' });
  const created = h('div', {});
  const form = h('form', { class: 'row', testid: 'user-create' }, h('label', { for: 'new-user' }, 'Username', nameIn),
    h('label', { class: 'radio', for: 'new-user-admin' }, adminIn, 'admin'), h('button', { type: 'submit' }, 'Create user'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try { const u = await api('POST', '/api/v1/users', { username: nameIn.value.trim(), admin: adminIn.checked }); fill(created, secretBox('Token of ' + u.username, u.token)); } catch (err) { toast(err.message); }
  });
  const setSuspended = async (u, suspended) => {
    try { await api('PATCH', '/api/v1/users/' + enc(u.username), { suspended }); toast(u.username + (suspended ? ' suspended' : ' reactivated')); reload(); } catch (e) { toast(e.message); }
  };
  fill(main, h('h1', {}, 'Users'), form, created,
    table('users-table', ['Username', 'Admin', 'Status', 'Created', ''], users, (u) => h('tr', { testid: 'user-row', 'data-name': u.username },
      h('td', {}, u.username), h('td', {}, u.admin ? 'admin' : ''), h('td', { testid: 'user-status' }, u.suspended ? 'suspended' : 'active'), h('td', {}, fmtTime(u.created_at)),
      h('td', { class: 'row' }, h('a', { href: '/ui/tokens?user=' + enc(u.username), 'data-link': true, testid: 'user-tokens' }, 'Tokens'), u.username === me.username ? h('span', { class: 'muted' }, 'you') : [
        h('button', { testid: 'user-suspend', onclick: () => setSuspended(u, !u.suspended) }, u.suspended ? 'Reactivate' : 'Suspend'),
        h('button', { class: 'danger', testid: 'user-delete', onclick: async () => {
          if (!(await confirmDialog('Delete ' + u.username + '?', 'Their tokens and sessions end at once. A user who still owns workspaces cannot be deleted: delete their workspaces first.', 'Delete'))) return;
          try { await api('DELETE', '/api/v1/users/' + enc(u.username)); toast(u.username + ' deleted'); reload(); } catch (e) { toast(e.message); }
        } }, 'Delete')]))));
}

// --- Tokens (every user's own) -----------------------------------------------------------------

export async function tokensPage(main, me, fresh) {
  // An admin reads and revokes another user's tokens at /ui/tokens?user=NAME (tokens are made by
  // their own users only).
  const other = new URLSearchParams(location.search).get('user');
  const of = other && other !== me.username ? other : '';
  const q = of ? '?user=' + enc(of) : '';
  let tokens;
  try { tokens = listOf(await get('/api/v1/tokens' + q), 'tokens'); } catch (e) {
    if (missing(e)) return unavailable(main, 'Tokens', 'Managing API tokens');
    return failed(main, 'Tokens', e);
  }
  const reload = () => tokensPage(main, me);
  const nameIn = h('input', { id: 'tok-name', required: true, testid: 'token-new-name', autocomplete: 'off' });
  const ttl = h('select', { id: 'tok-ttl', testid: 'token-new-expiry' }, [['604800', '7 days'], ['2592000', '30 days'], ['7776000', '90 days'], ['31536000', '1 year']].map(([v, l]) => h('option', { value: v }, l)));
  // A token just made: its secret, shown once above the list that now holds it.
  const created = h('div', {}, fresh ? secretBox('Token ' + (fresh.name || ''), fresh.token) : '');
  const form = h('form', { class: 'row', testid: 'token-create' }, h('label', { for: 'tok-name' }, 'Name', nameIn), h('label', { for: 'tok-ttl' }, 'Expires in', ttl), h('button', { type: 'submit' }, 'Create token'));
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    try { const t = await api('POST', '/api/v1/tokens', { name: nameIn.value.trim(), lifetime_seconds: Number(ttl.value) }); tokensPage(main, me, t); } catch (err) { toast(err.message); }
  });
  fill(main, h('h1', {}, of ? 'API tokens of ' + of : 'API tokens'), h('p', { class: 'muted' }, 'Tokens of ' + (of || me.username) + ' for the command line and scripts. Revoking one ends it at once, in the proxy and SSH too.'), of ? '' : [form, created],
    table('tokens-table', ['Name', 'Status', 'Created', 'Expires', 'Last used', ''], tokens, (t) => h('tr', { testid: 'token-row', 'data-name': t.name, 'data-status': t.status || '' },
      h('td', {}, t.name), h('td', { testid: 'token-status' }, t.status || ''), h('td', {}, fmtTime(t.created_at)), h('td', {}, t.expires_at ? fmtTime(t.expires_at) : 'never'), h('td', {}, t.last_used_at ? fmtTime(t.last_used_at) : 'never'),
      h('td', {}, t.status && t.status !== 'active' ? '' : h('button', { class: 'danger', testid: 'token-revoke', onclick: async () => {
        if (!(await confirmDialog('Revoke ' + t.name + '?', 'Whatever uses it is refused from now on.', 'Revoke'))) return;
        try { await api('DELETE', '/api/v1/tokens/' + enc(t.id || t.name) + q); toast(t.name + ' revoked'); reload(); } catch (e) { toast(e.message); }
      } }, 'Revoke')))));
}
