//go:build unix

package cli

import (
	"os"
	"os/signal"
	"syscall"
)

// notifyResize sends on the channel when the terminal's size may have changed (SIGWINCH); stop
// ends it and closes the channel.
func notifyResize(int) (<-chan struct{}, func()) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	out := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(out)
		for {
			select {
			case <-winch:
				select {
				case out <- struct{}{}:
				default:
				}
			case <-done:
				return
			}
		}
	}()
	return out, func() { signal.Stop(winch); close(done) }
}
