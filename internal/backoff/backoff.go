// Package backoff computes how long to wait before retrying: capped exponential growth with jitter,
// so that clients that failed together (a server restart, a network cut) do not retry together.
// The agent, the provisioner daemon and the Postgres change listener use it.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Policy is a capped exponential backoff with "equal jitter": the delay of attempt n (from 0) is
// drawn uniformly from [d/2, d], where d = min(Base·2ⁿ, Max). Half of it keeps retries from
// coming back at once; the random half spreads clients apart.
type Policy struct {
	Base, Max time.Duration
	// Rand returns a number in [0, 1); nil uses math/rand/v2 (safe for concurrent use). Tests inject
	// a fixed source.
	Rand func() float64
}

// Delay is how long to wait before retry number attempt (0 is the first retry). Negative
// attempts count as 0; large ones stay at Max without overflowing.
func (p Policy) Delay(attempt int) time.Duration {
	d := p.Ceiling(attempt)
	r := p.Rand
	if r == nil {
		r = rand.Float64
	}
	f := r()
	if f < 0 || f >= 1 {
		f = 0
	}
	half := d / 2
	return half + time.Duration(f*float64(d-half))
}

// Ceiling is the largest delay attempt can get: min(Base·2^attempt, Max).
func (p Policy) Ceiling(attempt int) time.Duration {
	if p.Base <= 0 {
		return 0
	}
	attempt = max(attempt, 0)
	d := p.Base
	for i := 0; i < attempt && d < p.Max; i++ {
		d *= 2
	}
	return min(d, p.Max)
}
