package browser

import (
	"fmt"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// The web UI's terminal (xterm.js): box is the CSS selector of the element the terminal is open
// in, which holds it as its terminal property (internal/web/static/terminal.js).

func terminalJS(box, body string) string {
	return fmt.Sprintf(`(() => { const t = document.querySelector(%q).terminal; if (!t) return ''; %s })()`, box, body)
}

// terminalText is the terminal's text: its lines, what scrolled off included.
func terminalText(box string) string {
	return terminalJS(box, `const b = t.buffer.active, lines = [];
		for (let i = 0; i < b.length; i++) lines.push(b.getLine(i).translateToString(true));
		return lines.join('\n');`)
}

// TerminalText is what the terminal in box shows, one line per row (trailing blanks trimmed).
func (b *Tab) TerminalText(box string) string {
	b.t.Helper()
	var s string
	b.Run("read the terminal", chromedp.Evaluate(terminalText(box), &s))
	return s
}

// WaitTerminal waits until the terminal in box shows want (lines joined with \n).
func (b *Tab) WaitTerminal(box, want string) {
	b.t.Helper()
	b.Run(fmt.Sprintf("the terminal shows %q", want),
		chromedp.Poll(fmt.Sprintf(`%s.includes(%q)`, terminalText(box), want), nil, chromedp.WithPollingTimeout(StepTimeout)))
}

// WaitTerminalPrompt waits until the terminal in box shows anything (the shell's prompt).
func (b *Tab) WaitTerminalPrompt(box string) {
	b.t.Helper()
	b.Run("the shell's prompt", chromedp.Poll(terminalText(box)+`.trim() !== ''`, nil, chromedp.WithPollingTimeout(StepTimeout)))
}

// TypeInTerminal types line into the terminal in box and presses Enter: the text as the browser's
// input (Input.insertText), Enter as a key down and up. (chromedp's SendKeys adds a character
// event to each key down, which xterm.js takes as a second key press.)
func (b *Tab) TypeInTerminal(box, line string) {
	b.t.Helper()
	enter := func(typ input.KeyType) chromedp.Action {
		return input.DispatchKeyEvent(typ).WithKey("Enter").WithCode("Enter").WithWindowsVirtualKeyCode(13).WithNativeVirtualKeyCode(13)
	}
	b.Run("type "+line, chromedp.Focus(box+` textarea`, chromedp.ByQuery), input.InsertText(line), enter(input.KeyRawDown), enter(input.KeyUp))
}

// TerminalSize is the terminal's rows and columns as the page has them.
func (b *Tab) TerminalSize(box string) (rows, cols int) {
	b.t.Helper()
	var v struct{ Rows, Cols int }
	b.Run("the terminal's size", chromedp.Evaluate(terminalJS(box, `return { rows: t.rows, cols: t.cols };`), &v))
	return v.Rows, v.Cols
}
