// Package table holds the scheduling core's dense record tables and the
// hash indexes that find their records: the data structures under the
// rules, with nothing of the rules in them.
//
//   - [Chunks] keeps records in fixed chunks, so that a pointer to a
//     record stays valid as the table grows and a 32-bit number names it;
//   - [IDIndex] finds a job's number by its id, and [AddrHints] finds a
//     running job's number by the address of its id's bytes;
//   - [SlotMap] maps 64-bit hashes to record numbers (the buckets' index);
//   - [NameCache] sits in front of a small Go map of names;
//   - [String], [IDHash] and [Mix] are the seeded hashes they use.
//
// None of it is safe for concurrent use; the core serializes every call.
package table
