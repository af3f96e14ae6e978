package netutil

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// reads is a source that gives chunks as they are listed, one per Read (a chunk longer than the
// buffer is given in parts), and records the size of each buffer it is asked to fill.
type reads struct {
	chunks [][]byte
	sizes  []int
	err    error // after the chunks; io.EOF when nil
}

func (r *reads) Read(p []byte) (int, error) {
	r.sizes = append(r.sizes, len(p))
	if len(r.chunks) == 0 {
		if r.err != nil {
			return 0, r.err
		}
		return 0, io.EOF
	}
	n := copy(p, r.chunks[0])
	if r.chunks[0] = r.chunks[0][n:]; len(r.chunks[0]) == 0 {
		r.chunks = r.chunks[1:]
	}
	return n, nil
}

// A copy waits with the small buffer, takes the large one while reads fill it, and goes back to the
// small one after a read that does not: between bursts it holds no large buffer.
func TestCopyTakesTheLargeBufferOnlyWhileDataFlows(t *testing.T) {
	b := NewBuffers(4096)
	burst := bytes.Repeat([]byte("b"), 512+2*4096+100)
	src := &reads{chunks: [][]byte{[]byte("keystroke"), burst, []byte("again")}}
	var dst bytes.Buffer
	if err := b.Copy(&dst, src); err != nil {
		t.Fatal(err)
	}
	want := "keystroke" + string(burst) + "again"
	if dst.String() != want {
		t.Fatalf("copied %d bytes, want %d", dst.Len(), len(want))
	}
	// keystroke (small), the burst's first 512 (small, full), 4096, 4096, 100 (large: short),
	// "again" (small), EOF (small).
	wantSizes := []int{512, 512, 4096, 4096, 4096, 512, 512}
	if len(src.sizes) != len(wantSizes) {
		t.Fatalf("reads of %v, want %v", src.sizes, wantSizes)
	}
	for i := range wantSizes {
		if src.sizes[i] != wantSizes[i] {
			t.Fatalf("reads of %v, want %v", src.sizes, wantSizes)
		}
	}
}

func TestCopyEndsAsItsSourceAndDestination(t *testing.T) {
	b := NewBuffers(1024)
	data := bytes.Repeat([]byte("0123456789"), 10000)
	for name, src := range map[string]io.Reader{
		"one byte":  iotest.OneByteReader(bytes.NewReader(data)),
		"halves":    iotest.HalfReader(bytes.NewReader(data)),
		"data+EOF":  iotest.DataErrReader(bytes.NewReader(data)),
		"plain":     bytes.NewReader(data),
		"timeouts?": iotest.TimeoutReader(bytes.NewReader(data)),
	} {
		t.Run(name, func(t *testing.T) {
			var dst bytes.Buffer
			err := b.Copy(&dst, src)
			if name == "timeouts?" {
				if !errors.Is(err, iotest.ErrTimeout) {
					t.Fatalf("a read error: %v", err)
				}
				return
			}
			if err != nil || !bytes.Equal(dst.Bytes(), data) {
				t.Fatalf("copied %d bytes, %v", dst.Len(), err)
			}
		})
	}
	boom := errors.New("boom")
	if err := b.Copy(failingWriter{boom}, bytes.NewReader(data)); !errors.Is(err, boom) {
		t.Fatalf("a write error: %v", err)
	}
	if err := b.Copy(io.Discard, &reads{chunks: [][]byte{data}, err: boom}); !errors.Is(err, boom) {
		t.Fatalf("a read error after data: %v", err)
	}
}

type failingWriter struct{ err error }

func (w failingWriter) Write([]byte) (int, error) { return 0, w.err }
