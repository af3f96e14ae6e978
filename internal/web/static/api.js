// The API as the browser calls it: the session cookie authenticates (same origin), and every
// unsafe request carries the X-Hangar-CSRF header the server requires of cookie requests.

export class ApiError extends Error {
  constructor(status, body) {
    const v = (body && body.validations) || [];
    let msg = (body && body.message) || ('HTTP ' + status);
    if (body && body.detail) msg += ': ' + body.detail;
    super(v.length ? msg + ': ' + v.map((x) => x.field + ' ' + x.detail).join('; ') : msg);
    this.status = status;
    this.body = body;
  }
}

export async function api(method, path, body) {
  const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
  if (method !== 'GET' && method !== 'HEAD') init.headers['X-Hangar-CSRF'] = '1';
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  if (resp.status === 401) {
    location.assign('/signin?return_to=' + encodeURIComponent(location.pathname + location.search));
    throw new ApiError(401, { message: 'signed out' });
  }
  const text = await resp.text();
  let data = null;
  if (text) { try { data = JSON.parse(text); } catch { data = { message: text }; } }
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

export const get = (p) => api('GET', p);
export const enc = encodeURIComponent;

// ndjson reads a streamed newline-delimited JSON answer (build logs with follow=true), calling
// onItem for each object, until it ends or signal aborts.
export async function ndjson(path, onItem, signal) {
  const resp = await fetch(path, { credentials: 'same-origin', signal });
  if (!resp.ok) {
    let body = null;
    try { body = await resp.json(); } catch { /* not JSON */ }
    throw new ApiError(resp.status, body);
  }
  const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).trim();
      buf = buf.slice(i + 1);
      if (line) onItem(JSON.parse(line));
    }
  }
}
