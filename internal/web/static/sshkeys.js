// Every user's SSH keys (hangar ssh-keys add/list/remove): the public keys with which plain ssh,
// VS Code and JetBrains reach the user's Kubernetes workspaces through the access proxy.
import { h, fill, fmtTime, toast, confirmDialog, fieldErrors } from './dom.js';
import { api, get, enc } from './api.js';

export const keyType = (k) => (k.public_key || '').split(' ')[0];

export async function sshKeysPage(main, me) {
  let keys;
  try { keys = (await get('/api/v1/users/me/ssh-keys')).ssh_keys || []; } catch (e) {
    fill(main, h('h1', {}, 'SSH keys'), h('p', { class: 'error', role: 'alert' }, e.message));
    return;
  }
  const reload = () => sshKeysPage(main, me);
  const errOf = (id) => h('p', { class: 'error field-error', id, testid: id, hidden: true });
  const keyErr = errOf('key-public_key-error');
  const nameErr = errOf('key-name-error');
  const general = h('p', { class: 'error', role: 'alert', testid: 'key-error' });
  const keyIn = h('textarea', { id: 'key-public', class: 'short', name: 'public_key', rows: 4, required: true, spellcheck: 'false', autocomplete: 'off',
    placeholder: 'ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAA... you@laptop', 'aria-describedby': 'key-public-hint key-public_key-error', testid: 'key-public' });
  const nameIn = h('input', { id: 'key-name', name: 'name', autocomplete: 'off', maxlength: 64, 'aria-describedby': 'key-name-hint key-name-error', testid: 'key-name' });
  const file = h('input', { type: 'file', id: 'key-file', accept: '.pub,text/plain', testid: 'key-file' });
  file.addEventListener('change', async () => { if (file.files[0]) keyIn.value = await file.files[0].text(); });
  const fields = { public_key: { input: keyIn, out: keyErr }, name: { input: nameIn, out: nameErr } };
  const reset = () => {
    general.textContent = '';
    for (const f of Object.values(fields)) { f.out.textContent = ''; f.out.hidden = true; f.input.removeAttribute('aria-invalid'); }
  };
  const form = h('form', { class: 'stack', testid: 'key-add', novalidate: true },
    h('label', { for: 'key-public' }, 'Public key',
      h('span', { class: 'hint', id: 'key-public-hint' }, 'one key in authorized_keys form: the content of a .pub file, such as ~/.ssh/id_ed25519.pub (never the private key beside it)'),
      keyIn),
    keyErr,
    h('label', { for: 'key-file' }, 'Or read it from a file', file),
    h('label', { for: 'key-name' }, 'Name', h('span', { class: 'hint', id: 'key-name-hint' }, 'optional; by default the key\u2019s comment, else its type'), nameIn),
    nameErr,
    h('div', {}, h('button', { type: 'submit', class: 'primary', testid: 'key-submit' }, 'Add key')),
    general);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    reset();
    if (keyIn.value.includes('PRIVATE KEY')) {
      // Refused here, as the command line does, so that the secret never leaves the machine.
      fieldErrors({ body: { validations: [{ field: 'public_key', detail: 'is a private key: never share it; give the public key, the .pub file beside it' }] } }, fields, general);
      return;
    }
    const btn = form.querySelector('[type=submit]');
    btn.disabled = true;
    try {
      const k = await api('POST', '/api/v1/users/me/ssh-keys', { name: nameIn.value.trim() || undefined, public_key: keyIn.value });
      toast('Added SSH key ' + k.name + ' (' + k.fingerprint + ')');
      reload();
    } catch (err) {
      fieldErrors(err, fields, general);
      btn.disabled = false;
    }
  });

  const remove = async (k) => {
    if (!(await confirmDialog('Remove ' + k.name + '?', 'The workspace proxy refuses this key from now on (' + k.fingerprint + ').', 'Remove'))) return;
    try { await api('DELETE', '/api/v1/users/me/ssh-keys/' + enc(k.id)); toast('Removed SSH key ' + k.name); reload(); } catch (e) { toast('Remove failed: ' + e.message); }
  };
  const list = keys.length
    ? h('table', { testid: 'keys-table' }, h('caption', { class: 'muted caption' }, 'Your keys, oldest first'),
      h('thead', {}, h('tr', {}, ['Name', 'Type', 'Fingerprint', 'Added', ''].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', {}, keys.map((k) => h('tr', { testid: 'key-row', 'data-name': k.name, 'data-fingerprint': k.fingerprint },
        h('td', { testid: 'key-name-cell' }, k.name), h('td', {}, keyType(k)), h('td', { class: 'mono', testid: 'key-fingerprint' }, k.fingerprint),
        h('td', {}, fmtTime(k.created_at)),
        h('td', {}, h('button', { class: 'danger', testid: 'key-remove', 'aria-label': 'Remove ' + k.name, onclick: () => remove(k) }, 'Remove'))))))
    : h('p', { class: 'muted', testid: 'keys-empty' }, 'No SSH keys yet.');
  fill(main, h('h1', {}, 'SSH keys'),
    h('p', { class: 'muted' }, 'Plain ssh, scp, VS Code and JetBrains reach your Kubernetes workspaces through the workspace proxy with one of these keys (after ',
      h('code', {}, 'hangar config-ssh'), '). ', h('code', {}, 'hangar ssh'), ' and Terraform workspaces use your token instead. A key belongs to one user.'),
    list, h('h2', {}, 'Add a key'), form);
}
