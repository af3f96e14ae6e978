package kube

import (
	"sync"

	"github.com/hangar-dev/hangar/internal/devfile"
)

// devfileCache keeps parsed devfiles by workspace ID and definition generation. A workspace's
// devfile changes only with its generation (hangar update of a workspace from a repository), and
// every reader has the generation from the row it read, so an entry never goes stale whichever
// replica wrote the new definition; the cache is emptied when it reaches its size.
type devfileCache struct {
	mu    sync.Mutex
	max   int
	byKey map[devfileKey]*devfile.Devfile
}

type devfileKey struct {
	id  string
	gen int64
}

func newDevfileCache(max int) *devfileCache {
	return &devfileCache{max: max, byKey: map[devfileKey]*devfile.Devfile{}}
}

func (c *devfileCache) put(id string, gen int64, d *devfile.Devfile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byKey) >= c.max {
		clear(c.byKey)
	}
	c.byKey[devfileKey{id, gen}] = d
}

// get returns the parsed devfile of a workspace at generation gen, reading its text with load on
// a miss.
func (c *devfileCache) get(id string, gen int64, load func() (string, error)) (*devfile.Devfile, error) {
	c.mu.Lock()
	d, ok := c.byKey[devfileKey{id, gen}]
	c.mu.Unlock()
	if ok {
		return d, nil
	}
	text, err := load()
	if err != nil {
		return nil, err
	}
	d, err = devfile.Parse([]byte(text))
	if err != nil {
		return nil, err
	}
	c.put(id, gen, d)
	return d, nil
}
