package resultcache

import (
	"encoding/binary"
	"errors"
	"time"
)

// The stored form of an Entry: version byte, run time in nanoseconds
// (uvarint), chunk count (uvarint), then per chunk its kind byte, label and
// data, each length-prefixed (uvarint).
const encodingVersion = 1

var errCorrupt = errors.New("corrupt cache entry")

func encode(e Entry) []byte {
	b := make([]byte, 0, e.Size()+16)
	b = append(b, encodingVersion)
	b = binary.AppendUvarint(b, uint64(e.Time))
	b = binary.AppendUvarint(b, uint64(len(e.Chunks)))
	for _, c := range e.Chunks {
		b = append(b, byte(c.Kind))
		b = binary.AppendUvarint(b, uint64(len(c.Label)))
		b = append(b, c.Label...)
		b = binary.AppendUvarint(b, uint64(len(c.Data)))
		b = append(b, c.Data...)
	}
	return b
}

func decode(b []byte) (Entry, error) {
	r := reader{b: b}
	if r.byte() != encodingVersion {
		return Entry{}, errCorrupt
	}
	e := Entry{Time: time.Duration(r.uvarint())}
	n := r.uvarint()
	if n > uint64(len(b)) {
		return Entry{}, errCorrupt
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		kind := Kind(r.byte())
		label := string(r.bytes())
		e.Chunks = append(e.Chunks, Chunk{Kind: kind, Label: label, Data: r.bytes()})
	}
	if r.err != nil || len(r.b) != 0 {
		return Entry{}, errCorrupt
	}
	return e, nil
}

type reader struct {
	b   []byte
	err error
}

func (r *reader) byte() byte {
	if len(r.b) == 0 {
		r.err = errCorrupt
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) bytes() []byte {
	n := r.uvarint()
	if r.err != nil || n > uint64(len(r.b)) {
		r.err = errCorrupt
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}
