package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// The browser terminal (docs/decisions.md, "Inside the workspace: the terminal in the browser"):
// the workspace page opens a WebSocket to TerminalPath with TerminalSubprotocol; the server opens a
// shell with a terminal in the workspace (through the access proxy's SSH, or a Terraform
// workspace's helper) and relays it. The frames:
//
//   - binary, both ways: the terminal's bytes (keys typed; the shell's output), at most
//     MaxTerminalDataBytes each;
//   - text, browser to server: a TerminalControl (JSON), at most MaxTerminalControlBytes: a
//     resize (the PTY's window-change);
//   - text, server to browser: a TerminalEvent (JSON), the last frame: the shell exited, the
//     server ended the session (access ended) or could not reach the workspace, and says why.
//
// A frame over its bound, or a control that does not decode, ends the connection (close code
// 1009 or 1007): the browser's own page never sends one.
const (
	// TerminalPath is the endpoint (GET, a WebSocket): fmt.Sprintf(TerminalPath, escaped ref).
	TerminalPath = "/api/v1/workspaces/%s/terminal"
	// TerminalSubprotocol is the WebSocket subprotocol; its version is bumped when the frames
	// change.
	TerminalSubprotocol = "hangar-terminal.v1"
	// MaxTerminalDataBytes bounds a data frame: a paste is cut into frames of this size by the
	// page; the server reads output in pieces of at most this.
	MaxTerminalDataBytes = 32 << 10
	// MaxTerminalControlBytes bounds a control frame.
	MaxTerminalControlBytes = 256
	// MaxTerminalCols and MaxTerminalRows bound a resize: a screen of 8K pixels at a 4-pixel-wide
	// font is 2,000 columns; more is a mistake.
	MaxTerminalCols = 2000
	MaxTerminalRows = 1000
)

// The types of a TerminalControl and a TerminalEvent.
const (
	TerminalResize = "resize"
	// TerminalExit: the shell ended (Code is its exit status).
	TerminalExit = "exit"
	// TerminalEnded: the server ended the session (Message says why: the credential was revoked,
	// the workspace stopped, ...).
	TerminalEnded = "ended"
	// TerminalUnavailable: the workspace cannot be reached now (its helper is not connected, it is
	// stopped, the proxy cannot be reached, the server is stopping); Message says what. The page
	// tries again.
	TerminalUnavailable = "unavailable"
)

// TerminalControl is a text frame the browser sends.
type TerminalControl struct {
	Type string `json:"type"`
	Cols int    `json:"cols"`
	Rows int    `json:"rows"`
}

// TerminalEvent is a text frame the server sends.
type TerminalEvent struct {
	Type    string `json:"type"`
	Code    int    `json:"code,omitempty"`
	Message string `json:"message,omitempty"`
}

// DecodeTerminalControl reads a control frame: one JSON object, of a known type, its fields in
// bounds; an error names the field.
func DecodeTerminalControl(b []byte) (TerminalControl, error) {
	if len(b) > MaxTerminalControlBytes {
		return TerminalControl{}, fmt.Errorf("control frame: %d bytes, at most %d", len(b), MaxTerminalControlBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c TerminalControl
	if err := dec.Decode(&c); err != nil {
		return TerminalControl{}, fmt.Errorf("control frame: %w", err)
	}
	if dec.More() {
		return TerminalControl{}, fmt.Errorf("control frame: one JSON object, then nothing")
	}
	switch c.Type {
	case TerminalResize:
		if c.Cols < 1 || c.Cols > MaxTerminalCols {
			return TerminalControl{}, fmt.Errorf("control frame: cols must be from 1 to %d, got %d", MaxTerminalCols, c.Cols)
		}
		if c.Rows < 1 || c.Rows > MaxTerminalRows {
			return TerminalControl{}, fmt.Errorf("control frame: rows must be from 1 to %d, got %d", MaxTerminalRows, c.Rows)
		}
	default:
		return TerminalControl{}, fmt.Errorf("control frame: type must be %q, got %q", TerminalResize, c.Type)
	}
	return c, nil
}
