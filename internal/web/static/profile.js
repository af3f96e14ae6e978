// The user's profile (hangar profile, hangar profile set): the name and email of their commits in
// their workspaces, and the dotfiles repository each workspace installs at its first start.
import { h, fill, toast, fieldErrors } from './dom.js';
import { api, get } from './api.js';

export async function profilePage(main) {
  let me;
  try { me = await get('/api/v1/users/me'); } catch (e) {
    fill(main, h('h1', {}, 'Profile'), h('p', { class: 'error', role: 'alert' }, e.message));
    return;
  }
  const reload = () => profilePage(main);
  const general = h('p', { class: 'error', role: 'alert', testid: 'profile-error' });
  const fields = {};
  const field = (name, label, hint, attrs) => {
    const id = 'profile-' + name;
    const input = h('input', Object.assign({ id, name, autocomplete: 'off', 'aria-describedby': id + '-hint ' + id + '-error', testid: id }, attrs));
    input.value = me[name] || '';
    const out = h('p', { class: 'error field-error', id: id + '-error', testid: id + '-error', hidden: true });
    fields[name] = { input, out };
    return [h('label', { for: id }, label, h('span', { class: 'hint', id: id + '-hint' }, hint), input), out];
  };
  const form = h('form', { class: 'stack', testid: 'profile-form', novalidate: true },
    ...field('full_name', 'Full name', 'the name of your commits in your workspaces (GIT_AUTHOR_NAME); empty: your username, ' + me.username, { maxlength: 256, autocomplete: 'name' }),
    ...field('email', 'Email', 'the email of your commits (GIT_AUTHOR_EMAIL); empty: none', { type: 'email', maxlength: 320, autocomplete: 'email' }),
    ...field('dotfiles_repo', 'Dotfiles repository', 'an https://, http:// or ssh:// git URL, or git@host:path, with an optional #branch, tag or commit: cloned into ~/.dotfiles with your forge credentials and installed at each workspace\u2019s first start', { maxlength: 1024, spellcheck: 'false' }),
    h('div', {}, h('button', { type: 'submit', class: 'primary', testid: 'profile-submit' }, 'Save')),
    general);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    general.textContent = '';
    for (const f of Object.values(fields)) { f.out.textContent = ''; f.out.hidden = true; f.input.removeAttribute('aria-invalid'); }
    const body = {};
    for (const [name, f] of Object.entries(fields)) {
      const v = f.input.value.trim();
      if (v !== (me[name] || '')) body[name] = v;
    }
    if (!Object.keys(body).length) { toast('Nothing changed'); return; }
    const btn = form.querySelector('[type=submit]');
    btn.disabled = true;
    try {
      await api('PATCH', '/api/v1/users/me', body);
      toast('Profile saved: your workspaces get it at their next start');
      reload();
    } catch (err) {
      fieldErrors(err, fields, general);
      btn.disabled = false;
    }
  });
  fill(main, h('h1', {}, 'Profile'),
    h('p', { class: 'muted' }, 'Your git identity and dotfiles in your workspaces. With sign-in through your organization\u2019s provider, the name and email come from it at each sign-in unless you set them here; cleared, they come from it again.'),
    form);
}
