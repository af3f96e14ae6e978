package web

import (
	"crypto/sha256"
	"encoding/base64"
)

// PageStyle is the look of the pages the server and the access proxy render themselves — sign-in,
// sign-out and error pages, an app's "not answering" page — taken from the UI's stylesheet
// (static/style.css: its colours, font, top bar, form fields and buttons). It is inline, not a link
// to the UI's stylesheet, because an app's page is on the workspace's origin, where that
// stylesheet is not (and a proxy may be of another version than the server); the pages' CSP allows
// it by its hash (PageStyleSource) and nothing else.
const PageStyle = `:root{--fg:#1b1f24;--muted:#4a5360;--line:#d0d7de;--accent:#0b5cad;--bad:#a40e26;color-scheme:light}` +
	`*{box-sizing:border-box}` +
	`body{margin:0;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:var(--fg);background:#fff}` +
	`a{color:var(--accent)}` +
	`code{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,monospace;font-size:13px}` +
	`.top{display:flex;align-items:center;gap:12px 20px;padding:10px 20px;border-bottom:1px solid var(--line);background:#f6f8fa}` +
	`.brand{font-weight:700;font-size:18px;color:var(--fg);text-decoration:none}` +
	`main{padding:16px 20px 60px;max-width:44em}` +
	`h1{font-size:22px;margin:8px 0 14px}` +
	`form{display:grid;gap:12px;margin:0 0 12px;max-width:30em}` +
	`label{display:grid;gap:3px;font-weight:600}` +
	`input{font:inherit;padding:5px 8px;border:1px solid #8c959f;border-radius:6px;background:#fff;color:var(--fg)}` +
	`button,#oidc-signin{font:inherit;display:inline-block;justify-self:start;padding:5px 12px;border:1px solid #8c959f;border-radius:6px;background:#f6f8fa;color:var(--fg);cursor:pointer;text-decoration:none}` +
	`button.primary{background:#0b5cad;color:#fff;border-color:#0b5cad}` +
	`.error{color:var(--bad)}.muted{color:var(--muted)}.back{margin-top:24px}`

// PageStyleSource is PageStyle's Content-Security-Policy source ('sha256-…').
var PageStyleSource = func() string {
	h := sha256.Sum256([]byte(PageStyle))
	return "'sha256-" + base64.StdEncoding.EncodeToString(h[:]) + "'"
}()
