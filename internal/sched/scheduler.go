package sched

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/usherhq/usher/internal/sched/internal/table"
)

// Scheduler is the scheduling core. Create it with New; see the package
// documentation for how a driver uses it.
type Scheduler struct {
	now   func() time.Time
	rng   *rand.Rand
	tiers []Tier

	// Tier accounting (tiers.go).
	limits      []int    // effective limit per tier; limits[0] = every slot
	running     []int    // running jobs per tier
	defaults    [][]*job // running default tasks per tier
	interactive []*job   // running interactive tasks
	totalSlots  int

	queues      map[string]*queue
	byPrio      []*queue // highest priority first, then by name
	active      []*queue // byPrio without paused queues
	ties        []int32  // where each run of equal priorities starts in active
	jobs        jobTable // every live job's record, by slot and by id
	runs        []runInfo
	runFree     []int32     // free indexes in runs
	runHints    runHints    // running jobs by the identity of their id
	queueSeq    uint32      // numbers queues
	bkts        bucketTable // buckets of all queues
	nbuckets    int         // buckets of all queues, idle ones included
	idleList    []*bucket   // buckets that became idle since the last sweep
	idleBuckets int
	keyGates    map[string]*gate
	gcs         gateTable // counters of every gate
	groups      map[string]*gate
	keyLimit    keyLimits
	keyRate     keyTable[rateSpec]
	rateMemo    map[string]rateMemo // buckets of dropped key gates not yet full (rate.go)
	rateWake    timedHeap[*gate]    // dry gates, by when the next token is due
	parked      map[*gate][]*bucket // the buckets parked on each dry gate (rate.go)
	parkLists   [][]*bucket         // emptied lists of parked, for reuse
	reads       *gate               // mode gates: closed while the other mode runs
	writes      *gate

	workers map[string]*worker
	// Caches in front of the queues and workers maps, for Submit and Pull.
	queueNames  table.NameCache[queue]
	workerNames table.NameCache[worker]
	pools       map[string]*pool
	poolList    []*pool      // in creation order, for determinism
	delayed     jobHeap      // retries waiting out their backoff, keyed by ready time
	deadlines   deadlineHeap // jobs that must start by a time, keyed by it
	grace       func(time.Duration) time.Duration
	timeLimits  timedHeap[limitRef] // time limits of running attempts (with grace)

	seq      uint64 // ready sequence: FIFO order inside a queue
	startSeq uint64 // counts starts; lets invariants tell old from new
	events   []Event
	learned  learnedDurations
	stats    Counters

	order   []int32  // cycle's scratch: indexes in active
	tierLow []uint64 // startSeq when a tier limit last fell below its count
}

// Counters are running totals since the scheduler was created.
type Counters struct {
	Started, Succeeded, Failed, Retried, Cancelled int
	Downgrades, Halts, Denials, LeaseExpiries      int
	// Expired counts jobs cancelled at their deadline (also in Cancelled).
	Expired             int
	Snoozes, TimeLimits int
}

// New returns a Scheduler with the given configuration.
func New(cfg Config) (*Scheduler, error) {
	tiers := cfg.Tiers
	if len(tiers) == 0 {
		tiers = DefaultTiers()
	}
	if err := validateTiers(tiers); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		return nil, fmt.Errorf("sched: Config.Now is required")
	}
	rng := cfg.Rand
	if rng == nil {
		rng = rand.New(rand.NewPCG(1, 2))
	}
	n := len(tiers)
	s := &Scheduler{
		now:      cfg.Now,
		grace:    cfg.Grace,
		rng:      rng,
		tiers:    slices.Clone(tiers),
		limits:   make([]int, n),
		running:  make([]int, n),
		defaults: make([][]*job, n),
		tierLow:  make([]uint64, n),
		queues:   map[string]*queue{},
		jobs:     newJobTable(),
		bkts:     newBucketTable(),
		runHints: newRunHints(),
		keyGates: map[string]*gate{},
		groups:   map[string]*gate{},
		workers:  map[string]*worker{},
		pools:    map[string]*pool{},
	}
	s.reads = s.newGate("mode:read", gateMode, unlimited)
	s.writes = s.newGate("mode:write", gateMode, unlimited)
	s.reads.opposite, s.writes.opposite = s.writes, s.reads
	s.learned.init(s.tiers)
	s.recomputeTierLimits()
	return s, nil
}

// Tiers returns the tier configuration.
func (s *Scheduler) Tiers() []Tier { return slices.Clone(s.tiers) }

// Events returns and clears what happened since the last call.
func (s *Scheduler) Events() []Event {
	ev := s.events
	s.events = nil
	return ev
}

// Counters returns running totals.
func (s *Scheduler) Counters() Counters { return s.stats }

func (s *Scheduler) nowNS() int64 { return s.now().UnixNano() }

func (s *Scheduler) emit(e Event) { s.events = append(s.events, e) }

func (s *Scheduler) nextSeq() uint64 {
	s.seq++
	return s.seq
}

// sortKey orders jobs inside a queue: higher priority first, then the order
// in which they became ready.
func sortKey(prio int16, seq uint64) uint64 {
	return uint64(32767-int32(prio))<<48 | seq&seqMask
}

// seqMask keeps the ready sequence part of a sort key.
const seqMask = 1<<48 - 1
