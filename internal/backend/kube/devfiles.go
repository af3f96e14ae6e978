package kube

import (
	"sync"

	"github.com/hangar-dev/hangar/internal/devfile"
)

// devfileCache keeps parsed devfiles by workspace ID. A workspace's devfile never changes after
// creation, so entries never go stale; the cache is emptied when it reaches its size.
type devfileCache struct {
	mu   sync.Mutex
	max  int
	byID map[string]*devfile.Devfile
}

func newDevfileCache(max int) *devfileCache {
	return &devfileCache{max: max, byID: map[string]*devfile.Devfile{}}
}

func (c *devfileCache) put(id string, d *devfile.Devfile) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byID) >= c.max {
		clear(c.byID)
	}
	c.byID[id] = d
}

// get returns the parsed devfile of a workspace, reading its text with load on a miss.
func (c *devfileCache) get(id string, load func() (string, error)) (*devfile.Devfile, error) {
	c.mu.Lock()
	d, ok := c.byID[id]
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
	c.put(id, d)
	return d, nil
}
