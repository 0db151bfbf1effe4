package renderapi

import (
	"container/list"
	"sync"
)

// DefaultHotBytes bounds the in-memory copies of results fetched by id.
const DefaultHotBytes = 16 << 20

// hotEntry is one result held in memory, with its ETag.
type hotEntry struct {
	key  string // id.format
	data []byte
	etag string
}

// hotResults keeps the results most recently fetched by their permanent
// URL in memory, least recently used out first, so that a popular figure
// is served without asking the result cache. What a URL names never
// changes, so nothing here goes stale. Only fetches by id fill it.
type hotResults struct {
	mu       sync.Mutex
	maxBytes int64
	bytes    int64
	order    *list.List // front: most recently used
	byKey    map[string]*list.Element
}

func newHotResults(maxBytes int64) *hotResults {
	return &hotResults{maxBytes: maxBytes, order: list.New(), byKey: make(map[string]*list.Element)}
}

func (h *hotResults) get(key string) (hotEntry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	el, ok := h.byKey[key]
	if !ok {
		return hotEntry{}, false
	}
	h.order.MoveToFront(el)
	return el.Value.(hotEntry), true
}

func (h *hotResults) put(e hotEntry) {
	size := int64(len(e.data))
	if size > h.maxBytes/8 {
		return // a few huge results would push out many small ones
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.byKey[e.key]; ok {
		return
	}
	h.byKey[e.key] = h.order.PushFront(e)
	h.bytes += size
	for h.bytes > h.maxBytes {
		last := h.order.Back()
		old := h.order.Remove(last).(hotEntry)
		delete(h.byKey, old.key)
		h.bytes -= int64(len(old.data))
	}
}
