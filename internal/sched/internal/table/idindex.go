package table

// IDIndex finds a job's record number by its id: open addressing over
// groups of GroupSize entries, where an entry that finds its home taken
// goes to the same place in the next group (IDHash says why). An entry
// packs number+1 (0 marks an empty entry) in its low 32 bits, then 16 bits
// of the id's hash as a tag that rules out almost every wrong candidate
// without reading its record, the record's generation when the entry was
// made, and the entry's distance from its home position in groups, which
// lets a deletion shift entries back without hashing them again.
//
// The index is written once per job and never on the job's way out: the
// owner bumps a record's generation when it frees it, which turns every
// entry naming the old generation stale. Stale entries are skipped by
// lookups (the record's generation differs) and cleared by DropStale.
//
// A lookup belongs to the caller, who knows what a number names:
//
//	i := x.Start(h)
//	for d := 0; d <= table.MaxDist; d, i = d+1, x.Next(i) {
//		e := x.At(i)
//		if e == 0 { /* absent */ }
//		if table.IDTag(e) == table.IDHashTag(h) { /* check record table.IDNum(e), generation table.IDGen(e) */ }
//	}
type IDIndex struct {
	e    []uint64 // power-of-two length
	mask uint64
	used int // live and stale entries
	live int
}

const (
	// MinIDIndex is the smallest IDIndex, which Init should be given first.
	MinIDIndex = 4 * GroupSize
	idTagShift = 48
	groupBits  = 6
	// GroupSize is the number of entries in a group of an IDIndex.
	GroupSize = 1 << groupBits
)

// Init empties the index and gives it n entries, a power of two; the live
// count stays.
func (x *IDIndex) Init(n int) {
	x.e = make([]uint64, n)
	x.mask = uint64(n - 1)
	x.used = 0
}

// Home returns the entry at the home position of hash h.
func (x *IDIndex) Home(h uint64) uint64 { return x.e[h&x.mask] }

// Start returns the home position of hash h.
func (x *IDIndex) Start(h uint64) uint64 { return h & x.mask }

// Next returns the position a probe visits after i: the same entry of the
// next group.
func (x *IDIndex) Next(i uint64) uint64 { return (i + GroupSize) & x.mask }

// At returns the entry at position i.
func (x *IDIndex) At(i uint64) uint64 { return x.e[i] }

// Group returns the group of position i.
func (x *IDIndex) Group(i uint64) uint64 { return i >> groupBits }

// Len returns the number of entries, empty or not.
func (x *IDIndex) Len() int { return len(x.e) }

// Used returns the number of live and stale entries.
func (x *IDIndex) Used() int { return x.used }

// Live returns the number of live entries, as counted by CountLive.
func (x *IDIndex) Live() int { return x.live }

// CountLive adds d to the live entries: +1 once an entry is inserted for a
// job, -1 when the job leaves (its entry is then stale or soon will be).
func (x *IDIndex) CountLive(d int) { x.live += d }

// Crowded says whether one more entry would make live and stale entries
// fill more than three quarters of the index, or live ones more than
// three eighths: a sweep (DropStale, then Fit) is due.
func (x *IDIndex) Crowded() bool {
	return 4*(x.used+1) > 3*len(x.e) || 8*(x.live+1) > 3*len(x.e)
}

// Sparse says whether live entries fill less than a sixteenth of an index
// larger than the smallest: a sweep would shrink it.
func (x *IDIndex) Sparse() bool { return len(x.e) > MinIDIndex && 16*x.live < len(x.e) }

// Fit returns the size at which the live entries, and one more, fill
// between an eighth and three eighths of the index.
func (x *IDIndex) Fit() int {
	n := len(x.e)
	for 8*(x.live+1) > 3*n {
		n *= 2
	}
	for n > MinIDIndex && 8*(x.live+1) < n {
		n /= 2
	}
	return n
}

// IDHashTag returns the tag that the entries of hash h carry.
func IDHashTag(h uint64) uint64 { return h >> idTagShift }

// IDTag returns the tag of a non-empty entry.
func IDTag(e uint64) uint64 { return (e >> 32) & 0xffff }

// IDNum returns the record number of a non-empty entry.
func IDNum(e uint64) uint32 { return uint32(e) - 1 }

// IDGen returns the record generation of a non-empty entry.
func IDGen(e uint64) uint8 { return uint8(e >> 48) }

// IDDist returns how many groups a non-empty entry sits from its home.
func IDDist(e uint64) uint64 { return e >> 56 }

// Insert places an entry at the first empty position of its column from
// its home. It fails when the distance would not fit its 8 bits (or the
// column is full); the index must then grow.
func (x *IDIndex) Insert(h uint64, n uint32, gen uint8) bool {
	i := h & x.mask
	for d := uint64(0); ; d++ {
		if d > MaxDist {
			return false
		}
		if x.e[i] == 0 {
			x.e[i] = uint64(n) + 1 | (h>>idTagShift)<<32 | uint64(gen)<<48 | d<<56
			x.used++
			return true
		}
		i = (i + GroupSize) & x.mask
	}
}

// DropStale clears every entry whose generation is not its record's in
// gen (indexed by record number).
func (x *IDIndex) DropStale(gen []uint8) {
	for i := uint64(0); i < uint64(len(x.e)); {
		e := x.e[i]
		if e != 0 && IDGen(e) != gen[IDNum(e)] {
			x.deleteAt(i)
			continue
		}
		i++
	}
}

// deleteAt removes the entry at i, shifting later entries of its column's
// run back.
func (x *IDIndex) deleteAt(i uint64) {
	for k := (i + GroupSize) & x.mask; x.e[k] != 0 && k != i; k = (k + GroupSize) & x.mask {
		// Move entry k into the hole at i unless its home lies cyclically
		// in (i, k]: then it is already as close to home as it can be.
		e := x.e[k]
		gap := ((k - i) & x.mask) >> groupBits
		if d := e >> 56; d >= gap {
			x.e[i] = e&(1<<56-1) | (d-gap)<<56
			i = k
		}
	}
	x.e[i] = 0
	x.used--
}

// IDHash returns the index hash of an id: its low bits pick the entry
// within a group, the bits above them the group, and the top 16 bits are
// the entry's tag.
//
// Ids that differ in their last byte alone share their group: the group
// comes from the hash of every byte but the last, and the last byte, offset
// by that hash, picks the entry within it. A driver numbering its jobs
// ("asy-1230", "asy-1231", …) thus submits ten jobs in a row into
// neighbouring entries of one group, two cache lines, instead of ten
// random lines of a table far larger than any cache. A group holds
// GroupSize entries, more than the 62 digits and letters an id may end in,
// so ids that differ only in a last digit or letter never collide, and a
// collision probes the same entry of the next group: each of the GroupSize
// columns is a table of its own (linear probing in steps of a group), whose
// runs are no longer than a plain table's. The tag mixes the last byte in,
// so that the ids of a group are told apart without reading their records.
func IDHash(id string, seed uint64) uint64 {
	n := len(id)
	if n == 0 { // never indexed; hashed all the same
		return String(id, seed)
	}
	h := String(id[:n-1], seed)
	last := uint64(id[n-1])
	col := uint64(lastByteColumn[last]) + h>>(64-groupBits)
	return (h<<groupBits | col&(GroupSize-1)) ^ (last*0x9e37)<<idTagShift
}

// lastByteColumn numbers the bytes ids end in, before the hash's offset:
// digits, upper and lower case letters get distinct columns (0–9, 10–35,
// 36–61), so that the 62 ids of an alphanumeric counter's next-to-last
// digit share a group without sharing an entry; any other byte gets its
// low six bits.
var lastByteColumn = func() (t [256]uint8) {
	for c := range t {
		switch {
		case '0' <= c && c <= '9':
			t[c] = uint8(c - '0')
		case 'A' <= c && c <= 'Z':
			t[c] = uint8(c - 'A' + 10)
		case 'a' <= c && c <= 'z':
			t[c] = uint8(c - 'a' + 36)
		default:
			t[c] = uint8(c & 63)
		}
	}
	return t
}()
