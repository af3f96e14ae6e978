// The forges the server is configured with (hangar external-auth list/link/unlink): a user links
// their account at each, so that git in their workspaces clones and pushes as them. The token
// stays on the server; this page shows who the link is and whether it must be redone.
import { h, fill, fmtTime, toast, confirmDialog } from './dom.js';
import { api, get, enc } from './api.js';

export async function forgesPage(main, me) {
  let forges;
  try { forges = (await get('/api/v1/external-auth')).providers || []; } catch (e) {
    fill(main, h('h1', {}, 'Forges'), h('p', { class: 'error', role: 'alert' }, e.message));
    return;
  }
  const reload = () => forgesPage(main, me);
  const link = async (f, btn) => {
    btn.disabled = true;
    try {
      const start = await api('POST', '/api/v1/external-auth/' + enc(f.id) + '/link');
      location.assign(start.authorize_url); // the forge, then its callback page on this server
    } catch (e) { toast('Link failed: ' + e.message); btn.disabled = false; }
  };
  const unlink = async (f) => {
    if (!(await confirmDialog('Unlink ' + f.name + '?', 'Git in your workspaces is refused by ' + f.name + ' from its next request on.', 'Unlink'))) return;
    try { await api('DELETE', '/api/v1/external-auth/' + enc(f.id)); toast('Unlinked ' + f.name); reload(); } catch (e) { toast('Unlink failed: ' + e.message); }
  };
  const status = (f) => {
    if (!f.linked) return h('span', { class: 'muted' }, 'not linked');
    if (f.needs_relink) return h('span', { class: 'error' }, 'must be linked again: ' + f.relink_reason);
    if (f.last_refresh_error) return h('span', { class: 'error' }, 'last refresh failed: ' + f.last_refresh_error);
    return h('span', {}, 'linked');
  };
  const actions = (f) => {
    const out = [];
    if (!f.linked || f.needs_relink) {
      const btn = h('button', { class: 'primary', testid: 'forge-link', 'aria-label': 'Link ' + f.name }, f.linked ? 'Link again' : 'Link');
      btn.addEventListener('click', () => link(f, btn));
      out.push(btn);
    }
    if (f.linked) out.push(h('button', { class: 'danger', testid: 'forge-unlink', 'aria-label': 'Unlink ' + f.name, onclick: () => unlink(f) }, 'Unlink'));
    return out;
  };
  const list = forges.length
    ? h('table', { testid: 'forges-table' },
      h('thead', {}, h('tr', {}, ['Forge', 'Type', 'Account', 'Linked', 'Status', ''].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, forges.map((f) => h('tr', { testid: 'forge-row', 'data-id': f.id },
        h('td', {}, f.name), h('td', {}, f.type),
        h('td', { testid: 'forge-account' }, f.linked ? f.account_login + (f.account_email ? ' (' + f.account_email + ')' : '') : '—'),
        h('td', {}, f.linked && f.linked_at ? fmtTime(f.linked_at) : '—'),
        h('td', { testid: 'forge-status' }, status(f)),
        h('td', {}, actions(f))))))
    : h('p', { class: 'muted', testid: 'forges-empty' }, 'No forge is configured on this server.');
  fill(main, h('h1', {}, 'Forges'),
    h('p', { class: 'muted' }, 'Link your accounts so that git in your workspaces clones and pushes as you. The token stays on the Hangar server, encrypted; your workspace asks for it each time git needs it (',
      h('code', {}, 'hangar external-auth'), ').'),
    list);
}
