package backoff

import (
	"math/rand/v2"
	"testing"
	"time"
)

func fixed(f float64) func() float64 { return func() float64 { return f } }

// Every delay lies in [ceiling/2, ceiling], the ceiling doubles from Base and stops at Max.
func TestDelayBounds(t *testing.T) {
	p := Policy{Base: 500 * time.Millisecond, Max: 30 * time.Second}
	wantCeil := []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second,
		8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}
	for n, c := range wantCeil {
		if got := p.Ceiling(n); got != c {
			t.Errorf("Ceiling(%d) = %v, want %v", n, got, c)
		}
		lo := Policy{Base: p.Base, Max: p.Max, Rand: fixed(0)}.Delay(n)
		hi := Policy{Base: p.Base, Max: p.Max, Rand: fixed(0.999999)}.Delay(n)
		if lo != c/2 {
			t.Errorf("Delay(%d) with rand 0 = %v, want %v", n, lo, c/2)
		}
		if hi > c || hi < c-c/1000 {
			t.Errorf("Delay(%d) with rand → 1 = %v, want just under %v", n, hi, c)
		}
	}
}

// A random source is used: delays of one attempt spread over the range instead of repeating.
func TestDelayIsJittered(t *testing.T) {
	src := rand.New(rand.NewPCG(1, 2))
	p := Policy{Base: time.Second, Max: time.Minute, Rand: src.Float64}
	seen := map[time.Duration]bool{}
	var lo, hi time.Duration = time.Hour, 0
	for range 200 {
		d := p.Delay(3) // ceiling 8 s
		if d < 4*time.Second || d > 8*time.Second {
			t.Fatalf("Delay(3) = %v, outside [4s, 8s]", d)
		}
		seen[d] = true
		lo, hi = min(lo, d), max(hi, d)
	}
	if len(seen) < 150 || lo > 4500*time.Millisecond || hi < 7500*time.Millisecond {
		t.Fatalf("200 delays: %d distinct, from %v to %v; want them spread over [4s, 8s]", len(seen), lo, hi)
	}
	// The default source (nil Rand) is random too.
	p.Rand = nil
	first := p.Delay(10)
	for range 100 {
		if p.Delay(10) != first {
			return
		}
	}
	t.Fatalf("the default source gave %v 101 times", first)
}

// Attempts far beyond the cap neither overflow nor exceed Max; negative ones count as the first;
// out-of-range random numbers are clamped; a zero policy waits nothing.
func TestDelayEdges(t *testing.T) {
	p := Policy{Base: 100 * time.Millisecond, Max: 10 * time.Second, Rand: fixed(0.5)}
	for _, n := range []int{63, 64, 1000, 1 << 30} {
		if d := p.Delay(n); d != 7500*time.Millisecond {
			t.Errorf("Delay(%d) = %v, want 7.5s", n, d)
		}
	}
	if d := p.Delay(-5); d != 75*time.Millisecond {
		t.Errorf("Delay(-5) = %v, want 75ms", d)
	}
	for _, f := range []float64{-1, 1, 2} {
		if d := (Policy{Base: time.Second, Max: time.Second, Rand: fixed(f)}).Delay(0); d != 500*time.Millisecond {
			t.Errorf("rand %v: Delay = %v, want 500ms", f, d)
		}
	}
	if d := (Policy{}).Delay(3); d != 0 {
		t.Errorf("zero policy: %v", d)
	}
}
