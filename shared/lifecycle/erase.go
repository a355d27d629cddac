package lifecycle

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
	"github.com/durachat/durachat/shared/transcript"
)

// The erasure's answers, shared with the client.
type (
	EraseRequest  = wire.EraseRequest
	Erasure       = wire.Erasure
	ErasedMessage = wire.ErasedMessage
)

// Bounds of an erase request.
const (
	// MinMatch is the shortest text an erasure by match takes, in
	// characters: a shorter one would erase most of a chat by accident.
	MinMatch = 4
	// MaxErase bounds the seqs or images one request names, and the
	// messages one erasure erases.
	MaxErase = 1000
	// maxMatchBytes bounds a match text.
	maxMatchBytes = 1024
	// scanChunk is how many entries an erasure reads at once when it
	// looks for the messages a match or an image names.
	scanChunk = 100
)

// Eraser is what an erasure needs of the summary memory: take back the
// lines built from erased entries (returning their labels) and tell how
// many of them are built again.
type Eraser interface {
	EraseLines(ctx context.Context, c chatid.Chat, ids []int64) ([]string, error)
	LinesRebuilt(ctx context.Context, c chatid.Chat, labels []string) (int, error)
}

// erasureRecord is an erasure as kept in the chat incarnation's
// partition (store.ErasureSK): its receipt, and the step it reached. It
// keeps no erased word: a match text is kept only as part of the id's
// hash.
type erasureRecord struct {
	Started  int64           `json:"s"`
	Finished int64           `json:"f,omitempty"`
	Messages []ErasedMessage `json:"m"`
	// Images are the images the erased messages named, to release.
	Images []string `json:"i,omitempty"`
	// Erased: the entries are tombstones and the lines taken back.
	Erased bool     `json:"e,omitempty"`
	Nodes  []string `json:"n,omitempty"`
	// Released: the chat's references to the images are released (at
	// ReleasedAt, Unix ms); those no live message of the chat named then
	// are Pending, their bytes left to the settle step (settleErased).
	Released   bool     `json:"r,omitempty"`
	ReleasedAt int64    `json:"ra,omitempty"`
	Pending    []string `json:"p,omitempty"`
	// Settled: the pending images are deleted or kept; Deleted and Kept
	// say how, for every image of the erasure.
	Settled bool     `json:"t,omitempty"`
	Deleted []string `json:"d,omitempty"`
	Kept    int      `json:"k,omitempty"`
	Rebuilt int      `json:"b,omitempty"`
	// Scan is a request by match or images whose messages are not looked
	// for yet: the chat is too large to scan in the request, and the erase
	// task does it (scanErasure). It is the one place a match text is
	// kept, until that scan.
	Scan *EraseRequest `json:"q,omitempty"`
	// Refused says why the scan found the request bad; nothing is erased.
	Refused string `json:"x,omitempty"`
	// Described are the images of an erasure by match whose descriptions
	// hold the match: a description goes even when its image is kept.
	Described []string `json:"dd,omitempty"`
}

// erasureID is the id of an erasure request on the incarnation ch: the
// same request gets the same id (and so the same receipt).
func erasureID(ch chatid.Chat, req EraseRequest) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00", ch.PK(), "erase")
	for _, s := range req.Seqs {
		fmt.Fprintf(h, "s%d\x00", s)
	}
	fmt.Fprintf(h, "m%d\x00%s\x00", len(req.Match), req.Match)
	for _, n := range req.Images {
		fmt.Fprintf(h, "i%s\x00", n)
	}
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// checkErase checks an erase request and returns it in canonical form
// (seqs and images sorted, without repeats).
func checkErase(req EraseRequest) (EraseRequest, error) {
	given := 0
	for _, set := range []bool{req.Seqs != nil, req.Match != "", req.Images != nil} {
		if set {
			given++
		}
	}
	switch {
	case given == 0:
		return req, api.BadRequest("seqs", "name what to erase: seqs, match or images")
	case given > 1:
		return req, api.BadRequest("seqs", "name one of seqs, match or images, not several")
	case req.Seqs != nil:
		return req, checkSeqs(&req)
	case req.Match != "":
		return req, checkMatch(req.Match)
	}
	return req, checkImages(&req)
}

// checkSeqs checks the seqs of a request and sorts them.
func checkSeqs(req *EraseRequest) error {
	if len(req.Seqs) == 0 || len(req.Seqs) > MaxErase {
		return api.BadRequest("seqs", "seqs holds 1 to %d message seqs, not %d", MaxErase, len(req.Seqs))
	}
	for _, s := range req.Seqs {
		if s < 0 || s > api.MaxSeq {
			return api.BadRequest("seqs", "seq %d is not a message's seq", s)
		}
	}
	req.Seqs = slices.Compact(slices.Sorted(slices.Values(req.Seqs)))
	return nil
}

// checkMatch checks the text of an erasure by match.
func checkMatch(match string) error {
	switch n := utf8.RuneCountInString(match); {
	case !utf8.ValidString(match):
		return api.BadRequest("match", "match must be UTF-8")
	case n < MinMatch:
		return api.BadRequest("match", "match is %d characters; at least %d", n, MinMatch)
	case len(match) > maxMatchBytes:
		return api.BadRequest("match", "match is %d bytes; at most %d", len(match), maxMatchBytes)
	}
	return nil
}

// checkImages checks the image names of a request and sorts them.
func checkImages(req *EraseRequest) error {
	if len(req.Images) == 0 || len(req.Images) > MaxErase {
		return api.BadRequest("images", "images holds 1 to %d image names, not %d", MaxErase, len(req.Images))
	}
	for _, n := range req.Images {
		if !refs.ValidName(n) {
			return api.BadRequest("images", "%q is not an image name", n)
		}
	}
	req.Images = slices.Compact(slices.Sorted(slices.Values(req.Images)))
	return nil
}

func erasureKey(ch chatid.Chat, id string) store.Key {
	return store.Key{PK: ch.PK(), SK: store.ErasureSK(id)}
}

// Erase erases what req names from the chat: its messages become
// tombstones in place (every other message keeps its seq and entries),
// the summary lines built from them are taken back at once and rebuilt,
// and the images they named are deleted unless a live message of the
// tenant names them. It answers the erasure's receipt. The same request
// again answers the same erasure (finishing its steps when a call before
// was cut off). A bad request is a 400 naming the field, with nothing
// erased. With a queue, the release of the images is handed to it (an
// "erase" task; see EraseTask), and so is the scan for the messages of an
// erasure by match or images of a chat larger than scanInCall (the
// request reads the chat's length only); without one they run in the call.
func (c *Routes) Erase(ctx context.Context, tenant, chat string, req EraseRequest) (Erasure, error) {
	req, err := checkErase(req)
	if err != nil {
		return Erasure{}, err
	}
	r, err := c.load(ctx, tenant, chat)
	if err != nil {
		return Erasure{}, err
	}
	if r.state.Deleting != 0 {
		return Erasure{}, deletingError(chat)
	}
	ch := r.id.Chat
	id := erasureID(ch, req)
	rec, version, found, err := c.readErasure(ctx, ch, id)
	if err != nil {
		return Erasure{}, err
	}
	created := false
	if !found {
		if rec, err = c.planErasure(ctx, ch, req); err != nil {
			return Erasure{}, err
		}
		body, err := rawjson.Of(rec)
		if err != nil {
			return Erasure{}, err
		}
		err = c.table.Create(ctx, store.Item{Key: erasureKey(ch, id), Body: body})
		switch {
		case errors.Is(err, store.ErrConditionFailed):
			// A twin planned it first: its plan stands.
			if rec, version, _, err = c.readErasure(ctx, ch, id); err != nil {
				return Erasure{}, err
			}
		case err != nil:
			return Erasure{}, fmt.Errorf("lifecycle: recording erasure %s of %s: %w", id, chat, err)
		default:
			version, created = 1, true
		}
	}
	rec, err = c.eraseSteps(ctx, erasureAt{ch, id}, rec, version, c.queue == nil)
	if err != nil {
		return Erasure{}, err
	}
	if created || c.stuck(rec) {
		if err := c.queueErasure(ctx, ch, id, rec); err != nil {
			return Erasure{}, err
		}
	}
	return receipt(chat, id, rec), nil
}

// Forget is the forget tool's erasure (memory.Forgetter): the messages
// holding a.Entries (entry ids, as the model sees them in the view and
// zoom), or every message holding a.Match, erased as Erase erases them.
func (c *Routes) Forget(ctx context.Context, ch chatid.Chat, a wire.ForgetArgs) (Erasure, error) {
	switch {
	case a.Entries == nil && a.Match == "":
		return Erasure{}, api.BadRequest("entries", "name what to forget: entries (entry ids) or match (a text)")
	case a.Entries != nil && a.Match != "":
		return Erasure{}, api.BadRequest("entries", "name entries or match, not both")
	case a.Entries != nil && (len(a.Entries) == 0 || len(a.Entries) > MaxErase):
		return Erasure{}, api.BadRequest("entries", "entries holds 1 to %d entry ids, not %d", MaxErase, len(a.Entries))
	}
	req := EraseRequest{Match: a.Match}
	for _, id := range a.Entries {
		seq, err := c.log.MessageOf(ctx, ch, id)
		if errors.Is(err, store.ErrNotFound) {
			return Erasure{}, api.BadRequest("entries", "entry %d is not in the chat's log", id)
		}
		if err != nil {
			return Erasure{}, err
		}
		req.Seqs = append(req.Seqs, seq)
	}
	return c.Erase(ctx, ch.Tenant, ch.ID, req)
}

// requeueAfter is how long an erasure's images may wait for its queue
// message before a request about it sends another (the first may have
// been lost with a call cut off after its record was written).
const requeueAfter = time.Minute

// stuck reports whether the erasure's images have waited for its queue
// message longer than requeueAfter: to be released, or to be settled
// once due.
func (c *Routes) stuck(rec erasureRecord) bool {
	now := c.now().UnixMilli()
	if !rec.Released {
		return now-rec.Started > requeueAfter.Milliseconds()
	}
	return !rec.Settled && now-rec.ReleasedAt > (c.settle+requeueAfter).Milliseconds()
}

// queueErasure hands the release of the erasure's images (or their
// settling) to the queue, when there is one and they are not settled yet.
func (c *Routes) queueErasure(ctx context.Context, ch chatid.Chat, id string, rec erasureRecord) error {
	if rec.Settled || c.queue == nil {
		return nil
	}
	if err := c.queue.Send(ctx, eraseBody(ch, id), 0); err != nil {
		return fmt.Errorf("lifecycle: queueing the rest of erasure %s of %s: %w", id, ch.ID, err)
	}
	return nil
}

// planErasure finds the messages req names: it refuses a seq that starts
// no message, and an image no message names. A request by match or images
// of a chat larger than scanInCall, with a queue, is planned with its
// scan left to the erase task.
func (c *Routes) planErasure(ctx context.Context, ch chatid.Chat, req EraseRequest) (erasureRecord, error) {
	rec := erasureRecord{Started: c.now().UnixMilli(), Messages: []ErasedMessage{}}
	if req.Seqs == nil && c.queue != nil {
		n, err := c.log.Len(ctx, ch)
		if err != nil {
			return rec, err
		}
		if n > c.scanInCall {
			rec.Scan = &req
			return rec, nil
		}
	}
	return rec, c.plan(ctx, ch, req, &rec)
}

// plan records in rec the messages req names and the images they name,
// refusing a seq that starts no message and an image no message names.
func (c *Routes) plan(ctx context.Context, ch chatid.Chat, req EraseRequest, rec *erasureRecord) error {
	if req.Seqs != nil {
		for _, seq := range req.Seqs {
			ids, err := c.log.MessageEntries(ctx, ch, seq)
			if errors.Is(err, store.ErrNotFound) {
				return api.BadRequest("seqs", "seq %d is not the seq of a message of chat %s", seq, ch.ID)
			}
			if err != nil {
				return err
			}
			rec.Messages = append(rec.Messages, ErasedMessage{Seq: seq, Entries: ids})
		}
	} else {
		var err error
		if rec.Messages, rec.Described, err = c.findMessages(ctx, ch, req); err != nil {
			return err
		}
	}
	if err := c.namedBy(ctx, ch, rec); err != nil {
		return err
	}
	for _, n := range req.Images {
		if !slices.Contains(rec.Images, n) {
			return api.BadRequest("images", "no message of chat %s shows image %s", ch.ID, n)
		}
	}
	return nil
}

// namedBy records in rec the images its messages name.
func (c *Routes) namedBy(ctx context.Context, ch chatid.Chat, rec *erasureRecord) error {
	var names []string
	for _, m := range rec.Messages {
		es, err := c.log.Entries(ctx, ch, m.Entries[0], m.Entries[len(m.Entries)-1]+1)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Erased.IsZero() {
				names = append(names, refs.Names(e.Text)...)
			}
		}
	}
	rec.Images = uniq(names)
	return nil
}

// findMessages scans the chat for the live messages whose text (or the
// description of an image they name) holds req.Match literally, or that
// name one of req.Images; at most MaxErase. It returns them, and the
// images whose descriptions hold the match.
func (c *Routes) findMessages(ctx context.Context, ch chatid.Chat, req EraseRequest) ([]ErasedMessage, []string, error) {
	f := &finder{c: c, ch: ch, req: req, descs: map[string]bool{}}
	for from := int64(0); len(f.out) <= MaxErase; from += scanChunk {
		lgs, err := c.log.Read(ctx, ch, from, from+scanChunk)
		if err != nil {
			return nil, nil, err
		}
		es, err := c.log.Entries(ctx, ch, from, from+scanChunk)
		if err != nil {
			return nil, nil, err
		}
		if len(lgs) != len(es) {
			return nil, nil, fmt.Errorf("lifecycle: chat %s: the log read %d and %d entries from %d", ch.ID, len(lgs), len(es), from)
		}
		for k, lg := range lgs {
			if err := f.entry(ctx, es[k], !lg.Continues); err != nil {
				return nil, nil, err
			}
		}
		if len(lgs) < scanChunk {
			f.flush()
			break
		}
	}
	if len(f.out) > MaxErase {
		return nil, nil, api.BadRequest("match", "over %d messages match; erase them in smaller requests", MaxErase)
	}
	var described []string
	for n, holds := range f.descs {
		if holds {
			described = append(described, n)
		}
	}
	return f.out, uniq(described), nil
}

// finder is the scan of findMessages: the messages found, the one being
// read, and what it learned of image descriptions.
type finder struct {
	c     *Routes
	ch    chatid.Chat
	req   EraseRequest
	out   []ErasedMessage
	cur   *ErasedMessage // the live message being read
	hit   bool           // it matches
	descs map[string]bool
}

// flush ends the message being read, keeping it when it matched.
func (f *finder) flush() {
	if f.cur != nil && f.hit {
		f.out = append(f.out, *f.cur)
	}
	f.cur, f.hit = nil, false
}

// entry reads the next entry, which starts a message when starts.
func (f *finder) entry(ctx context.Context, e transcript.Entry, starts bool) error {
	if starts {
		f.flush()
		if e.Erased.IsZero() {
			f.cur = &ErasedMessage{Seq: e.I}
		}
	}
	if f.cur == nil || !e.Erased.IsZero() {
		return nil
	}
	f.cur.Entries = append(f.cur.Entries, e.I)
	names := refs.Names(e.Text)
	if f.req.Match == "" {
		f.hit = f.hit || slices.ContainsFunc(names, func(n string) bool { return slices.Contains(f.req.Images, n) })
		return nil
	}
	f.hit = f.hit || strings.Contains(e.Text, f.req.Match)
	for _, n := range names {
		holds, err := f.described(ctx, n)
		if err != nil {
			return err
		}
		f.hit = f.hit || holds
	}
	return nil
}

// described reports whether the description of image n holds the match.
func (f *finder) described(ctx context.Context, n string) (bool, error) {
	if holds, ok := f.descs[n]; ok {
		return holds, nil
	}
	d, err := f.c.images.Description(ctx, f.ch.Tenant, n)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, err
	}
	f.descs[n] = strings.Contains(d, f.req.Match)
	return f.descs[n], nil
}

// readErasure reads the erasure id of the incarnation ch.
func (c *Routes) readErasure(ctx context.Context, ch chatid.Chat, id string) (erasureRecord, int64, bool, error) {
	it, err := c.table.Get(ctx, erasureKey(ch, id))
	if errors.Is(err, store.ErrNotFound) {
		return erasureRecord{}, 0, false, nil
	}
	if err != nil {
		return erasureRecord{}, 0, false, fmt.Errorf("lifecycle: reading erasure %s: %w", id, err)
	}
	var rec erasureRecord
	if err := json.Unmarshal(it.Body, &rec); err != nil {
		return erasureRecord{}, 0, false, fmt.Errorf("lifecycle: erasure %s is corrupt: %w", id, err)
	}
	return rec, it.Version, true, nil
}

// writeErasure writes rec at version+1 and returns the new version.
func (c *Routes) writeErasure(ctx context.Context, at erasureAt, rec erasureRecord, version int64) (int64, error) {
	ch, id := at.ch, at.id
	body, err := rawjson.Of(rec)
	if err != nil {
		return 0, err
	}
	err = c.table.Update(ctx, store.Item{Key: erasureKey(ch, id), Body: body, Version: version + 1})
	if err != nil {
		return 0, fmt.Errorf("lifecycle: recording erasure %s: %w", id, err)
	}
	return version + 1, nil
}

// erasureAt names one erasure: of the incarnation ch, its id.
type erasureAt struct {
	ch chatid.Chat
	id string
}

// eraseSteps runs the steps of erasure at not done yet (rec as read at
// version): the tombstones and the lines taken back (always, in the call:
// nothing erased is shown once it answers), the images released and, once
// due, settled when release, and the count of the lines rebuilt; each step
// recorded before the next. A step a twin recorded first is read back and not run again.
func (c *Routes) eraseSteps(ctx context.Context, at erasureAt, rec erasureRecord, version int64, release bool) (erasureRecord, error) {
	var err error
	if rec.Scan != nil {
		if !release {
			return rec, nil // the erase task scans
		}
		if rec, version, err = c.scanErasure(ctx, at, rec, version); err != nil || rec.Finished != 0 {
			return rec, err
		}
	}
	if !rec.Erased {
		if err := c.eraseEntries(ctx, at.ch, &rec); err != nil {
			return rec, err
		}
		if version, err = c.writeErasure(ctx, at, rec, version); err != nil {
			return c.rereadOn(ctx, at, err)
		}
		// The erased words' old pages are free now; the embedded store's
		// file keeps no copy of them past this call.
		if err := c.Scrub(ctx); err != nil {
			return rec, err
		}
	}
	if release {
		if rec, version, err = c.imageSteps(ctx, at, rec, version); err != nil {
			return rec, err
		}
	}
	if !rec.Released || rec.Finished != 0 {
		return rec, nil
	}
	return c.countRebuilt(ctx, at, rec, version)
}

// imageSteps runs the erasure's steps on its images not done yet: their
// release, and once due their settling.
func (c *Routes) imageSteps(ctx context.Context, at erasureAt, rec erasureRecord, version int64) (erasureRecord, int64, error) {
	var err error
	if !rec.Released {
		if rec, version, err = c.releaseErased(ctx, at, rec, version); err != nil {
			return rec, version, err
		}
	}
	if rec.Released && !rec.Settled && c.settleDue(rec) {
		return c.settleErased(ctx, at, rec, version)
	}
	return rec, version, nil
}

// countRebuilt records how many of the erasure's lines are built again;
// the erasure is done (Finished) once they all are and its images are
// settled.
func (c *Routes) countRebuilt(ctx context.Context, at erasureAt, rec erasureRecord, version int64) (erasureRecord, error) {
	before, done := rec.Rebuilt, rec.Finished
	var err error
	if rec.Rebuilt, err = c.linesRebuilt(ctx, at.ch, rec.Nodes); err != nil {
		return rec, err
	}
	if rec.Rebuilt == len(rec.Nodes) && rec.Settled {
		rec.Finished = c.now().UnixMilli()
	}
	if rec.Rebuilt == before && rec.Finished == done {
		return rec, nil
	}
	if _, err = c.writeErasure(ctx, at, rec, version); err != nil {
		return c.rereadOn(ctx, at, err)
	}
	if rec.Finished != 0 {
		// The rows taken back and the images released are gone too.
		return rec, c.Scrub(ctx)
	}
	return rec, nil
}

// scanErasure is the erase task's first step of an erasure planned with
// its scan left to it: it finds the messages and images to erase, as the
// request would have, and records them in place of the request. A request
// the scan finds bad erases nothing: the erasure is done, and Refused
// says why.
func (c *Routes) scanErasure(ctx context.Context, at erasureAt, rec erasureRecord, version int64) (erasureRecord, int64, error) {
	err := c.plan(ctx, at.ch, *rec.Scan, &rec)
	var bad *fault.Error
	if errors.As(err, &bad) && bad.Code == fault.BadRequest {
		rec.Messages, rec.Images, rec.Nodes, rec.Deleted = []ErasedMessage{}, nil, []string{}, []string{}
		rec.Refused, rec.Erased, rec.Released, rec.Settled, rec.Finished = bad.Message, true, true, true, c.now().UnixMilli()
	} else if err != nil {
		return rec, version, err
	}
	rec.Scan = nil
	if version, err = c.writeErasure(ctx, at, rec, version); err != nil {
		rec, err = c.rereadOn(ctx, at, err)
		return rec, version, err
	}
	return rec, version, nil
}

// eraseEntries makes the entries of rec's messages tombstones and takes
// back the summary lines built from them, recording the nodes in rec.
func (c *Routes) eraseEntries(ctx context.Context, ch chatid.Chat, rec *erasureRecord) error {
	var ids []int64
	for _, m := range rec.Messages {
		ids = append(ids, m.Entries...)
	}
	if err := c.log.Erase(ctx, ch, ids, time.UnixMilli(rec.Started)); err != nil {
		return err
	}
	rec.Nodes = []string{}
	if er, ok := c.memory.(Eraser); ok && len(ids) > 0 {
		nodes, err := er.EraseLines(ctx, ch, ids)
		if err != nil {
			return err
		}
		rec.Nodes = append(rec.Nodes, nodes...)
	}
	rec.Erased = true
	return nil
}

// linesRebuilt counts the nodes built again (all of them without a
// memory that erases).
func (c *Routes) linesRebuilt(ctx context.Context, ch chatid.Chat, nodes []string) (int, error) {
	er, ok := c.memory.(Eraser)
	if !ok {
		return len(nodes), nil
	}
	return er.LinesRebuilt(ctx, ch, nodes)
}

// rereadOn answers the erasure as a twin recorded it when err is a lost
// race, else err.
func (c *Routes) rereadOn(ctx context.Context, at erasureAt, err error) (erasureRecord, error) {
	if !errors.Is(err, store.ErrConditionFailed) {
		return erasureRecord{}, err
	}
	rec, _, _, rerr := c.readErasure(ctx, at.ch, at.id)
	return rec, rerr
}

// releaseErased releases the chat's references to each image the erased
// messages named: it is kept for the chat when a live message of the
// chat names it, else both sides of the chat's reference go and the
// image is left Pending, for the settle step (settleErased) to delete
// once no append that found the old references can still be running.
//
// It is the image-reference protocol's other side (Chats.Hold): each
// image is released under its deletion lease, taken before anything
// else, and the chat's side of the reference is removed before the chat
// is scanned for the messages naming it. A writer that held the image
// before the lease and logs it after the scan either finds its reference
// gone or the lease live once it has stored the image (stillNamed), and
// names it again; or found it whole before the lease, and its messages
// are logged before the settle step scans the chat again. One that comes
// later waits out the lease, or finds the reference gone and writes it.
func (c *Routes) releaseErased(ctx context.Context, at erasureAt, rec erasureRecord, version int64) (erasureRecord, int64, error) {
	ch := at.ch
	rec.Deleted, rec.Kept, rec.Pending = []string{}, 0, nil
	err := c.underLeases(ctx, at, rec.Images, true, func(ctx context.Context, live map[string]bool, _ leases) error {
		for _, name := range rec.Images {
			kept := false
			if live[name] {
				var err error
				if kept, err = c.keepNamed(ctx, ch, name); err != nil {
					return err
				}
			}
			if !kept {
				if err := c.unreference(ctx, ch, name); err != nil {
					return err
				}
				rec.Pending = append(rec.Pending, name)
			} else {
				rec.Kept++
			}
			// Its description holding the erased words goes at once
			// (made again from the image when next needed).
			if err := c.forgetDescription(ctx, ch, rec, name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return rec, version, err
	}
	// With none pending there is nothing to settle.
	rec.Released, rec.ReleasedAt, rec.Settled = true, c.now().UnixMilli(), len(rec.Pending) == 0
	pending := rec.Pending
	version, err = c.writeErasure(ctx, at, rec, version)
	if err != nil {
		rec, err = c.rereadOn(ctx, at, err)
	}
	if err == nil {
		err = c.dropIfDeleted(ctx, ch, pending)
	}
	if err == nil && rec.Released && !rec.Settled && !c.settleDue(rec) {
		err = c.queueSettle(ctx, at, rec)
	}
	return rec, version, err
}

// forgetDescription deletes the description of image name when the
// erasure is by a match its description holds.
func (c *Routes) forgetDescription(ctx context.Context, ch chatid.Chat, rec erasureRecord, name string) error {
	if !slices.Contains(rec.Described, name) {
		return nil
	}
	return c.blobs.Delete(ctx, store.DescriptionKey(ch.Tenant, name))
}

// underLeases takes the deletion lease of each of names for erasure at
// (removing the chat's side of its reference when unref), reads which of
// them the chat's live messages name, runs fn, and gives the leases up.
func (c *Routes) underLeases(ctx context.Context, at erasureAt, names []string, unref bool, fn func(context.Context, map[string]bool, leases) error) error {
	held, err := c.leaseErased(ctx, at, names, unref)
	defer held.release(context.WithoutCancel(ctx), c.table)
	if err != nil {
		return err
	}
	live := map[string]bool{}
	if len(names) > 0 {
		if err := c.liveNames(ctx, at.ch, live); err != nil {
			return err
		}
	}
	return fn(ctx, live, held)
}

// settleDue reports whether the settle step of an erasure whose images
// are released may run: once every append that may have found the
// chat's old references has ended (SettleAfter), or at once when no
// image is pending.
func (c *Routes) settleDue(rec erasureRecord) bool {
	return len(rec.Pending) == 0 || c.now().UnixMilli() >= rec.ReleasedAt+c.settle.Milliseconds()
}

// queueSettle sends the erase task that settles the erasure's pending
// images when they are due (without a queue, a request about the
// erasure settles them once due).
func (c *Routes) queueSettle(ctx context.Context, at erasureAt, rec erasureRecord) error {
	if c.queue == nil {
		return nil
	}
	delay := time.Duration(rec.ReleasedAt+c.settle.Milliseconds()-c.now().UnixMilli()) * time.Millisecond
	if err := c.queue.Send(ctx, eraseBody(at.ch, at.id), max(delay, 0)); err != nil {
		return fmt.Errorf("lifecycle: queueing the settling of erasure %s of %s: %w", at.id, at.ch.ID, err)
	}
	return nil
}

// settleErased is the erasure's last step on its images, SettleAfter
// after their release: under its leases again, each pending image that a
// live message of the chat names now (an append that found the old
// references logged it after the release), or that the chat names again
// (an append since), is kept for the chat, its references written again;
// the others are deleted unless another chat names them.
func (c *Routes) settleErased(ctx context.Context, at erasureAt, rec erasureRecord, version int64) (erasureRecord, int64, error) {
	err := c.underLeases(ctx, at, rec.Pending, false, func(ctx context.Context, live map[string]bool, held leases) error {
		for _, name := range rec.Pending {
			again, err := c.chatNames(ctx, at.ch, name)
			if err != nil {
				return err
			}
			gone, err := c.releaseOne(ctx, at.ch, name, live[name] || again, held[name])
			if err != nil {
				return err
			}
			if gone {
				rec.Deleted = append(rec.Deleted, name)
			} else {
				rec.Kept++
			}
		}
		return nil
	})
	if err != nil {
		return rec, version, err
	}
	rec.Pending, rec.Settled = nil, true
	if version, err = c.writeErasure(ctx, at, rec, version); err != nil {
		rec, err = c.rereadOn(ctx, at, err)
	}
	return rec, version, err
}

// chatNames reports whether the chat's side of its reference to image
// name is there.
func (c *Routes) chatNames(ctx context.Context, ch chatid.Chat, name string) (bool, error) {
	_, err := c.table.Get(ctx, store.Key{PK: ch.PK(), SK: store.ChatImageSK(name)})
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("lifecycle: reading the reference to image %s: %w", name, err)
	}
	return true, nil
}

// dropIfDeleted deletes each of the pending images no chat names when
// the chat is being deleted (or gone): its deletion may have read the
// erasure before they were pending in it (dropPending).
func (c *Routes) dropIfDeleted(ctx context.Context, ch chatid.Chat, pending []string) error {
	if len(pending) == 0 {
		return nil
	}
	r, err := c.load(ctx, ch.Tenant, ch.ID)
	if err != nil || r.live(ch) {
		return err
	}
	return c.dropPending(ctx, ch, pending)
}

// dropPending deletes each of the images an erasure of the incarnation
// ch left pending, when no chat names it: the chat is being deleted, so
// no message of it will name them.
func (c *Chats) dropPending(ctx context.Context, ch chatid.Chat, pending []string) error {
	return inParallel(ctx, pending, func(ctx context.Context, name string) error {
		_, err := c.dropUnnamed(ctx, ch.Tenant, name, refName(ch))
		return err
	})
}

// dropErasure is dropPending for an erasure record the chat's deletion
// removes.
func (c *Chats) dropErasure(ctx context.Context, ch chatid.Chat, it store.Item) error {
	var rec erasureRecord
	if err := json.Unmarshal(it.Body, &rec); err != nil || len(rec.Pending) == 0 {
		return nil // a corrupt record names nothing to drop
	}
	return c.dropPending(ctx, ch, rec.Pending)
}

// leases are the deletion leases an erasure holds, by image name: the
// until of each, and the version it wrote.
type leases map[string]heldLease

type heldLease struct {
	key     store.Key
	until   int64
	version int64
}

// release gives the leases up.
func (l leases) release(ctx context.Context, table store.Table) {
	for _, h := range l {
		_ = table.Delete(ctx, h.key, h.version)
	}
}

// leaseErased takes the deletion lease of each of names for erasure at
// (waiting out another holder's), then, when unref, removes the chat's
// side of its reference to it.
func (c *Routes) leaseErased(ctx context.Context, at erasureAt, names []string, unref bool) (leases, error) {
	held := leases{}
	holder := refName(at.ch) + "/erasure/" + at.id
	for _, name := range names {
		lk := lockKey(at.ch.Tenant, name)
		until := c.now().Add(ImageLease).UnixMilli()
		body, _ := json.Marshal(lease{Until: until, Chat: holder})
		for try := 0; ; try++ {
			version, err := c.takeLease(ctx, lk, body, holder)
			if err == nil {
				held[name] = heldLease{key: lk, until: until, version: version}
				break
			}
			if !errors.Is(err, errLeased) || try == dropTries {
				return held, fmt.Errorf("lifecycle: taking the lease of image %s: %w", name, err)
			}
			if err := c.awaitLeases(ctx, at.ch.Tenant, []string{name}); err != nil {
				return held, err
			}
		}
		if !unref {
			continue
		}
		if err := c.table.Delete(ctx, store.Key{PK: at.ch.PK(), SK: store.ChatImageSK(name)}, 0); err != nil {
			return held, fmt.Errorf("lifecycle: deleting the reference to image %s: %w", name, err)
		}
	}
	return held, nil
}

// keepNamed writes again both sides of the chat's reference to image
// name, which a live message of it names, and reports whether the chat
// keeps it: not when the chat is being deleted (its deletion may have
// released the reference before it was written again).
func (c *Routes) keepNamed(ctx context.Context, ch chatid.Chat, name string) (bool, error) {
	if err := c.reference(ctx, ch, []string{name}); err != nil {
		return false, err
	}
	r, err := c.load(ctx, ch.Tenant, ch.ID)
	if err != nil {
		return false, err
	}
	return r.live(ch), nil
}

// releaseOne ends the chat's reference to image name under the erasure's
// lease h: when a live message of the chat names it (live) both sides of
// the reference are written again (keepNamed); otherwise, or when the
// chat is being deleted, both sides go, and the image when no other chat
// names it. It reports whether the image is
// gone.
func (c *Routes) releaseOne(ctx context.Context, ch chatid.Chat, name string, live bool, h heldLease) (bool, error) {
	if live {
		kept, err := c.keepNamed(ctx, ch, name)
		if err != nil || kept {
			return false, err
		}
	}
	if err := c.unreference(ctx, ch, name); err != nil {
		return false, err
	}
	named, err := c.named(ctx, ch.Tenant, name)
	if err != nil || named {
		return false, err
	}
	dctx, cancel := context.WithDeadline(ctx, time.UnixMilli(h.until).Add(-5*time.Second))
	defer cancel()
	if err := c.images.Delete(dctx, ch.Tenant, name); err != nil {
		return false, fmt.Errorf("lifecycle: %w", err)
	}
	return true, nil
}

// unreference removes both sides of the chat's reference to image name,
// the chat's first.
func (c *Routes) unreference(ctx context.Context, ch chatid.Chat, name string) error {
	if err := c.table.Delete(ctx, store.Key{PK: ch.PK(), SK: store.ChatImageSK(name)}, 0); err != nil {
		return fmt.Errorf("lifecycle: deleting the reference to image %s: %w", name, err)
	}
	if err := c.table.Delete(ctx, store.Key{PK: store.RefPK(ch.Tenant, name), SK: store.RefChatSK(refName(ch))}, 0); err != nil {
		return fmt.Errorf("lifecycle: removing the reference to image %s: %w", name, err)
	}
	return nil
}

// liveNames adds to live the images the chat's live entries name.
func (c *Routes) liveNames(ctx context.Context, ch chatid.Chat, live map[string]bool) error {
	for from := int64(0); ; from += scanChunk {
		es, err := c.log.Entries(ctx, ch, from, from+scanChunk)
		if err != nil {
			return err
		}
		for _, e := range es {
			if e.Erased.IsZero() {
				for _, n := range refs.Names(e.Text) {
					live[n] = true
				}
			}
		}
		if len(es) < scanChunk {
			return nil
		}
	}
}

// receipt is the answer telling of erasure id of chat.
func receipt(chat, id string, rec erasureRecord) Erasure {
	e := Erasure{Erasure: id, Chat: chat, Started: time.UnixMilli(rec.Started).UTC(), Messages: rec.Messages,
		Nodes: rec.Nodes, Rebuilt: rec.Rebuilt, ImagesDeleted: rec.Deleted, ImagesKept: rec.Kept, Done: rec.Finished != 0, Refused: rec.Refused}
	if e.Messages == nil {
		e.Messages = []ErasedMessage{}
	}
	if e.Nodes == nil {
		e.Nodes = []string{}
	}
	if e.ImagesDeleted == nil {
		e.ImagesDeleted = []string{}
	}
	if rec.Finished != 0 {
		f := time.UnixMilli(rec.Finished).UTC()
		e.Finished = &f
	}
	return e
}

// ErasureOf answers the receipt of erasure id of the chat, running the
// steps left that may run in the call (counting the lines rebuilt); a 404
// when the chat's current incarnation has no such erasure.
func (c *Routes) ErasureOf(ctx context.Context, tenant, chat, id string) (Erasure, error) {
	ch, _, err := c.ids.Current(ctx, tenant, chat)
	if err != nil {
		return Erasure{}, err
	}
	rec, version, found, err := c.readErasure(ctx, ch, id)
	if err != nil {
		return Erasure{}, err
	}
	if !found {
		return Erasure{}, api.NotFound("chat %s has no erasure %s", chat, id)
	}
	if rec.Finished == 0 {
		if rec, err = c.eraseSteps(ctx, erasureAt{ch, id}, rec, version, c.queue == nil); err != nil {
			return Erasure{}, err
		}
		if c.stuck(rec) {
			if err := c.queueErasure(ctx, ch, id, rec); err != nil {
				return Erasure{}, err
			}
		}
	}
	return receipt(chat, id, rec), nil
}

// eraseBody is the queue message continuing erasure id of ch.
func eraseBody(ch chatid.Chat, id string) string {
	m := tasks.For(tasks.Erase, ch)
	m.Run = id
	return m.Body()
}

// EraseTask is the handler of tasks.Erase: it runs the rest of the
// erasure msg names (releasing the erased messages' images, and, sent
// again SettleAfter later, settling them). A message of
// an incarnation deleted since, or of an erasure done, does nothing.
func (c *Routes) EraseTask(ctx context.Context, msg tasks.Message) error {
	if msg.Chat == "" || msg.Run == "" || !chatid.ValidInc(msg.Inc) {
		return nil // names nothing: dropped
	}
	ch := msg.ChatID()
	rec, version, found, err := c.readErasure(ctx, ch, msg.Run)
	if err != nil || !found || rec.Settled {
		return err
	}
	_, err = c.eraseSteps(ctx, erasureAt{ch, msg.Run}, rec, version, true)
	return err
}

func (c *Routes) handleErase(w http.ResponseWriter, r *http.Request) error {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	var req EraseRequest
	if err := api.DecodeJSON(r, &req); err != nil {
		return err
	}
	e, err := c.Erase(r.Context(), tenant, chat, req)
	if err != nil {
		return err
	}
	code := http.StatusAccepted
	if e.Done {
		code = http.StatusOK
	}
	api.WriteJSON(w, code, e)
	return nil
}

func (c *Routes) handleErasure(w http.ResponseWriter, r *http.Request) error {
	tenant, chat, err := api.TenantChat(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if len(id) != 24 || strings.Trim(id, "0123456789abcdef") != "" {
		return api.BadRequest("id", "%q is not an erasure id", id)
	}
	e, err := c.ErasureOf(r.Context(), tenant, chat, id)
	if err != nil {
		return err
	}
	api.WriteJSON(w, http.StatusOK, e)
	return nil
}
