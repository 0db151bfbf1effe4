package table

import "unsafe"

// NameCache remembers a few name lookups of a small map (queues, workers)
// in front of it: a Go map hashes a string key through an indirect call,
// several times the cost of the two compares a hit here takes. Entries are
// checked against the name, so a collision only costs a miss; whoever
// changes the map clears the cache. The zero NameCache is empty.
//
// A caller usually passes the very same string each time (a constant, a
// configured name), so the cache is tried first by the identity of the
// name's bytes, which reads none of them, then by their content. An
// identity entry holds the string itself, so its bytes cannot be freed and
// their address reused for other bytes while it is cached.
type NameCache[T any] struct {
	names  [nameSlots]string
	vals   [nameSlots]*T
	idents [nameSlots]identEntry[T]
}

type identEntry[T any] struct {
	name string
	val  *T
}

const nameSlots = 16

// nameSlot places a name by its length and its first and last bytes.
func nameSlot(name string) int {
	n := len(name)
	x := uint64(n)
	if n >= 4 {
		x ^= uint64(le32(name)) ^ uint64(le32(name[n-4:]))<<24
	} else if n > 0 {
		x ^= uint64(name[0])<<8 ^ uint64(name[n-1])<<16
	}
	return int((x * 0x9e3779b97f4a7c15) >> 60)
}

// identSlot places a name by the address of its bytes.
func identSlot(name string) int {
	return int((uint64(uintptr(unsafe.Pointer(unsafe.StringData(name)))) * 0x9e3779b97f4a7c15) >> 60)
}

// Get returns the cached value for name, or nil.
func (c *NameCache[T]) Get(name string) *T {
	e := &c.idents[identSlot(name)]
	if len(e.name) == len(name) && unsafe.StringData(e.name) == unsafe.StringData(name) && e.val != nil {
		return e.val
	}
	return c.getByContent(name)
}

func (c *NameCache[T]) getByContent(name string) *T {
	i := nameSlot(name)
	if v := c.vals[i]; v != nil && c.names[i] == name {
		c.idents[identSlot(name)] = identEntry[T]{name, v}
		return v
	}
	return nil
}

// Put caches v, the map's value for name.
func (c *NameCache[T]) Put(name string, v *T) {
	i := nameSlot(name)
	c.names[i], c.vals[i] = name, v
	c.idents[identSlot(name)] = identEntry[T]{name, v}
}

// Clear forgets every cached name.
func (c *NameCache[T]) Clear() { *c = NameCache[T]{} }
