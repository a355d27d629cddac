package memory

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
)

// level records which nodes of one level are built: all below Done, plus
// the few in More that finished out of order. Both stay small because
// builds start in order and at most MaxInFlight run at once.
type level struct {
	Done int64   `json:"d"`
	More []int64 `json:"m,omitempty"`
}

// claim is a build in flight: sent to the queue, and started once a
// builder took it (Owner set). It lapses at Until, so a builder that died
// or a message that was lost stalls nothing.
type claim struct {
	L     int    `json:"l"`
	I     int64  `json:"i"`
	Until int64  `json:"u"` // unix ms
	Owner string `json:"o,omitempty"`
}

func (c claim) node() Node { return Node{L: c.L, I: c.I} }

// retryEntry is a node whose build failed: not started again before At.
// It stays until the node is built, keeping the counts.
type retryEntry struct {
	L        int    `json:"l"`
	I        int64  `json:"i"`
	At       int64  `json:"a"` // unix ms
	Failures int    `json:"f"`
	Refusals int    `json:"r,omitempty"`
	Err      string `json:"e,omitempty"`
}

func (r retryEntry) node() Node { return Node{L: r.L, I: r.I} }

// leafImages is what one leaf did with the images its source names.
type leafImages struct {
	I         int64 `json:"i"`
	Named     int   `json:"n"`
	Missing   int   `json:"x,omitempty"` // never stored or deleted: skipped by memory
	Attached  int   `json:"a,omitempty"`
	Skipped   int   `json:"s,omitempty"` // skipped by the compactor
	NamesOnly bool  `json:"o,omitempty"`
	Resent    int   `json:"z,omitempty"` // left out: a zoom page its original already showed
	// Capped counts the stored images not loaded, past MaxLeafImages or
	// LeafImageBytes; they are counted in Skipped once the leaf is built.
	Capped int `json:"-"`
	// Of the stored images: described (before or by this leaf), shown to the
	// model but left undescribed by it, and neither (the model could not
	// see them), which wait for a leaf whose model can.
	Described      int `json:"d,omitempty"`
	DescribeFailed int `json:"df,omitempty"`
	Undescribed    int `json:"dp,omitempty"`
}

// Bounds on the lists status shows; totals are counted beyond them.
const (
	keepMechanical  = 100
	keepImageLeaves = 50
)

// chatState is the one small item per chat that schedules its builds.
type chatState struct {
	// T is the log length the state has seen.
	T       int64        `json:"t"`
	Levels  []level      `json:"lv,omitempty"`
	Claims  []claim      `json:"c,omitempty"`
	Retries []retryEntry `json:"r,omitempty"`
	View    partition    `json:"v"`
	Compact partition    `json:"cv"`

	LastError   string `json:"le,omitempty"`
	LastErrorAt int64  `json:"la,omitempty"`
	// Counters for status.
	Built      int64 `json:"nb,omitempty"`
	ModelCalls int64 `json:"nc,omitempty"`
	Verbatim   int64 `json:"nv,omitempty"`
	Failed     int64 `json:"nf,omitempty"`
	// Mechanical lists the nodes given a mechanical line (the latest
	// keepMechanical); MechanicalCount counts them all.
	Mechanical      []Node `json:"mn,omitempty"`
	MechanicalCount int64  `json:"mc,omitempty"`
	// ImageLeaves are the latest leaves that named images.
	ImageLeaves []leafImages `json:"il,omitempty"`
	ImageTotals imageTotals  `json:"it,omitempty"`
	// Search is the chat's own search opt-in (nil: the configured default).
	Search *bool `json:"se,omitempty"`
	// Forget is the chat's forget opt-in (nil: off).
	Forget *bool `json:"fo,omitempty"`
	// Gen counts the chat's erasures. The line caches and the view
	// snapshot are keyed by it, so after an erasure no process shows a
	// line it read before.
	Gen int64 `json:"g,omitempty"`
	// Stale are the nodes whose lines were built from words since erased:
	// not built (a placeholder everywhere) until rebuilt from their
	// sources as they are now.
	Stale []staleNode `json:"sx,omitempty"`
}

// staleNode is a node an erasure of generation G took back: only a row
// built at G or later is its line.
type staleNode struct {
	L int   `json:"l"`
	I int64 `json:"i"`
	G int64 `json:"g"`
}

func (s staleNode) node() Node { return Node{L: s.L, I: s.I} }

// staleOf finds n among the stale nodes.
func (st *chatState) staleOf(n Node) (int, bool) {
	for k, s := range st.Stale {
		if s.L == n.L && s.I == n.I {
			return k, true
		}
	}
	return 0, false
}

// staleRow reports whether a row of n built at generation gen holds words
// an erasure took back.
func (st *chatState) staleRow(n Node, gen int64) bool {
	k, ok := st.staleOf(n)
	return ok && gen < st.Stale[k].G
}

type imageTotals struct {
	Leaves    int64 `json:"l,omitempty"`
	Attached  int64 `json:"a,omitempty"`
	Skipped   int64 `json:"s,omitempty"`
	Missing   int64 `json:"x,omitempty"`
	NamesOnly int64 `json:"o,omitempty"`
	// Descriptions, as leafImages counts them.
	Described      int64 `json:"d,omitempty"`
	DescribeFailed int64 `json:"df,omitempty"`
	Undescribed    int64 `json:"dp,omitempty"`
}

func (st *chatState) level(l int) *level {
	for len(st.Levels) <= l {
		st.Levels = append(st.Levels, level{})
	}
	return &st.Levels[l]
}

// nodes counts the complete nodes of the tree over st.T entries.
func (st *chatState) nodes() int64 {
	var n int64
	for l := 0; int64(1)<<l <= st.T && l < 63; l++ {
		n += st.T >> l
	}
	return n
}

// built reports whether node n is built.
func (st *chatState) built(n Node) bool {
	if n.L >= len(st.Levels) || n.L < 0 {
		return false
	}
	if len(st.Stale) > 0 {
		if _, ok := st.staleOf(n); ok {
			return false
		}
	}
	return st.everBuilt(n)
}

// everBuilt reports whether n was built, stale or not.
func (st *chatState) everBuilt(n Node) bool {
	if n.L >= len(st.Levels) || n.L < 0 {
		return false
	}
	lv := &st.Levels[n.L]
	if n.I < lv.Done {
		return true
	}
	k := sort.Search(len(lv.More), func(k int) bool { return lv.More[k] >= n.I })
	return k < len(lv.More) && lv.More[k] == n.I
}

// firstBuilt is the smallest j in [from, to] with (l, j) built.
func (st *chatState) firstBuilt(l int, from, to int64) (int64, bool) {
	if l >= len(st.Levels) || from > to {
		return 0, false
	}
	lv := &st.Levels[l]
	if from < lv.Done {
		return from, true
	}
	k := sort.Search(len(lv.More), func(k int) bool { return lv.More[k] >= from })
	if k < len(lv.More) && lv.More[k] <= to {
		return lv.More[k], true
	}
	return 0, false
}

// markBuilt records n as built; it reports false when it already was.
func (st *chatState) markBuilt(n Node) bool {
	if k, ok := st.staleOf(n); ok {
		st.Stale = append(st.Stale[:k], st.Stale[k+1:]...)
		if len(st.Stale) == 0 {
			st.Stale = nil
		}
		if st.everBuilt(n) {
			// Built again: takeBack stopped counting it.
			st.Built++
			return true
		}
		// Taken back while it was being built for the first time.
	} else if st.built(n) {
		return false
	}
	lv := st.level(n.L)
	k := sort.Search(len(lv.More), func(k int) bool { return lv.More[k] >= n.I })
	lv.More = append(lv.More, 0)
	copy(lv.More[k+1:], lv.More[k:])
	lv.More[k] = n.I
	for len(lv.More) > 0 && lv.More[0] == lv.Done {
		lv.Done++
		lv.More = lv.More[1:]
	}
	if len(lv.More) == 0 {
		lv.More = nil
	}
	st.Built++
	return true
}

// unbuiltLeaves counts the logged leaves not built yet; in both views these
// are exactly the placeholder lines.
func (st *chatState) unbuiltLeaves() int64 {
	if len(st.Levels) == 0 {
		return st.T
	}
	lv := st.Levels[0]
	n := st.T - lv.Done - int64(len(lv.More))
	for _, s := range st.Stale {
		if s.L == 0 {
			n++
		}
	}
	return n
}

// awaitedBuildAge is how long the builds of the unbuilt leaves have been
// running, the youngest's, as a waiting view's poll schedule counts it
// (see waitPoll), given the claims' lease: 0 when a leaf's build has not
// started (it may start and land at any moment), and 0 past a bound of
// leaves looked at.
func (st *chatState) awaitedBuildAge(now time.Time, lease time.Duration) time.Duration {
	const most = 64
	from := int64(0)
	if len(st.Levels) > 0 {
		from = st.Levels[0].Done
	}
	if st.T-from > most {
		return 0
	}
	youngest := time.Duration(-1)
	for i := from; i < st.T; i++ {
		leaf := Node{L: 0, I: i}
		if st.built(leaf) {
			continue
		}
		k, ok := st.claimOf(leaf)
		if !ok || st.Claims[k].Owner == "" {
			return 0
		}
		age := lease - time.Duration(st.Claims[k].Until-now.UnixMilli())*time.Millisecond
		if youngest < 0 || age < youngest {
			youngest = age
		}
	}
	return max(youngest, 0)
}

func (st *chatState) claimOf(n Node) (int, bool) {
	for k, c := range st.Claims {
		if c.L == n.L && c.I == n.I {
			return k, true
		}
	}
	return 0, false
}

func (st *chatState) retryOf(n Node) (int, bool) {
	for k, r := range st.Retries {
		if r.L == n.L && r.I == n.I {
			return k, true
		}
	}
	return 0, false
}

func (st *chatState) dropClaim(n Node) {
	if k, ok := st.claimOf(n); ok {
		st.Claims = append(st.Claims[:k], st.Claims[k+1:]...)
	}
}

func (st *chatState) dropRetry(n Node) {
	if k, ok := st.retryOf(n); ok {
		st.Retries = append(st.Retries[:k], st.Retries[k+1:]...)
	}
}

// waiting counts the retries not in flight: nodes waiting out a delay.
func (st *chatState) waiting() int {
	n := 0
	for _, r := range st.Retries {
		if _, ok := st.claimOf(r.node()); !ok {
			n++
		}
	}
	return n
}

// stalled: nothing in flight and something waiting on a retry.
func (st *chatState) stalled() bool { return len(st.Claims) == 0 && st.waiting() > 0 }

// grow takes the log to t entries: each new entry appends its leaf line, as
// a placeholder, to both views.
func (st *chatState) grow(t int64) bool {
	if t <= st.T {
		return false
	}
	st.View.appendLeaves(st.T, t)
	st.Compact.appendLeaves(st.T, t)
	st.T = t
	return true
}

func (st *chatState) setError(now time.Time, msg string) {
	st.LastError = msg
	st.LastErrorAt = now.UnixMilli()
}

// errNoChange tells update that fn changed nothing worth a write.
var errNoChange = errors.New("no change")

// errStateTooLarge names the failure of a state item over the item budget.
var errStateTooLarge = errors.New("memory state item over the item budget")

// states reads and writes the state item with optimistic locking.
type states struct {
	table store.Table
	ids   *chatid.Registry
}

func stateKey(c chatid.Chat) store.Key {
	return store.Key{PK: c.PK(), SK: store.StateSK}
}

// get reads a chat's state; a chat with no state yet has an empty one.
func (s states) get(ctx context.Context, c chatid.Chat) (*chatState, int64, error) {
	st, version, _, err := s.read(ctx, c)
	return st, version, err
}

// read is get with the item's body as stored.
func (s states) read(ctx context.Context, c chatid.Chat) (*chatState, int64, []byte, error) {
	it, err := s.table.Get(ctx, stateKey(c))
	if errors.Is(err, store.ErrNotFound) {
		return &chatState{}, 0, nil, nil
	}
	if err != nil {
		return nil, 0, nil, fmt.Errorf("reading memory state of %s: %w", c.ID, err)
	}
	var st chatState
	if err := json.Unmarshal(it.Body, &st); err != nil {
		return nil, 0, nil, fmt.Errorf("memory state of %s is corrupt: %w", c.ID, err)
	}
	return &st, it.Version, it.Body, nil
}

// maxUpdateTries bounds the optimistic-locking loop; contention on one chat
// is at most MaxInFlight builders plus the API, so this is generous.
const maxUpdateTries = 64

// update applies fn to the chat's state and writes it when the stored
// version is unchanged, retrying fn on a fresh copy otherwise. fn may run
// more than once and must only touch the state it is given. It returns the
// state as written (or as read, when fn changed nothing).
//
// A state item is created only while c is its chat's current incarnation:
// a write for a deleted one (a build message delivered late, a request
// that raced the deletion) finds no item, writes none and returns
// errRetired, so it leaves nothing behind and nothing in the next
// incarnation. Updates need no check: they are conditional on the item
// being there.
//
// A write whose answer was lost and that the store's client sent again
// fails its condition against itself. So a conflict is checked against
// the item read next: when it is the item this call wrote, the write
// stands and fn's results are the ones to act on; running fn again on it
// would find its own claims taken and send nothing for them.
func (s states) update(ctx context.Context, c chatid.Chat, fn func(st *chatState) error) (*chatState, error) {
	var mine *chatState // the state of the last write that failed its condition
	var mineVersion int64
	var mineBody []byte
	for try := 0; ; try++ {
		st, version, stored, err := s.read(ctx, c)
		if err != nil {
			return nil, err
		}
		if mine != nil && version == mineVersion && bytes.Equal(stored, mineBody) {
			return mine, nil
		}
		if err := fn(st); err != nil {
			if errors.Is(err, errNoChange) {
				return st, nil
			}
			return st, err
		}
		body, err := json.Marshal(st)
		if err != nil {
			return nil, fmt.Errorf("encoding memory state: %w", err)
		}
		it := store.Item{Key: stateKey(c), Version: version + 1, Body: body}
		if it.Size() > store.ItemBudget {
			return nil, fmt.Errorf("%w: %d bytes for chat %s", errStateTooLarge, it.Size(), c.ID)
		}
		if version == 0 {
			current, cerr := s.ids.IsCurrent(ctx, c)
			if cerr != nil {
				return nil, fmt.Errorf("memory state of %s: %w", c.ID, cerr)
			}
			if !current {
				return &chatState{}, errRetired
			}
			err = s.table.Create(ctx, it)
		} else {
			err = s.table.Update(ctx, it)
		}
		if err == nil {
			return st, nil
		}
		if !errors.Is(err, store.ErrConditionFailed) {
			return nil, fmt.Errorf("writing memory state of %s: %w", c.ID, err)
		}
		mine, mineVersion, mineBody = st, it.Version, body
		if try+1 >= maxUpdateTries {
			return nil, store.Unavailable("memory state update", fmt.Errorf("chat %s: %d conflicting writers in a row: %w", c.ID, maxUpdateTries, err))
		}
		// Back off a little, with jitter, so contending builders spread out.
		d := time.Duration(1+rand.IntN(1+min(try, 10)*2)) * time.Millisecond
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(d):
		}
	}
}
