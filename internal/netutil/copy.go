package netutil

import (
	"errors"
	"io"
	"sync"
)

// idleBuffer is what a Copy waiting for data holds.
const idleBuffer = 512

// Buffers are the large buffers of copies while data flows; a copy that waits holds only a small
// one of its own, so that an idle relayed connection holds no large buffer.
type Buffers struct {
	pool sync.Pool
}

// NewBuffers makes buffers of size bytes.
func NewBuffers(size int) *Buffers {
	b := &Buffers{}
	b.pool.New = func() any { buf := make([]byte, size); return &buf }
	return b
}

// Copy copies src to dst until src ends (nil at EOF) or a write fails. It waits for data with a
// 512-byte buffer; once a read fills it, data flows and a buffer of b is used until a read does
// not fill that one. src and dst are used as a plain Reader and Writer (no ReadFrom or WriteTo,
// which would bring buffers of their own).
func (b *Buffers) Copy(dst io.Writer, src io.Reader) error {
	small := make([]byte, idleBuffer)
	for {
		n, err := src.Read(small)
		if n > 0 {
			if _, werr := dst.Write(small[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return eofNil(err)
		}
		if n < len(small) {
			continue
		}
		if err := b.flow(dst, src); err != nil {
			return eofNil(err)
		}
	}
}

// flow copies with a pooled buffer until a read does not fill it; io.EOF at src's end.
func (b *Buffers) flow(dst io.Writer, src io.Reader) error {
	bp := b.pool.Get().(*[]byte)
	defer b.pool.Put(bp)
	buf := *bp
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
		if n < len(buf) {
			return nil
		}
	}
}

func eofNil(err error) error {
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}
