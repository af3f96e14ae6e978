// Small DOM helpers: elements are built with h(), never from HTML strings, so nothing a server
// or user wrote is ever parsed as markup.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className = v;
    else if (k === 'testid') el.dataset.testid = v;
    else if (k in el && typeof v !== 'string') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

export function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) { el.replaceChildren(); return el; }

// fill replaces el's children (null, false and nested arrays allowed, as in h()).
export function fill(el, ...children) { el.replaceChildren(); return append(el, children); }

// fmtBytes shows a size in binary units with one decimal, as the CLI does: "512 B", "2.0 GiB".
export function fmtBytes(n) {
  if (n < 1024) return n + ' B';
  let f = n / 1024;
  let unit = 'KiB';
  for (const u of ['MiB', 'GiB', 'TiB', 'PiB']) {
    if (f < 1024) break;
    f /= 1024;
    unit = u;
  }
  return f.toFixed(1) + ' ' + unit;
}

// fmtDuration shows milliseconds as "4s", "1m 20s" or "1h 2m".
export function fmtDuration(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
  return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
}

export function fmtTime(s) {
  if (!s) return '';
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleString();
}

// fieldErrors shows each validation of err next to its field (fields: name → {input, out}); what
// names no field goes to general. It answers whether any was shown next to a field.
export function fieldErrors(err, fields, general) {
  const v = (err.body && err.body.validations) || [];
  let placed = false;
  for (const x of v) {
    const f = fields[x.field];
    if (!f) continue;
    f.out.textContent = x.field + ' ' + x.detail;
    f.out.hidden = false;
    f.input.setAttribute('aria-invalid', 'true');
    if (!placed) f.input.focus();
    placed = true;
  }
  const rest = v.filter((x) => !fields[x.field]);
  if (!placed || rest.length) general.textContent = rest.length ? rest.map((x) => x.field + ' ' + x.detail).join('; ') : err.message;
  return placed;
}

let toastTimer;
export function toast(msg) {
  const t = document.getElementById('toast');
  t.textContent = msg;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { t.textContent = ''; }, 5000);
}

// confirmDialog shows the confirmation dialog (its buttons say action and dismiss); resolves true
// when the user confirms. The answer is taken from the form's submit (which button) and the
// dialog's cancel (Escape), both dispatched at once, not from its close event: that one is queued,
// and Chromium may run a click that opens the dialog again before it, which would then answer the
// new opening with the old one's choice (a confirmed action not taken: seen in a test).
let settle = null; // the open dialog's resolver
export function confirmDialog(title, text, action, dismiss) {
  const d = document.getElementById('confirm');
  if (!d.dataset.wired) {
    d.dataset.wired = 'true';
    const answer = (ok) => { const s = settle; settle = null; if (s) s(ok); };
    d.querySelector('form').addEventListener('submit', (e) => answer(!!e.submitter && e.submitter.value === 'ok'));
    d.addEventListener('cancel', () => answer(false));
    d.addEventListener('close', () => { if (!d.open) answer(false); }); // closed some other way
  }
  if (settle) { settle(false); settle = null; }
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-ok').textContent = action || 'Confirm';
  d.querySelector('[value=cancel]').textContent = dismiss || 'Cancel';
  return new Promise((resolve) => {
    settle = resolve;
    if (!d.open) d.showModal();
    d.querySelector('[value=cancel]').focus();
  });
}

export function stateChip(state, testid) {
  return h('span', { class: 'state state-' + (state || ''), testid }, state || '');
}
