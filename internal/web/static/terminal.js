// The workspace page's terminal (docs/decisions.md, "Inside the workspace: the terminal in the
// browser"): xterm.js, vendored under vendor/xterm and loaded only when a terminal is opened, on a
// WebSocket to /api/v1/workspaces/{ref}/terminal (subprotocol hangar-terminal.v1): binary frames
// are the terminal's bytes both ways, the page's text frames resize the PTY, the server's last
// text frame says how the session ended. A socket that drops, or a workspace that cannot be
// reached, is tried again with a growing wait, and the terminal says so; an exit, or access that
// ended (a revoked token, a signed-out session), is final.
import { get } from './api.js';

const SUBPROTOCOL = 'hangar-terminal.v1';
const MAX_FRAME = 32 << 10; // protocol.MaxTerminalDataBytes
const RETRIES = 6; // then the reader chooses (1 + 2 + 4 + 8 + 15 + 15 s of waiting)

// vendor is where the vendored files are: beside this module, under the same assets version.
const vendor = import.meta.url.replace(/[^/]*$/, '') + 'vendor/xterm/';

let loading = null;
// loadXterm loads xterm.js, its fit add-on and its stylesheet once, from this server.
function loadXterm() {
  if (!loading) {
    const css = document.createElement('link');
    css.rel = 'stylesheet';
    css.href = vendor + 'xterm.css';
    document.head.append(css);
    // UMD bundles: run as modules, they set globalThis.Terminal, self.FitAddon and self.CanvasAddon.
    loading = import(vendor + 'xterm.js')
      .then(() => Promise.all([import(vendor + 'addon-fit.js'), import(vendor + 'addon-canvas.js')]))
      .then(() => ({ Terminal: globalThis.Terminal, FitAddon: globalThis.FitAddon.FitAddon, CanvasAddon: globalThis.CanvasAddon.CanvasAddon }));
    loading.catch(() => { loading = null; });
  }
  return loading;
}

function note(term, text) { term.write('\r\n\x1b[1;33m[hangar] ' + text + '\x1b[0m\r\n'); }

// openTerminal runs a terminal in box for the workspace at path (its API path), telling its state
// in status(text, final). It returns a function that closes it.
export async function openTerminal(box, path, status) {
  const { Terminal, FitAddon, CanvasAddon } = await loadXterm();
  const term = new Terminal({ cursorBlink: true, fontSize: 14, scrollback: 5000, convertEol: false });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(box);
  // The canvas renderer: the DOM renderer styles its text with <style> elements, which the page's
  // CSP (style-src 'self') refuses, leaving it without its colours and line height.
  term.loadAddon(new CanvasAddon());
  fit.fit();
  box.terminal = term; // read by the browser tests (the screen's text: term.buffer)
  const enc = new TextEncoder();
  let ws = null;
  let closed = false; // by the page: nothing more is tried
  let retries = 0;
  let timer = null;

  const sendBytes = (bytes) => {
    if (!ws || ws.readyState !== WebSocket.OPEN) return;
    for (let i = 0; i < bytes.length; i += MAX_FRAME) ws.send(bytes.subarray(i, i + MAX_FRAME));
  };
  term.onData((d) => sendBytes(enc.encode(d)));
  term.onBinary((d) => sendBytes(Uint8Array.from(d, (c) => c.charCodeAt(0) & 0xff)));
  term.onResize(({ cols, rows }) => {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify({ type: 'resize', cols, rows }));
  });
  const ro = new ResizeObserver(() => { try { fit.fit(); } catch { /* hidden */ } });
  ro.observe(box);

  function connect(again) {
    const url = (location.protocol === 'https:' ? 'wss://' : 'ws://') + location.host + path + '/terminal?cols=' + term.cols + '&rows=' + term.rows;
    const sock = new WebSocket(url, SUBPROTOCOL);
    sock.binaryType = 'arraybuffer';
    ws = sock;
    let opened = false;
    let last = null; // the server's last event
    sock.onopen = () => {
      opened = true;
      status(again ? 'Reconnected: a new session.' : 'Connected.', false);
      if (again) note(term, 'reconnected: this is a new session (what ran in the old one goes on only if it was detached, e.g. in tmux)');
      term.focus();
    };
    sock.onmessage = (e) => {
      if (typeof e.data === 'string') {
        try { last = JSON.parse(e.data); } catch { last = null; }
        if (last && last.type === 'unavailable' && opened) opened = false; // nothing ran: not a session
        return;
      }
      retries = 0;
      term.write(new Uint8Array(e.data));
    };
    sock.onclose = async () => {
      if (closed || ws !== sock) return;
      if (last && last.type === 'exit') {
        const text = 'The shell exited' + (last.code ? ' with status ' + last.code : '') + '.';
        note(term, text);
        status(text, true);
        return;
      }
      if (last && last.type === 'ended') {
        note(term, last.message);
        status(last.message, true);
        return;
      }
      let why = last && last.message ? last.message : opened ? 'The connection was lost.' : 'Cannot connect.';
      if (!last && !opened) {
        // The upgrade was refused: the API says why (a session that ended, a workspace gone).
        try { await get(path); } catch (err) {
          if (err.status === 401 || err.status === 403 || err.status === 404) {
            note(term, err.message);
            status(err.message, true);
            return;
          }
        }
      }
      if (retries >= RETRIES) {
        note(term, why + ' Gave up reconnecting.');
        status(why + ' Gave up reconnecting.', true);
        return;
      }
      const wait = Math.min(15, 2 ** retries);
      retries++;
      note(term, why + ' Reconnecting in ' + wait + ' s…');
      status(why + ' Reconnecting…', false);
      timer = setTimeout(() => connect(true), wait * 1000);
    };
  }
  connect(false);
  return () => {
    closed = true;
    clearTimeout(timer);
    ro.disconnect();
    if (ws) ws.close(1000);
    term.dispose();
  };
}
