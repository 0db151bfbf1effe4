package table

// SlotMap maps 64-bit hashes to 32-bit numbers (bucket numbers): open
// addressing with linear probing and backward-shift deletion, so that no
// tombstone slows later probes. An entry packs the number+1 (0 marks an
// empty entry) in its low 32 bits, 24 further bits of the hash as a tag
// that rules out almost every wrong candidate without reading what the
// number names, and its distance from its home position in the top 8
// bits, which deletion needs to shift entries back without hashing them
// again.
//
// A lookup belongs to the caller, who knows what a number names:
//
//	for i := m.Start(h); ; i = m.Next(i) {
//		e := m.At(i)
//		if e == 0 { /* absent */ }
//		if table.SlotTag(e) == table.HashTag(h) { /* check record table.SlotNum(e) */ }
//	}
type SlotMap struct {
	e    []uint64 // power-of-two length
	mask uint64
	n    int
}

const (
	tagShift = 40
	tagMask  = 1<<24 - 1
	// MaxDist is the farthest an entry of a SlotMap or an IDIndex sits from
	// its home position, in probe steps; the table grows rather than place
	// one farther.
	MaxDist = 255
)

// MinSlotMap is the smallest SlotMap, which Init should be given first.
const MinSlotMap = 16

// Init empties the map and gives it n entries, a power of two.
func (m *SlotMap) Init(n int) {
	m.e = make([]uint64, n)
	m.mask = uint64(n - 1)
}

// Home returns the entry at the home position of hash h.
func (m *SlotMap) Home(h uint64) uint64 { return m.e[h&m.mask] }

// Start returns the home position of hash h.
func (m *SlotMap) Start(h uint64) uint64 { return h & m.mask }

// Next returns the position a probe visits after i.
func (m *SlotMap) Next(i uint64) uint64 { return (i + 1) & m.mask }

// At returns the entry at position i.
func (m *SlotMap) At(i uint64) uint64 { return m.e[i] }

// HashTag returns the tag that the entries of hash h carry.
func HashTag(h uint64) uint64 { return h >> tagShift }

// SlotTag returns the tag of a non-empty entry.
func SlotTag(e uint64) uint64 { return (e >> 32) & tagMask }

// SlotNum returns the number of a non-empty entry.
func SlotNum(e uint64) uint32 { return uint32(e) - 1 }

// Add inserts a number under hash h; hashOf gives the hash of any number
// in the map, for growing.
func (m *SlotMap) Add(h uint64, n uint32, hashOf func(uint32) uint64) {
	if 4*(m.n+1) > 3*len(m.e) {
		m.resize(2*len(m.e), hashOf)
	}
	for !m.insert(h, n) {
		m.resize(2*len(m.e), hashOf)
	}
	m.n++
}

// insert places an entry; it fails when its probe would exceed MaxDist.
func (m *SlotMap) insert(h uint64, n uint32) bool {
	i := h & m.mask
	for d := uint64(0); ; d++ {
		if d > MaxDist {
			return false
		}
		if m.e[i] == 0 {
			m.e[i] = uint64(n) + 1 | (h>>tagShift)<<32 | d<<56
			return true
		}
		i = (i + 1) & m.mask
	}
}

// Delete removes the entry of number n under hash h, if present; hashOf
// gives the hash of any number in the map, for shrinking.
func (m *SlotMap) Delete(h uint64, n uint32, hashOf func(uint32) uint64) {
	want := uint64(n) + 1
	i := h & m.mask
	for {
		e := m.e[i]
		if e == 0 {
			return
		}
		if e&(1<<32-1) == want {
			break
		}
		i = (i + 1) & m.mask
	}
	for k := (i + 1) & m.mask; m.e[k] != 0; k = (k + 1) & m.mask {
		e := m.e[k]
		gap := (k - i) & m.mask
		if d := e >> 56; d >= gap {
			m.e[i] = e&(1<<56-1) | (d-gap)<<56
			i = k
		}
	}
	m.e[i] = 0
	m.n--
	if len(m.e) > MinSlotMap && 8*m.n < len(m.e) {
		m.resize(len(m.e)/2, hashOf)
	}
}

// Len returns the number of numbers in the map.
func (m *SlotMap) Len() int { return m.n }

func (m *SlotMap) resize(n int, hashOf func(uint32) uint64) {
	old := m.e
	for {
		m.Init(n)
		ok := true
		for _, e := range old {
			if e != 0 && !m.insert(hashOf(uint32(e)-1), uint32(e)-1) {
				ok = false
				break
			}
		}
		if ok {
			return
		}
		n *= 2
	}
}
