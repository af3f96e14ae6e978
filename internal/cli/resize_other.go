//go:build !unix

package cli

import (
	"time"

	"golang.org/x/term"
)

// resizePoll is how often the terminal's size is read where no signal announces a change.
const resizePoll = 500 * time.Millisecond

// notifyResize sends on the channel when the terminal's size changed. Windows has no SIGWINCH:
// the size is read every resizePoll. stop ends it and closes the channel.
func notifyResize(fd int) (<-chan struct{}, func()) {
	out := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(out)
		w, h, _ := term.GetSize(fd)
		tick := time.NewTicker(resizePoll)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				if cw, ch, err := term.GetSize(fd); err == nil && (cw != w || ch != h) {
					w, h = cw, ch
					select {
					case out <- struct{}{}:
					default:
					}
				}
			case <-done:
				return
			}
		}
	}()
	return out, func() { close(done) }
}
