// Hangar's web UI: one page routed by path under /ui/ (history API), so that every page has an
// address to bookmark and the sign-in can send the browser back to it.
import { h, fill } from './dom.js';
import { get } from './api.js';
import { startLive, listPage, workspacePage, createPage } from './workspaces.js';
import { sshKeysPage } from './sshkeys.js';
import { forgesPage } from './forges.js';
import { profilePage } from './profile.js';
import { agentsPage, templatesPage, templatePage, provisionersPage, auditPage, usersPage, tokensPage } from './admin.js';

const main = document.getElementById('main');
let me = null;
let leave = null; // the current page's clean-up

const routes = [
  [/^\/ui\/?$/, (m) => listPage(main, me, nav)],
  [/^\/ui\/new$/, () => createPage(main, me, nav)],
  [/^\/ui\/w\/([^/]+)\/([^/]+)$/, (m) => workspacePage(main, me, nav, decodeURIComponent(m[1]), decodeURIComponent(m[2]))],
  [/^\/ui\/tokens$/, () => tokensPage(main, me)],
  [/^\/ui\/ssh-keys$/, () => sshKeysPage(main, me)],
  [/^\/ui\/forges$/, () => forgesPage(main, me)],
  [/^\/ui\/profile$/, () => profilePage(main)],
  [/^\/ui\/admin\/agents$/, () => agentsPage(main, me), true],
  [/^\/ui\/admin\/templates$/, () => templatesPage(main, me, nav), true],
  [/^\/ui\/admin\/templates\/([^/]+)$/, (m) => templatePage(main, me, nav, decodeURIComponent(m[1])), true],
  [/^\/ui\/admin\/provisioners$/, () => provisionersPage(main, me), true],
  [/^\/ui\/admin\/users$/, () => usersPage(main, me), true],
  [/^\/ui\/admin\/audit$/, () => auditPage(main, me), true],
];

function render() {
  if (leave) { leave(); leave = null; }
  const path = location.pathname;
  for (const a of document.querySelectorAll('#nav a')) {
    if (a.getAttribute('href') === path) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  for (const [re, page, adminOnly] of routes) {
    const m = path.match(re);
    if (!m) continue;
    if (adminOnly && !me.admin) {
      fill(main, h('h1', {}, 'Not allowed'), h('p', {}, 'Only an admin may see this page.'));
      return;
    }
    const out = page(m);
    leave = typeof out === 'function' ? out : null;
    return;
  }
  fill(main, h('h1', {}, 'Not found'), h('p', {}, 'No page here. ', h('a', { href: '/ui/', 'data-link': true }, 'Back to the workspaces'), '.'));
}

export function nav(path) {
  history.pushState(null, '', path);
  render();
  main.focus();
}

// Links marked data-link navigate inside the page (plain clicks only: a middle or modified click
// opens a new tab as usual).
document.addEventListener('click', (e) => {
  const a = e.target.closest('a[data-link]');
  if (!a || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey || a.target) return;
  e.preventDefault();
  nav(a.getAttribute('href'));
});
window.addEventListener('popstate', render);

async function boot() {
  try { me = await get('/api/v1/users/me'); } catch (e) {
    fill(main, h('p', { class: 'error', role: 'alert' }, 'Cannot reach the server: ' + e.message));
    return;
  }
  document.getElementById('whoami').textContent = me.username + (me.admin ? ' (admin)' : '');
  for (const el of document.querySelectorAll('.admin-only')) el.hidden = !me.admin;
  document.body.dataset.ready = 'true';
  startLive(document.getElementById('live'));
  render();
}

boot();
