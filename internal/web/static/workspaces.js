// The user's pages: the live workspace list, a workspace, and the creation form.
import { h, clear, fill, fmtTime, fmtDuration, fmtBytes, toast, confirmDialog, stateChip, fieldErrors } from './dom.js';
import { api, get, enc, ndjson } from './api.js';

// live holds every workspace the user may see, kept current by the server's event stream
// (GET /api/v1/workspaces/events): a snapshot, then the changes as they commit. Pages subscribe.
export const live = { byId: new Map(), ready: false, listeners: new Set(), source: null };

function emit(ev) { for (const fn of live.listeners) fn(ev); }

export function startLive(statusEl) {
  const set = (text, cls) => { statusEl.textContent = text; statusEl.className = 'live ' + cls; };
  const es = new EventSource('/api/v1/workspaces/events');
  live.source = es;
  es.addEventListener('snapshot', (e) => {
    performance.mark('hangar-snapshot-received'); // docs/benchmarks.md, "Web UI"
    const d = JSON.parse(e.data);
    const seen = new Set();
    for (const w of d.workspaces) { live.byId.set(w.id, w); seen.add(w.id); }
    const deleted = [...live.byId.keys()].filter((id) => !seen.has(id));
    for (const id of deleted) live.byId.delete(id);
    live.ready = true;
    set('live', 'on');
    emit({ snapshot: true, changed: d.workspaces, deleted });
    performance.mark('hangar-snapshot-shown');
  });
  es.addEventListener('change', (e) => {
    const d = JSON.parse(e.data);
    for (const w of d.workspaces) live.byId.set(w.id, w);
    const deleted = d.deleted || [];
    for (const id of deleted) live.byId.delete(id);
    emit({ snapshot: false, changed: d.workspaces, deleted });
  });
  es.addEventListener('open', () => set('live', 'on'));
  es.addEventListener('error', () => set(es.readyState === EventSource.CLOSED ? 'disconnected: reload the page' : 'reconnecting…', 'off'));
}

export function subscribe(fn) { live.listeners.add(fn); return () => live.listeners.delete(fn); }

// created holds the answer to the creation of a workspace created in this tab (by id): its
// warnings come only in that answer, and the workspace's page shows them.
const created = new Map();

export const refOf = (w) => w.owner + '/' + w.name;
const listOf = (v, key) => (Array.isArray(v) ? v : (v && v[key]) || []);
const sortKey = (w) => w.owner + '\u0000' + w.name;
const busy = (w) => w.desired_state !== w.actual_state;

// --- The list --------------------------------------------------------------------------------

const COLS = ['name', 'owner', 'backend', 'template', 'desired', 'actual', 'error', 'created'];

export function listPage(main, me, nav) {
  const tbody = h('tbody', { testid: 'ws-rows' });
  const rows = new Map(); // id → {tr, cells, key}
  const count = h('span', { class: 'count', testid: 'ws-count' });
  const filter = h('input', { type: 'search', id: 'ws-filter', placeholder: 'name or owner', testid: 'ws-filter' });
  const empty = h('p', { class: 'muted', testid: 'ws-empty', hidden: true }, 'No workspaces yet. ', h('a', { href: '/ui/new', 'data-link': true }, 'Create one'), '.');
  const matches = (w) => { const q = filter.value.trim().toLowerCase(); return !q || w.name.toLowerCase().includes(q) || w.owner.toLowerCase().includes(q); };
  const setText = (el, v) => { if (el.textContent !== v) el.textContent = v; };

  function fillRow(r, w) {
    const c = r.cells;
    c.name.firstChild.href = '/ui/w/' + enc(w.owner) + '/' + enc(w.name);
    setText(c.name.firstChild, w.name);
    setText(c.owner, w.owner);
    setText(c.backend, w.backend);
    setText(c.template, w.template || '');
    for (const [k, v] of [['desired', w.desired_state], ['actual', w.actual_state]]) {
      const chip = c[k].firstChild;
      setText(chip, v);
      chip.className = 'state state-' + v;
    }
    setText(c.error, w.error ? w.error.type + ': ' + w.error.message : '');
    setText(c.created, fmtTime(w.created_at));
    r.tr.dataset.actual = w.actual_state;
    r.tr.hidden = !matches(w);
  }

  function make(w) {
    const cells = {};
    const tr = h('tr', { testid: 'ws-row', 'data-id': w.id, 'data-name': w.name, 'data-owner': w.owner });
    for (const k of COLS) {
      const td = h('td', { testid: 'ws-' + k });
      if (k === 'name') td.append(h('a', { 'data-link': true }));
      if (k === 'desired' || k === 'actual') td.append(stateChip('', 'ws-' + k + '-state'));
      if (k === 'error') td.className = 'error';
      if (k === 'owner' && !me.admin) td.hidden = true;
      cells[k] = td;
      tr.append(td);
    }
    const r = { tr, cells, key: sortKey(w) };
    fillRow(r, w);
    return r;
  }

  // insert puts a new row at its place in owner, name order (the rows are kept sorted).
  function insert(r) {
    let after = null;
    for (const el of tbody.children) { if (rows.get(el.dataset.id).key > r.key) { after = el; break; } }
    tbody.insertBefore(r.tr, after);
  }

  function apply(ev) {
    if (ev.snapshot && rows.size === 0) {
      const frag = document.createDocumentFragment();
      for (const w of [...ev.changed].sort((a, b) => (sortKey(a) < sortKey(b) ? -1 : 1))) {
        const r = make(w);
        rows.set(w.id, r);
        frag.append(r.tr);
      }
      tbody.append(frag);
    } else {
      for (const w of ev.changed) {
        const r = rows.get(w.id);
        if (r) { fillRow(r, w); continue; }
        const n = make(w);
        rows.set(w.id, n);
        insert(n);
      }
    }
    for (const id of ev.deleted) { const r = rows.get(id); if (r) { r.tr.remove(); rows.delete(id); } }
    count.textContent = rows.size + (rows.size === 1 ? ' workspace' : ' workspaces');
    empty.hidden = rows.size > 0;
  }

  filter.addEventListener('input', () => { for (const [id, r] of rows) r.tr.hidden = !matches(live.byId.get(id)); });
  const head = h('tr', {}, COLS.map((k) => h('th', { scope: 'col', hidden: k === 'owner' && !me.admin }, k === 'actual' ? 'state' : k === 'desired' ? 'desired' : k)));
  fill(main, 
    h('div', { class: 'row' }, h('h1', {}, 'Workspaces'), count),
    h('div', { class: 'row filter' }, h('label', { for: 'ws-filter', class: 'radio' }, 'Filter'), filter,
      h('a', { href: '/ui/new', 'data-link': true, class: 'button', testid: 'ws-new' }, 'New workspace')),
    h('table', { testid: 'ws-table', 'aria-describedby': 'ws-caption' }, h('caption', { id: 'ws-caption', class: 'muted caption' }, 'Updated live as the workspaces change.'), h('thead', {}, head), tbody),
    empty);
  if (live.ready) apply({ snapshot: true, changed: [...live.byId.values()], deleted: [] });
  return subscribe(apply);
}

// --- One workspace -----------------------------------------------------------------------------

// helperProps are the lines of the helper's status: reachable or not since when, its last error,
// and its problem (not reachable two minutes after the start, with the likely cause).
function helperProps(w) {
  const hs = w.helper;
  if (!hs) return null;
  return [h('dt', {}, 'Helper'), h('dd', { testid: 'ws-helper' },
    h('span', { testid: 'ws-helper-status' }, hs.status), hs.since ? h('span', { class: 'muted' }, ' since ' + fmtTime(hs.since)) : null,
    hs.last_error && !(w.error && w.error.message === hs.last_error) ? h('div', { class: 'muted', testid: 'ws-helper-error' }, 'Last error: ' + hs.last_error) : null,
    hs.problem ? h('div', { class: 'error', role: 'status', testid: 'ws-helper-problem' }, hs.problem) : null)];
}

export function workspacePage(main, me, nav, owner, name) {
  const ref = owner + '/' + name;
  const path = '/api/v1/workspaces/' + enc(ref);
  let current = null;
  let agents = null;
  const state = h('dl', { class: 'props', testid: 'ws-props' });
  const errorBox = h('p', { class: 'error', testid: 'ws-detail-error', role: 'alert' });
  const actions = h('div', { class: 'row', testid: 'ws-actions' });
  const apps = h('div', { testid: 'ws-apps' });
  const ssh = h('div', { testid: 'ws-ssh' });
  const logsBox = h('section', { testid: 'ws-builds' });
  const stepsBox = h('section', { testid: 'ws-startup', hidden: true });
  const resBox = h('section', { testid: 'ws-resources', hidden: true });
  const sched = h('section', {});
  const paramsBox = h('section', { testid: 'ws-params' });
  const warnBox = h('div', { class: 'note', role: 'status', testid: 'ws-warnings', hidden: true });
  fill(main, h('h1', {}, h('span', { class: 'muted' }, owner + ' / '), name), state, errorBox, warnBox, actions, stepsBox, resBox,
    h('h2', {}, 'Apps'), apps, h('h2', {}, 'SSH'), ssh, paramsBox, sched, logsBox);

  async function act(label, desired, confirmText) {
    if (confirmText && !(await confirmDialog(label + ' ' + name + '?', confirmText, label))) return;
    try {
      await api('PATCH', path, { desired_state: desired });
      toast(label + ': requested');
    } catch (e) { toast(label + ' failed: ' + e.message); }
  }
  async function update() {
    // An update of a running workspace stops and starts it (its processes end): ask first, as
    // stop and restart do. A stopped one is only rebuilt on its next start.
    if (current && current.actual_state === 'Running' &&
        !(await confirmDialog('Update ' + name + '?',
          'The workspace is stopped and started again on the active template version; what runs in it ends.',
          'Update', 'Not now'))) return;
    try {
      const out = await api('POST', path + '/update', {});
      toast('Update: ' + out.result);
    } catch (e) { toast('Update failed: ' + e.message); }
  }
  // updateDefinition reads a Kubernetes workspace's definition again from its repository.
  async function updateDefinition() {
    if (current && current.actual_state === 'Running' &&
        !(await confirmDialog('Update ' + name + ' from its repository?',
          'Its definition is read again at the newest commit; if it changed, the workspace is rolled onto it and what runs in it ends.',
          'Update', 'Not now'))) return;
    try {
      const out = await api('POST', path + '/update', {});
      repository = out.workspace.repository || repository;
      definition = out.workspace.definition || definition;
      toast(out.result === 'up-to-date' ? 'Up to date: the definition is the same' : 'Updated: the new definition is the workspace\u2019s');
      render(current);
    } catch (e) { toast('Update failed: ' + e.message); }
  }

  function render(w) {
    current = w;
    fill(state, 
      h('dt', {}, 'State'), h('dd', {}, stateChip(w.actual_state, 'ws-detail-state'),
        startupFailed && w.actual_state === 'Running' ? [' ', h('span', { class: 'error', testid: 'ws-startup-failed' }, 'startup failed (' + startupFailed + ')')] : null,
        ' ', h('span', { class: 'muted' }, 'desired '), stateChip(w.desired_state, 'ws-detail-desired')),
      h('dt', {}, 'Backend'), h('dd', {}, w.backend + (w.agent ? ' (agent ' + w.agent + ')' : '') + (w.template ? ' · template ' + w.template + (w.template_version ? ' v' + w.template_version : '') : '')),
      definition ? [h('dt', {}, 'Definition'), h('dd', { testid: 'ws-definition' }, definition)] : null,
      repository ? [h('dt', {}, 'Repository'), h('dd', { testid: 'ws-repository' },
        h('div', { class: 'mono' }, repository.url + ' at ' + (repository.ref || 'its default branch')),
        h('div', { class: 'muted', testid: 'ws-repository-commit' }, !repository.commit ? 'not read (no configured forge serves it)' :
          (repository.definition_path || 'no definition: the default') + ' at commit ' + repository.commit.slice(0, 12) + ', read ' + fmtTime(repository.read_at)))] : null,
      dotfiles ? [h('dt', {}, 'Dotfiles'), h('dd', { testid: 'ws-dotfiles' },
        h('span', { testid: 'ws-dotfiles-status' }, dotfiles.status + (dotfiles.script ? ' (' + dotfiles.script + ')' : '')),
        dotfiles.repository ? [' ', h('span', { class: 'muted mono' }, dotfiles.repository)] : null,
        dotfiles.error ? h('div', { class: 'error' }, dotfiles.error) : null,
        dotfiles.status === 'failed' && dotfiles.log ? h('pre', { testid: 'ws-dotfiles-log' }, dotfiles.log) : null)] : null,
      w.outdated ? [h('dt', {}, 'Version'), h('dd', { testid: 'ws-outdated' }, 'A newer template version is active.')] : null,
      w.desired_state_reason ? [h('dt', {}, 'Why'), h('dd', {}, w.desired_state_reason)] : null,
      h('dt', {}, 'Created'), h('dd', {}, fmtTime(w.created_at)),
      h('dt', {}, 'Last used'), h('dd', {}, w.last_activity_at ? fmtTime(w.last_activity_at) : 'never'),
      w.automation && w.automation.autostop_at ? [h('dt', {}, 'Stops at'), h('dd', {}, fmtTime(w.automation.autostop_at))] : null,
      w.automation && w.automation.next_autostart_at ? [h('dt', {}, 'Starts at'), h('dd', {}, fmtTime(w.automation.next_autostart_at))] : null,
      helperProps(w),
      (w.parameters || []).length ? [h('dt', {}, 'Parameters'), h('dd', {}, w.parameters.map((p) => h('div', { class: 'mono' }, p.name + ' = ' + (p.sensitive ? '••••' : p.value || ''))))] : null);
    errorBox.textContent = !w.error ? '' : w.actual_state === 'Canceled' ? 'Canceled: ' + w.error.message : 'Failed: ' + w.error.type + ': ' + w.error.message;
    errorBox.hidden = !w.error;
    const running = w.actual_state === 'Running';
    fill(actions, 
      h('button', { testid: 'ws-start', onclick: () => act('Start', 'Running'), disabled: w.desired_state === 'Running' && !w.error }, 'Start'),
      h('button', { testid: 'ws-stop', onclick: () => act('Stop', 'Stopped'), disabled: w.desired_state === 'Stopped' }, 'Stop'),
      h('button', { testid: 'ws-restart', onclick: () => act('Restart', 'RestartRequested', 'The workspace stops and starts again; open sessions end.'), disabled: !running }, 'Restart'),
      w.backend === 'terraform' ? h('button', { testid: 'ws-update', onclick: update, disabled: !w.outdated }, 'Update to the active version') : null,
      repository ? h('button', { testid: 'ws-update-definition', onclick: updateDefinition }, 'Update from the repository') : null,
      h('button', { class: 'danger', testid: 'ws-delete', onclick: () => act('Delete', 'Terminated', (w.backend === 'terraform' ? 'terraform destroy deletes the workspace\u2019s resources.' : 'The workspace\u2019s Kubernetes objects and its volume are deleted.') + ' This cannot be undone.') }, 'Delete'),
      busy(w) ? h('span', { class: 'muted', testid: 'ws-busy' }, 'working…') : null);
    renderApps(w);
    renderSSH(w);
  }

  let endpoints = []; // the devfile's, in the answer about this workspace only (they never change)
  let definition = ''; // devfile or devcontainer.json: in that answer too, not in the live stream
  let repository = null; // where the definition comes from (in that answer and after an update)
  let dotfiles = null; // the owner's dotfiles install (in that answer only)
  let steps = []; // the startup steps, in that answer only: read again while one runs
  let startupFailed = ''; // the step that failed while the workspace runs (that answer only)
  let stepsShown = '';
  const stepsOpen = new Map(); // step name → open: what the reader chose for its log, kept across reads
  function renderSteps() {
    const sig = JSON.stringify(steps);
    if (sig === stepsShown) return;
    stepsShown = sig;
    stepsBox.hidden = !steps.length;
    fill(stepsBox, h('h2', {}, 'Startup'), h('ul', { class: 'steps' }, steps.map((st) => {
      const took = st.started_at && st.ended_at ? ' in ' + fmtDuration(new Date(st.ended_at) - new Date(st.started_at))
        : st.started_at && st.state === 'running' ? ' since ' + fmtTime(st.started_at) : '';
      const line = h('span', { testid: 'ws-step-' + st.name },
        h('strong', {}, st.name), ' ', h('span', { class: st.state === 'failed' ? 'error' : 'muted', testid: 'ws-step-state' }, st.state + took),
        st.detail ? [' ', h('span', { class: 'mono', testid: 'ws-step-detail' }, st.detail)] : null);
      if (!st.log) return h('li', {}, line);
      const open = stepsOpen.has(st.name) ? stepsOpen.get(st.name) : st.state === 'failed' || st.state === 'running';
      const d = h('details', { testid: 'ws-step-log-' + st.name }, h('summary', {}, line), h('pre', {}, st.log));
      d.open = open;
      d.addEventListener('toggle', () => stepsOpen.set(st.name, d.open));
      return h('li', {}, d);
    })));
  }
  // What its helper reports from inside (in the answer about the workspace only): its resources,
  // custom metadata values and alerts; read again every 10 s while it runs.
  let inside = { resources: null, metadata: [], alerts: [] };
  let insideShown = '';
  function share(used, total) {
    return total > 0 ? fmtBytes(used) + ' of ' + fmtBytes(total) + ' (' + Math.floor(used * 100 / total) + '%)' : fmtBytes(used);
  }
  function renderInside() {
    const sig = JSON.stringify(inside);
    if (sig === insideShown) return;
    insideShown = sig;
    const { resources: r, metadata, alerts } = inside;
    resBox.hidden = !r && !metadata.length && !alerts.length;
    const rows = [];
    if (r && r.cpu) rows.push(['CPU', r.cpu.used_cores.toFixed(2) + ' of ' + r.cpu.limit_cores + ' cores', 'ws-res-cpu']);
    if (r && r.memory) rows.push(['Memory', share(r.memory.used_bytes, r.memory.limit_bytes), 'ws-res-memory']);
    for (const v of (r && r.volumes) || []) rows.push([v.path, share(v.used_bytes, v.total_bytes), 'ws-res-volume']);
    for (const m of metadata) rows.push([m.display_name, m.value + (m.error ? ' (' + m.error + ')' : ''), 'ws-meta-' + m.key]);
    fill(resBox, h('h2', {}, 'Inside the workspace'),
      alerts.length ? h('ul', { class: 'alerts', testid: 'ws-alerts' }, alerts.map((a) => h('li', { class: a.active ? 'error' : 'muted', testid: 'ws-alert' },
        (a.active ? 'Active since ' : '') + fmtTime(a.raised_at) + ': ' + a.detail))) : null,
      rows.length ? h('dl', { class: 'props' }, rows.map(([k, v, id]) => [h('dt', {}, k), h('dd', { testid: id }, v)])) : null,
      r ? h('p', { class: 'muted', testid: 'ws-res-measured' }, 'Measured by the workspace\u2019s helper ' + fmtTime(r.collected_at)) : null);
  }
  function takeInside(w) {
    inside = { resources: w.resources || null, metadata: w.metadata || [], alerts: w.alerts || [] };
    renderInside();
  }
  // While the workspace starts, or a step is pending or running, the page reads the workspace
  // again every 2 s, and once when its state changes: the steps change without the workspace's
  // row, which the live stream carries. One read at a time: a slow answer is not asked again
  // meanwhile.
  let stepsReading = false;
  function readSteps() {
    if (stepsReading) return;
    stepsReading = true;
    get(path).then((w) => {
      steps = w.startup_steps || [];
      const failed = w.startup_failed || '';
      renderSteps();
      takeInside(w);
      if (failed !== startupFailed) { startupFailed = failed; if (current) render(current); }
    }).catch(() => {}).finally(() => { stepsReading = false; });
  }
  const stepsTimer = setInterval(() => {
    if (!current) return;
    const starting = current.actual_state === 'Starting' || current.actual_state === 'CreationRequested';
    if (starting || steps.some((st) => st.state === 'pending' || st.state === 'running')) readSteps();
  }, 2000);
  const insideTimer = setInterval(() => { if (current && current.actual_state === 'Running') readSteps(); }, 10000);
  let appsShown = '';
  function renderApps(w) {
    // Rendered at each change of the workspace: the section is rebuilt only when what it shows
    // changes, so a port being typed in its box (and a reader's place) survives other changes.
    const sig = JSON.stringify([w.name, w.url, w.apps_url, endpoints]);
    if (sig === appsShown) return;
    appsShown = sig;
    clear(apps);
    if (w.url) apps.append(h('p', {}, h('a', { href: w.url, target: '_blank', rel: 'noopener', testid: 'ws-app-link' }, w.url)));
    if (endpoints.length) {
      apps.append(h('table', { testid: 'ws-endpoints' },
        h('thead', {}, h('tr', {}, ['endpoint', 'container', 'port', 'exposure', 'address'].map((k) => h('th', { scope: 'col' }, k)))),
        h('tbody', {}, endpoints.map((e) => h('tr', { testid: 'ws-endpoint' },
          h('td', {}, e.name), h('td', {}, e.container), h('td', {}, String(e.port)), h('td', {}, e.exposure),
          h('td', {}, e.url ? h('a', { href: e.url, target: '_blank', rel: 'noopener' }, e.url) : h('span', { class: 'muted' }, 'not served by the access proxy')))))));
    }
    if (w.apps_url) {
      // Hangar does not know which port the machine's app listens on: the box starts empty, and
      // the link shows once a port is typed.
      const port = h('input', { type: 'number', min: 1, max: 65535, id: 'app-port', testid: 'ws-app-port', class: 'port', placeholder: 'a port, e.g. 8080' });
      const link = h('a', { target: '_blank', rel: 'noopener', testid: 'ws-app-port-link' });
      const upd = () => {
        const n = Number(port.value);
        link.hidden = !(Number.isInteger(n) && n >= 1 && n <= 65535 && port.value !== '');
        const u = link.hidden ? '' : w.apps_url.replace('{port}', String(n));
        link.href = u; link.textContent = u;
      };
      port.addEventListener('input', upd);
      upd();
      apps.append(h('div', { class: 'row' }, h('label', { for: 'app-port', class: 'radio' }, 'Port'), port, link));
    }
    if (!w.url && !w.apps_url) apps.append(h('p', { class: 'muted' }, 'This workspace has no app address.'));
  }

  let myKeys = null; // the user's SSH keys, read once per page
  let sshShown = '';
  async function renderSSH(w) {
    const self = me.username === w.owner;
    const wsRef = self ? w.name : refOf(w);
    const lines = ['hangar ssh ' + wsRef];
    if (w.backend === 'kubernetes' && w.agent) {
      if (!agents) { try { agents = await get('/api/v1/agents'); } catch { agents = []; } }
      const a = agents.find((x) => x.name === w.agent);
      const addr = a && a.config && a.config.proxy_ssh_address;
      if (addr) {
        const i = addr.lastIndexOf(':');
        lines.push('ssh -p ' + addr.slice(i + 1) + ' ' + wsRef + '@' + addr.slice(0, i));
      }
    }
    // Plain ssh (and config-ssh's entries) reach a Kubernetes workspace through the access proxy
    // with a key its owner registered; hangar ssh and Terraform workspaces use the token.
    let needKey = false;
    if (self && w.backend === 'kubernetes') {
      if (!myKeys) { try { myKeys = (await get('/api/v1/users/me/ssh-keys')).ssh_keys || []; } catch { myKeys = []; } }
      needKey = myKeys.length === 0;
    }
    // Rendered at each change of the workspace: the nodes are replaced only when their text
    // changes (a reader, or a test, holding one keeps it).
    const sig = JSON.stringify([lines, needKey, w.name]);
    if (sig === sshShown) return;
    sshShown = sig;
    fill(ssh, needKey ? h('p', { class: 'note', testid: 'ws-ssh-nokey' }, 'Plain ssh, VS Code and JetBrains need a key of yours: ',
      h('a', { href: '/ui/ssh-keys', 'data-link': true, testid: 'ws-ssh-addkey' }, 'add an SSH key first'), '. (', h('code', {}, 'hangar ssh'), ' works without one.)') : null,
    h('pre', { class: 'cmd', testid: 'ws-ssh-command' }, lines.join('\n')),
    h('p', { class: 'muted' }, 'Or run ', h('code', {}, 'hangar config-ssh'), ' once, then ', h('code', {}, 'ssh ' + w.name + '.hangar'), '.'));
  }

  // renderParams offers what hangar update --parameter does: new values of the mutable parameters
  // of the template's active version (and of the required ones it adds), built on that version.
  async function renderParams(w) {
    if (w.backend !== 'terraform' || !w.template) { clear(paramsBox); return; }
    let t;
    try { t = await get('/api/v1/templates/' + enc(w.template)); } catch (e) { fill(paramsBox, h('h2', {}, 'Parameters'), h('p', { class: 'error' }, e.message)); return; }
    const active = (t.versions || []).find((v) => v.active);
    const have = new Map((w.parameters || []).map((p) => [p.name, p]));
    // "new": the active version has the parameter and the workspace's version had not (without
    // the workspace's version to compare, one the workspace has no value of).
    const mine = (t.versions || []).find((v) => v.number === w.template_version);
    const isNew = (p) => (mine ? !(mine.parameters || []).some((q) => q.name === p.name) : !have.has(p.name));
    const ps = ((active && active.parameters) || []).filter((p) => p.mutable || (p.required && !have.has(p.name)));
    if (!ps.length) {
      fill(paramsBox, h('h2', {}, 'Parameters'), h('p', { class: 'muted', testid: 'params-none' }, 'None of this template\u2019s parameters can change after create.'));
      return;
    }
    const fields = {};
    const general = h('p', { class: 'error', role: 'alert', testid: 'params-error' });
    const rows = ps.map((p) => {
      const id = 'u-p-' + p.name;
      const cur = have.get(p.name);
      let input;
      if (p.type === 'bool') input = h('select', { id, testid: 'uparam-' + p.name }, h('option', { value: 'true' }, 'true'), h('option', { value: 'false' }, 'false'));
      else input = h('input', { id, type: p.sensitive ? 'password' : p.type === 'number' ? 'number' : 'text', testid: 'uparam-' + p.name, autocomplete: p.sensitive ? 'new-password' : 'off',
        placeholder: p.sensitive ? 'unchanged' : p.default || '', 'aria-describedby': id + '-error' });
      input.value = cur && !p.sensitive ? cur.value || '' : p.type === 'bool' ? p.default || 'false' : '';
      input.dataset.was = input.value;
      const out = h('p', { class: 'error field-error', id: id + '-error', hidden: true });
      fields['parameters.' + p.name] = { input, out, name: p.name, sensitive: p.sensitive };
      const marks = [isNew(p) ? 'new' : '', p.required ? 'required' : ''].filter(Boolean);
      return [h('label', { for: id, testid: 'uparam-label-' + p.name }, p.name + (marks.length ? ' (' + marks.join(', ') + ')' : ''),
        h('span', { class: 'hint' }, [p.type, p.description, p.default && !p.sensitive ? 'default ' + p.default : ''].filter(Boolean).join(' · ')), input), out];
    });
    const form = h('form', { class: 'stack', testid: 'params-form' }, rows,
      h('p', { class: 'muted' }, 'Saving builds the workspace on the template\u2019s active version with these values: a running workspace stops and starts again.'),
      h('div', {}, h('button', { type: 'submit', testid: 'params-save' }, 'Update with these values')), general);
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      general.textContent = '';
      for (const f of Object.values(fields)) { f.out.hidden = true; f.input.removeAttribute('aria-invalid'); }
      const values = {};
      for (const f of Object.values(fields)) {
        const v = f.input.value;
        if (v !== f.input.dataset.was && !(f.sensitive && v === '')) values[f.name] = v;
      }
      if (!Object.keys(values).length && !(current && current.outdated)) { general.textContent = 'Nothing to change: no value differs from the workspace\u2019s.'; return; }
      // A running workspace is stopped and started: ask first, as Update does.
      if (current && current.actual_state === 'Running' &&
          !(await confirmDialog('Update ' + name + '?',
            'The workspace is stopped and started again with these values on the active template version; what runs in it ends.',
            'Update', 'Not now'))) return;
      try {
        const out = await api('POST', path + '/update', { parameters: values });
        toast('Update: ' + out.result);
        renderParams(out.workspace || w);
      } catch (err) { fieldErrors(err, fields, general); }
    });
    fill(paramsBox, h('h2', {}, 'Parameters'), form);
  }

  function renderSchedule(w) {
    const s = w.schedule || {};
    const auto = h('input', { id: 'sched-autostart', name: 'autostart', value: s.autostart || '', placeholder: '0 8 * * 1-5', testid: 'sched-autostart' });
    const tz = h('input', { id: 'sched-tz', name: 'timezone', value: s.timezone || '', placeholder: 'Europe/Berlin', testid: 'sched-timezone' });
    const ttl = h('input', { id: 'sched-ttl', name: 'ttl', value: s.ttl == null ? '' : s.ttl, placeholder: 'the policy\u2019s default', testid: 'sched-ttl' });
    const form = h('form', { class: 'stack', testid: 'schedule-form' },
      h('label', { for: 'sched-autostart' }, 'Autostart (cron)', h('span', { class: 'hint' }, 'minute hour day month weekday; empty: none'), auto),
      h('label', { for: 'sched-tz' }, 'Time zone', h('span', { class: 'hint' }, 'IANA name; empty: UTC'), tz),
      h('label', { for: 'sched-ttl' }, 'Autostop after', h('span', { class: 'hint' }, 'a duration such as 8h; 0 turns autostop off; empty takes the policy\u2019s default'), ttl),
      h('div', {}, h('button', { type: 'submit', testid: 'sched-save' }, 'Save schedule')));
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      try {
        await api('PUT', path + '/schedule', { autostart: auto.value.trim(), timezone: tz.value.trim(), ttl: ttl.value.trim() === '' ? null : ttl.value.trim() });
        toast('Schedule saved');
      } catch (err) { toast('Schedule: ' + err.message); }
    });
    fill(sched, h('h2', {}, 'Schedule'), form);
  }

  const builds = buildsSection(logsBox, path, name);
  const onLive = (ev) => {
    const w = [...ev.changed].find((x) => x.owner === owner && x.name === name);
    if (w) {
      const changed = current && current.actual_state !== w.actual_state;
      render(w);
      if (changed) readSteps();
      if (w.backend === 'terraform') builds.refresh(); // a build began, or one ended
    } else if (current && ev.deleted.includes(current.id)) {
      errorBox.hidden = false;
      errorBox.textContent = 'This workspace was deleted.';
      clear(actions);
    }
  };
  get(path).then((w) => {
    endpoints = w.endpoints || []; // the live stream's workspaces do not carry them
    definition = w.definition || '';
    repository = w.repository || null;
    dotfiles = w.dotfiles || null;
    steps = w.startup_steps || [];
    startupFailed = w.startup_failed || '';
    renderSteps();
    takeInside(w);
    const made = created.get(w.id);
    if (made && (made.warnings || []).length) {
      fill(warnBox, h('strong', {}, 'Created with warnings:'), h('ul', {}, made.warnings.map((x) => h('li', { testid: 'ws-warning' }, x))));
      warnBox.hidden = false;
    }
    render(live.byId.get(w.id) || w);
    renderSchedule(w);
    renderParams(w);
    if (w.backend === 'terraform') builds.refresh();
  }).catch((e) => { fill(main, h('h1', {}, name), h('p', { class: 'error', role: 'alert' }, e.message)); });
  const unsub = subscribe(onLive);
  // A helper connecting or going away changes no workspace row, so the live stream does not carry
  // it: ask again every 30 s, and show the answer when the helper's status changed.
  const helperTimer = setInterval(() => {
    get(path).then((w) => {
      if (current && JSON.stringify(w.helper) !== JSON.stringify(current.helper)) render(w);
    }).catch(() => {});
  }, 30000);
  return () => { clearInterval(helperTimer); clearInterval(stepsTimer); clearInterval(insideTimer); unsub(); builds.leave(); };
}

// --- A Terraform workspace's builds ---------------------------------------------------------------

const activeBuild = (b) => b.status === 'pending' || b.status === 'running' || b.status === 'canceling';

// buildsSection lists a Terraform workspace's builds in box (hangar builds), newest first, shows the
// log of one (hangar logs -f: the newest unless the user picks another) and cancels a running one
// (hangar cancel). refresh re-reads the list: the workspace page calls it on each change of the
// workspace in the live stream, and it runs when a followed log ends.
function buildsSection(box, path, name) {
  const rows = new Map(); // number → {tr, cells, logBtn, cancelBtn, b}
  const tbody = h('tbody', { testid: 'builds-rows' });
  const table = h('table', { testid: 'builds-table', 'aria-describedby': 'builds-caption' },
    h('caption', { id: 'builds-caption', class: 'muted caption' }, 'Newest first, updated live.'),
    h('thead', {}, h('tr', {}, ['Build', 'Transition', 'Status', 'By', 'Why', 'Started', 'Ended', 'Error', ''].map((c) => h('th', { scope: 'col' }, c)))), tbody);
  const empty = h('p', { class: 'muted', testid: 'builds-empty' }, 'No builds.');
  const logTitle = h('h3', { id: 'log-title', testid: 'ws-logs-title' });
  const status = h('span', { class: 'muted', testid: 'ws-logs-status', role: 'status' });
  const pre = h('pre', { class: 'logs', testid: 'ws-logs', 'aria-live': 'off', 'aria-labelledby': 'log-title', tabindex: 0 });
  const logPart = h('div', { hidden: true }, h('div', { class: 'row' }, logTitle, status), pre);
  table.hidden = true;
  // Shown at the first answer: a workspace of another backend has no builds section.
  let mounted = false;
  const mount = () => { if (!mounted) { mounted = true; fill(box, h('h2', {}, 'Builds'), empty, table, logPart); } };

  let shown = 0; // the number of the build whose log is shown
  let pinned = false; // the user picked an older build: a new one does not replace it
  let abort = null;
  let seq = 0;

  const setText = (el, v) => { if (el.textContent !== v) el.textContent = v; };
  function fillRow(r, b) {
    r.b = b;
    const c = r.cells;
    setText(c.transition, b.transition);
    setText(c.status.firstChild, b.status);
    c.status.firstChild.className = 'state state-' + b.status;
    setText(c.by, b.initiator || '');
    setText(c.why, b.reason || '');
    setText(c.started, b.started_at ? fmtTime(b.started_at) : '');
    setText(c.ended, b.completed_at ? fmtTime(b.completed_at) : '');
    if (c.error.dataset.full !== (b.error || '')) {
      // The first line, as hangar builds prints it; the whole error (terraform's) behind it.
      const full = (b.error || '').trim();
      const i = full.indexOf('\n');
      c.error.dataset.full = b.error || '';
      fill(c.error, i < 0 ? full : h('details', {}, h('summary', {}, full.slice(0, i) + ' …'), h('div', { class: 'pre' }, full.slice(i + 1))));
    }
    r.tr.dataset.status = b.status;
    r.cancelBtn.hidden = !activeBuild(b);
    r.cancelBtn.disabled = b.status === 'canceling';
    setText(r.cancelBtn, b.status === 'canceling' ? 'Canceling…' : 'Cancel');
    r.cancelBtn.setAttribute('aria-label', (b.status === 'canceling' ? 'Canceling build #' : 'Cancel build #') + b.number);
  }
  function make(b) {
    const cells = {};
    const tr = h('tr', { testid: 'build-row', 'data-number': b.number });
    for (const k of ['number', 'transition', 'status', 'by', 'why', 'started', 'ended', 'error', 'actions']) {
      cells[k] = h('td', { testid: 'build-' + k });
      tr.append(cells[k]);
    }
    cells.number.textContent = '#' + b.number;
    cells.status.append(h('span', {}));
    cells.error.className = 'error';
    const logBtn = h('button', { testid: 'build-log', 'aria-pressed': 'false', 'aria-label': 'Show the log of build #' + b.number, onclick: () => { pinned = r.b.number !== newest(); follow(r.b.number); } }, 'Log');
    const cancelBtn = h('button', { class: 'danger', testid: 'build-cancel', 'aria-label': 'Cancel build #' + b.number, onclick: () => cancel(r.b) }, 'Cancel');
    cells.actions.append(h('div', { class: 'row' }, logBtn, cancelBtn));
    const r = { tr, cells, logBtn, cancelBtn, b };
    fillRow(r, b);
    return r;
  }
  const newest = () => { let n = 0; for (const k of rows.keys()) n = Math.max(n, k); return n; };

  function show(list) {
    for (const b of list) {
      const r = rows.get(b.number);
      if (r) { fillRow(r, b); continue; }
      const n = make(b);
      rows.set(b.number, n);
      // Newest first: a new build goes above the first row with a smaller number.
      let before = null;
      for (const el of tbody.children) { if (Number(el.dataset.number) < b.number) { before = el; break; } }
      tbody.insertBefore(n.tr, before);
    }
    table.hidden = rows.size === 0;
    empty.hidden = rows.size > 0;
    const latest = newest();
    if (latest && (!shown || (!pinned && latest !== shown))) follow(latest);
  }

  async function refresh() {
    const my = ++seq;
    let list;
    try { list = await get(path + '/builds'); } catch (e) { if (my === seq) { mount(); setText(empty, e.message); } return; }
    if (my !== seq) return; // a later refresh answers for it
    mount();
    show(Array.isArray(list) ? list : (list.builds || []));
  }

  function follow(n) {
    if (abort) abort.abort();
    abort = new AbortController();
    shown = n;
    for (const [k, r] of rows) r.logBtn.setAttribute('aria-pressed', k === n ? 'true' : 'false');
    logPart.hidden = false;
    logTitle.textContent = 'Log of build #' + n;
    clear(pre);
    status.textContent = 'streaming…';
    ndjson(path + '/builds/' + n + '/logs?follow=true', (l) => {
      if (l.end) {
        status.textContent = 'build ' + l.status;
        refresh();
        return;
      }
      const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
      pre.append((l.stage ? '[' + l.stage + '] ' : '') + (l.output || '') + '\n');
      if (atEnd) pre.scrollTop = pre.scrollHeight;
    }, abort.signal).catch((e) => { if (e.name !== 'AbortError') status.textContent = e.message; });
  }

  async function cancel(b) {
    if (!(await confirmDialog('Cancel build #' + b.number + ' of ' + name + '?',
      'Terraform finishes the operations in progress and stops. The state it wrote is kept, so nothing it created is forgotten; the workspace is then Canceled until it is started, stopped or deleted.',
      'Cancel the build', 'Let it run'))) return;
    try {
      const nb = await api('POST', path + '/builds/' + b.number + '/cancel');
      const r = rows.get(nb.number);
      if (r) fillRow(r, nb);
      toast('Build #' + nb.number + ' is ' + nb.status);
    } catch (e) { toast('Cancel failed: ' + e.message); refresh(); }
  }

  return { refresh, leave: () => { seq++; if (abort) abort.abort(); } };
}

// --- Create ------------------------------------------------------------------------------------

export function createPage(main, me, nav) {
  const form = h('form', { class: 'stack', testid: 'create-form', novalidate: false });
  const nameIn = h('input', { id: 'c-name', name: 'name', required: true, pattern: '[a-z0-9]([-a-z0-9]*[a-z0-9])?', maxlength: 40, autocomplete: 'off', testid: 'create-name' });
  const srcT = h('input', { type: 'radio', name: 'source', value: 'template', id: 'c-src-t', checked: true, testid: 'create-source-template' });
  const srcD = h('input', { type: 'radio', name: 'source', value: 'devfile', id: 'c-src-d', testid: 'create-source-devfile' });
  const srcC = h('input', { type: 'radio', name: 'source', value: 'devcontainer', id: 'c-src-c', testid: 'create-source-devcontainer' });
  const srcR = h('input', { type: 'radio', name: 'source', value: 'repository', id: 'c-src-r', testid: 'create-source-repository' });
  const tmplSel = h('select', { id: 'c-template', testid: 'create-template' }, h('option', { value: '' }, 'Loading…'));
  const presetSel = h('select', { id: 'c-preset', testid: 'create-preset' }, h('option', { value: '' }, 'none'));
  const params = h('div', { class: 'stack', testid: 'create-params' });
  const agentSel = h('select', { id: 'c-agent', testid: 'create-agent' }, h('option', { value: '' }, 'the default'));
  const devfile = h('textarea', { id: 'c-devfile', name: 'devfile', testid: 'create-devfile', spellcheck: false, placeholder: 'schemaVersion: 2.2.0\ncomponents:\n  - name: dev\n    container:\n      image: …' });
  const upload = h('input', { type: 'file', id: 'c-upload', accept: '.yaml,.yml,text/yaml', testid: 'create-devfile-file' });
  const devcontainer = h('textarea', { id: 'c-devcontainer', name: 'devcontainer', testid: 'create-devcontainer', spellcheck: false, placeholder: '{\n  "image": "…",\n  "forwardPorts": [3000]\n}' });
  const uploadC = h('input', { type: 'file', id: 'c-upload-c', accept: '.json,application/json', testid: 'create-devcontainer-file' });
  // A repository: its URL, a ref, and which devcontainer.json when it has several. Each field has
  // its error under it (the server's 400 names repository.url, .ref, .devcontainer_path).
  const repoField = (key, label, hint, attrs) => {
    const id = 'c-repo-' + key;
    const input = h('input', Object.assign({ id, autocomplete: 'off', spellcheck: false, testid: 'create-repo-' + key, 'aria-describedby': id + '-error' }, attrs));
    const out = h('p', { class: 'error field-error', id: id + '-error', testid: 'create-repo-' + key + '-error', hidden: true });
    return { input, out, part: [h('label', { for: id }, label, h('span', { class: 'hint' }, hint), input), out] };
  };
  // Not type=url: an scp-like SSH remote (git@host:path) is no URL to the browser.
  const repoURL = repoField('url', 'Repository URL', 'its https:// address, or its SSH one (git@host:path, ssh://) when the forge serves SSH; a private one is read with your account linked on the Forges page, and cloned over SSH with your key from hangar gitssh', { type: 'text', required: true, placeholder: 'https://FORGE/team/app.git' });
  const repoRef = repoField('ref', 'Branch, tag or commit', 'empty: the default branch', { placeholder: 'main' });
  const repoPath = repoField('devcontainer', 'devcontainer.json path', 'only when the repository has several, e.g. .devcontainer/go/devcontainer.json; empty: its devfile, else its devcontainer.json', {});
  // The server's choices when the repository has several devcontainer definitions.
  const choices = h('fieldset', { testid: 'create-repo-choices', hidden: true });
  const dcPart = h('fieldset', { hidden: true, disabled: true }, h('legend', {}, 'devcontainer.json'), h('label', { for: 'c-devcontainer' }, 'Paste a devcontainer.json', devcontainer), h('label', { for: 'c-upload-c' }, 'or upload one', uploadC));
  const repoPart = h('fieldset', { hidden: true, disabled: true }, h('legend', {}, 'Repository'), repoURL.part, repoRef.part, repoPath.part, choices);
  const fields = { 'repository.url': repoURL, repository: repoURL, 'repository.ref': repoRef, 'repository.devcontainer_path': repoPath };
  const errors = h('div', { class: 'error', role: 'alert', testid: 'create-error' });
  const tmplPart = h('fieldset', {}, h('legend', {}, 'Template'), h('label', { for: 'c-template' }, 'Template', tmplSel),
    h('label', { for: 'c-preset' }, 'Preset', h('span', { class: 'hint' }, 'sets the parameters; a prebuilt workspace is claimed when one is ready'), presetSel), params);
  const agentPart = h('label', { for: 'c-agent' }, 'Agent', h('span', { class: 'hint' }, 'the cluster of a Kubernetes workspace'), agentSel);
  const devPart = h('fieldset', { hidden: true, disabled: true }, h('legend', {}, 'Devfile'), h('label', { for: 'c-devfile' }, 'Paste a devfile', devfile), h('label', { for: 'c-upload' }, 'or upload one', upload));
  form.append(h('label', { for: 'c-name' }, 'Name', h('span', { class: 'hint' }, 'lower-case letters, digits and dashes'), nameIn),
    h('fieldset', {}, h('legend', {}, 'From'), h('label', { class: 'radio', for: 'c-src-t' }, srcT, 'a template'), h('label', { class: 'radio', for: 'c-src-d' }, srcD, 'a devfile'),
      h('label', { class: 'radio', for: 'c-src-c' }, srcC, 'a devcontainer.json'), h('label', { class: 'radio', for: 'c-src-r' }, srcR, 'a repository')),
    tmplPart, devPart, dcPart, repoPart, agentPart,
    errors, h('div', {}, h('button', { type: 'submit', class: 'primary', testid: 'create-submit' }, 'Create workspace')));
  fill(main, h('h1', {}, 'New workspace'), form);

  const source = () => (srcD.checked ? 'devfile' : srcC.checked ? 'devcontainer' : srcR.checked ? 'repository' : 'template');
  // The agent matters to Kubernetes workspaces only: a devfile's, a devcontainer.json's, a
  // repository's, or a Kubernetes template's.
  // A hidden part is also disabled: its fields (a required parameter, a URL the browser refuses)
  // then take no part in the form's validation, which could not show them.
  const showSource = () => {
    for (const [part, src] of [[tmplPart, 'template'], [devPart, 'devfile'], [dcPart, 'devcontainer'], [repoPart, 'repository']]) {
      part.hidden = source() !== src;
      part.disabled = part.hidden;
    }
    const t = templates.find((x) => x.name === tmplSel.value);
    agentPart.hidden = source() === 'template' && !(t && t.kind === 'kubernetes');
  };
  srcT.addEventListener('change', showSource);
  srcD.addEventListener('change', showSource);
  srcC.addEventListener('change', showSource);
  srcR.addEventListener('change', showSource);
  uploadC.addEventListener('change', async () => { if (uploadC.files[0]) devcontainer.value = await uploadC.files[0].text(); });
  // offerChoices shows the definitions the server found as radio buttons; picking one fills the
  // path, and the form is sent again with it.
  function offerChoices(paths) {
    fill(choices, h('legend', {}, 'The repository has several definitions: choose one'),
      paths.map((p, i) => {
        const id = 'c-repo-choice-' + i;
        const r = h('input', { type: 'radio', name: 'devcontainer-choice', id, value: p, testid: 'create-repo-choice', 'data-path': p, checked: repoPath.input.value === p });
        r.addEventListener('change', () => { repoPath.input.value = p; });
        return h('label', { class: 'radio', for: id }, r, h('code', {}, p));
      }));
    choices.hidden = false;
    const first = choices.querySelector('input');
    if (first) first.focus();
  }
  // Another repository: the definitions found in the last one no longer apply.
  repoURL.input.addEventListener('input', () => { choices.hidden = true; clear(choices); });
  repoPath.input.addEventListener('input', () => {
    for (const r of choices.querySelectorAll('input')) r.checked = r.value === repoPath.input.value;
  });
  upload.addEventListener('change', async () => { if (upload.files[0]) devfile.value = await upload.files[0].text(); });

  let templates = [];
  let presets = [];
  const inputs = new Map();
  // loadTemplate shows the chosen template's parameters and presets; only the latest choice's
  // answers are shown, whatever order they come back in.
  let loading = 0;
  async function loadTemplate() {
    const seq = ++loading;
    const name = tmplSel.value;
    const fields = [];
    const found = new Map();
    let options = [];
    if (name) {
      try {
        const t = await get('/api/v1/templates/' + enc(name));
        const active = (t.versions || []).find((v) => v.active) || (t.versions || [])[0];
        for (const p of (active && active.parameters) || []) {
          const id = 'c-p-' + p.name;
          const type = p.sensitive ? 'password' : p.type === 'number' ? 'number' : 'text';
          let input;
          if (p.type === 'bool') input = h('select', { id, testid: 'param-' + p.name }, h('option', { value: 'true' }, 'true'), h('option', { value: 'false' }, 'false'));
          else input = h('input', { id, type, testid: 'param-' + p.name, required: p.required, autocomplete: p.sensitive ? 'new-password' : 'off', placeholder: p.sensitive ? '' : p.default || '' });
          if (p.type === 'bool') input.value = p.default || 'false';
          found.set(p.name, input);
          fields.push(h('label', { for: id }, p.name + (p.required ? ' (required)' : ''),
            h('span', { class: 'hint' }, [p.type, p.description, p.default ? 'default ' + (p.sensitive ? '••••' : p.default) : ''].filter(Boolean).join(' · ')), input));
        }
        try { options = listOf(await get('/api/v1/templates/' + enc(name) + '/presets'), 'presets'); } catch { options = []; }
      } catch (e) { fields.push(h('p', { class: 'error' }, e.message)); }
    }
    if (seq !== loading) return; // a later choice is being shown
    presets = options;
    inputs.clear();
    for (const [k, v] of found) inputs.set(k, v);
    fill(params, fields);
    fill(presetSel, h('option', { value: '' }, 'none'), presets.map((p) => h('option', { value: p.name, title: p.pool && p.pool.failures ? p.pool.last_error : '' },
      p.name + (p.pool && p.pool.ready ? ' (' + p.pool.ready + ' ready)' : '') +
      (p.pool && p.pool.failures ? ' (failing: ' + p.pool.failures + ' prebuild creates failed in a row; last: ' + (p.pool.last_error || '').split('\n')[0] + ')' : ''))));
  }
  // A preset sets the parameters (the API takes a preset or parameters, not both): its values are
  // shown, and the fields are locked while it is chosen.
  presetSel.addEventListener('change', () => {
    const p = presets.find((x) => x.name === presetSel.value);
    for (const [k, i] of inputs) {
      i.disabled = !!p;
      if (p) i.value = (p.parameters || {})[k] || '';
    }
  });
  tmplSel.addEventListener('change', () => { showSource(); loadTemplate(); });
  Promise.all([get('/api/v1/templates').catch(() => []), get('/api/v1/agents').catch(() => [])]).then(([ts, as]) => {
    templates = ts || [];
    fill(tmplSel, h('option', { value: '' }, templates.length ? 'choose…' : 'no template yet'), templates.map((t) => h('option', { value: t.name }, t.name + ' (' + t.kind + ')')));
    for (const a of as || []) agentSel.append(h('option', { value: a.name }, a.name));
    if (!templates.length && srcT.checked) srcD.checked = true; // unless the user chose already
    showSource();
  });

  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    clear(errors);
    for (const f of Object.values(fields)) { f.out.hidden = true; f.input.removeAttribute('aria-invalid'); }
    if (!form.reportValidity()) return;
    const body = { name: nameIn.value.trim() };
    if (agentSel.value && !agentPart.hidden) body.agent = agentSel.value;
    if (source() === 'repository') {
      body.repository = { url: repoURL.input.value.trim() };
      if (repoRef.input.value.trim()) body.repository.ref = repoRef.input.value.trim();
      if (repoPath.input.value.trim()) body.repository.devcontainer_path = repoPath.input.value.trim();
    } else if (source() === 'devcontainer') {
      body.devcontainer = devcontainer.value;
      if (!body.devcontainer.trim()) { errors.textContent = 'devcontainer: paste or upload one'; devcontainer.focus(); return; }
    } else if (source() === 'devfile') {
      body.devfile = devfile.value;
      if (!body.devfile.trim()) { errors.textContent = 'devfile: paste or upload one'; devfile.focus(); return; }
    } else {
      if (!tmplSel.value) { errors.textContent = 'template: choose one'; tmplSel.focus(); return; }
      body.template = tmplSel.value;
      if (presetSel.value) body.preset = presetSel.value;
      else {
        const values = {};
        for (const [k, i] of inputs) if (i.value !== '') values[k] = i.value;
        if (Object.keys(values).length) body.parameters = values;
      }
    }
    const btn = form.querySelector('[type=submit]');
    btn.disabled = true;
    try {
      const w = await api('POST', '/api/v1/workspaces', body);
      live.byId.set(w.id, w);
      created.set(w.id, w);
      toast('Created ' + w.name + ((w.warnings || []).length ? ' (with warnings)' : ''));
      nav('/ui/w/' + enc(w.owner) + '/' + enc(w.name));
    } catch (err) {
      if (source() === 'repository' && err.status === 409) {
        // The forge needs the user's account (or refused it): say so, with the way to link it.
        fill(errors, h('div', {}, err.message), h('div', {}, h('a', { href: '/ui/forges', 'data-link': true, testid: 'create-link-forge' }, 'Link your account on the Forges page'), ', then create the workspace again.'));
      } else if (source() === 'repository') {
        fieldErrors(err, fields, errors);
        const v = ((err.body && err.body.validations) || []).find((x) => x.field === 'repository.devcontainer_path' && (x.choices || []).length);
        if (v) offerChoices(v.choices);
      } else {
        errors.textContent = err.message;
      }
    } finally { btn.disabled = false; }
  });
  nameIn.focus();
  return () => {};
}
