package hooks

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/fault"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/parallel"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
)

// Descriptions reads the description stored beside an image
// (images.Store): store.ErrNotFound while it has none.
type Descriptions interface {
	Description(ctx context.Context, tenant, name string) (string, error)
}

// ChatImages tells which images a chat names (chatid.Registry).
type ChatImages interface {
	// Named returns the chat's current incarnation, as links to its
	// images are made through, and which of names it names, in one
	// batch read however many names.
	Named(ctx context.Context, tenant, chat string, names []string) (store.LinkChat, map[string]bool, error)
}

// ImageReader is the image store restore reads from (images.Store).
type ImageReader interface {
	// Get returns a stored image, its MimeType one of the accepted
	// formats' (images.Store.Get reads it from the bytes when the store
	// names none), or store.ErrNotFound.
	Get(ctx context.Context, tenant, name string) (images.Image, error)
	// Head tells whether an image is stored without reading it.
	Head(ctx context.Context, tenant, name string) (store.BlobInfo, error)
}

const (
	// DefaultBudget is the most base64 restore adds inline by default:
	// Lambda answers at most 6 MB, and the rest of the request needs room
	// too. A large request lowers it further (defaultBudget).
	DefaultBudget = 4_500_000
	// ResponseLimit is Lambda's synchronous response limit (6 MB), less
	// room for the answer's own fields and the Lambda response envelope.
	ResponseLimit = 6_000_000 - 64<<10
	// MaxBudget bounds budgetBytes, and with it the memory of one request.
	MaxBudget = 64 << 20
	// DefaultParallel is how many images one request reads at once.
	DefaultParallel = 8
	// DefaultReadTimeout bounds one read; a read that takes longer leaves
	// its ref as text rather than fail the request.
	DefaultReadTimeout = 10 * time.Second
	// DefaultLinkTTL is how long a link restore hands out stays valid: long
	// enough for the host to send the request, short enough not to leak.
	DefaultLinkTTL = 5 * time.Minute
	// MaxDescribedRefs bounds the refs of one request given a description
	// (and so the description reads and the bytes they add); the rest stay
	// bare refs, counted as pending.
	MaxDescribedRefs = 256
	// describedRefBytes is what one described ref may add to the answer
	// at most: the description and the ": " it follows, inside the Lambda
	// response. A description has no control characters
	// (images.CleanDescription) and nothing is HTML-escaped, so its worst
	// byte is a quote or a backslash: escaped in the answer, and that
	// escape escaped again in the response, four bytes.
	describedRefBytes = 4*images.MaxDescription + 8
	// MaxUnrestored bounds the unrestored list of one answer; the entries
	// past it are counted (unrestoredOmitted), so a request of many
	// distinct refs cannot make an answer Lambda will not send.
	MaxUnrestored = 1000
	// unrestoredBytes bounds what one unrestored entry takes of the Lambda
	// response (name, reason, quotes escaped); restoredBytes one restored
	// name; blockBytes what an image block adds around its data or URL.
	unrestoredBytes = 80
	restoredBytes   = 24
	blockBytes      = 160
)

// Modes of before-request.
const (
	ModeInline = "inline"
	ModeURL    = "url"
	// ModeDescribe sends every ref as text with its image's description,
	// for models that take no images.
	ModeDescribe = "describe"
)

// Restore serves before-request: exact ref blocks in the user messages and
// tool results of a provider request become that provider's image blocks.
type Restore struct {
	Images ImageReader
	// Linker makes short-lived links for formats that take image URLs. Nil:
	// no links; images past the budget stay as ref text.
	Linker store.Linker
	// Descriptions put each ref left as text next to its image's
	// description. Nil: refs left as text stay bare.
	Descriptions Descriptions
	Parallel     int           // reads at once; 0 is DefaultParallel
	ReadTimeout  time.Duration // 0 is DefaultReadTimeout
	LinkTTL      time.Duration // 0 is DefaultLinkTTL
	// Bounded holds every answer within ResponseLimit, as Lambda bounds a
	// response: a request that alone would pass it is refused (413), a
	// budgetBytes that would not fit is clamped to what does, and the
	// images past it stay as links or refs as the budget rule says. False
	// (the local server) takes budgetBytes as asked; a default budget
	// keeps within ResponseLimit either way.
	Bounded bool

	// Chats, when set, lets a request restore, link or describe only the
	// images its chat names: a ref to any other is left as text as if its
	// image were not stored, so a chat tells nothing of the images only
	// other chats name. Nil: every image of the tenant.
	Chats ChatImages
}

// NewRestore returns a Restore reading imgs and linking with linker (may be
// nil). When imgs also reads descriptions (images.Store does), refs left as
// text carry them.
func NewRestore(imgs ImageReader, linker store.Linker) *Restore {
	d, _ := imgs.(Descriptions)
	return &Restore{Images: imgs, Linker: linker, Descriptions: d}
}

// Register adds the before-request route to mux.
func (rs *Restore) Register(mux *http.ServeMux) {
	api.Handle(mux, "POST /v1/chats/{chat}/hooks/before-request", rs.beforeRequest)
}

type beforeRequestBody struct {
	Format      string        `json:"format"`
	Request     rawjson.Value `json:"request"`
	Mode        string        `json:"mode"`
	BudgetBytes *int64        `json:"budgetBytes"`
}

type beforeRequestAnswer struct {
	// Request is written around the rest (writeAnswer).
	Request rawjson.Node `json:"-"`
	wire.Restoration
}

func (rs *Restore) beforeRequest(w http.ResponseWriter, r *http.Request) error {
	var body beforeRequestBody
	tenant, chat, err := readHookRaw(r, &body, "request", &body.Request)
	if err != nil {
		return err
	}
	f, err := body.check()
	if err != nil {
		return err
	}
	rt, err := rs.plan(r.Context(), tenant, f, body)
	if err != nil {
		return err
	}
	rt.admit(chat)
	answer := rt.run()
	return writeAnswer(w, "request", answer.Request, answer)
}

// check checks the body's fields but the request itself, which its format
// parses, and defaults its mode.
func (b *beforeRequestBody) check() (format, error) {
	f, ok := formatOf(b.Format)
	if !ok {
		return nil, api.BadRequest("format", "format %q is not pi, anthropic, bedrock or openai", b.Format)
	}
	switch b.Mode {
	case "":
		b.Mode = ModeInline
	case ModeInline, ModeURL, ModeDescribe:
	default:
		return nil, api.BadRequest("mode", "mode %q is not inline, url or describe", b.Mode)
	}
	if b.BudgetBytes != nil && (*b.BudgetBytes < 0 || *b.BudgetBytes > MaxBudget) {
		return nil, api.BadRequest("budgetBytes", "budgetBytes must be 0 to %d, not %d", MaxBudget, *b.BudgetBytes)
	}
	if b.Request.IsNull() {
		return nil, api.BadRequest("request", "request is required: the provider request body")
	}
	return f, nil
}

// restoration is one before-request at work on one provider request. Its
// steps are its methods, run in order: plan (what the answer may take, the
// order it is spent in, and which names to read), read, fill (each ref
// block an image, a link or text, newest first) and answer (descriptions,
// then the request rebuilt). Only a malformed request fails it; every store problem leaves
// a ref as text, with its reason.
type restoration struct {
	*Restore
	ctx    context.Context
	tenant string
	mode   string
	walk   *walk
	build  func() rawjson.Node
	// links: the format takes image URLs and there is a Linker.
	links bool
	// chat is the incarnation links are made through (admit).
	chat store.LinkChat

	// order is the slots newest first (walk.newestFirst): what the answer
	// may take is spent in it.
	order []int
	// first is where each name is first in the request, for the answer's
	// lists.
	first map[string]int
	// What the answer may still take, each spent in that order; what does
	// not fit stays a ref:
	inline     *InlineBudget // bytes of base64 inline (the budget)
	answerLeft int64         // bytes added to the answer of any kind: inline images, links, descriptions, the lists of names (math.MaxInt64: nothing bounds it)
	imagesLeft int           // images restored: what the provider takes, less the images the request carries

	names   []string            // the distinct names to read, newest first
	fetched map[string]*fetched // what was read of each

	answer   beforeRequestAnswer
	restored map[string]bool
	listed   map[Unrestored]bool
	asText   *textRefs
	linked   map[string]string // one link per name per request
}

// plan parses the request and sets what the answer may take. The answer
// keeps within ResponseLimit when its budget is the default one or the
// deployment is Bounded: everything restore adds to it (inline images,
// links, descriptions, the lists of names) fits in what the request leaves
// of Lambda's response.
func (rs *Restore) plan(ctx context.Context, tenant string, f format, body beforeRequestBody) (*restoration, error) {
	size := answerSize(body.Request)
	inline := defaultBudget(size)
	if body.BudgetBytes != nil {
		inline = *body.BudgetBytes
	}
	if rs.Bounded {
		left := ResponseLimit - size
		if left < 0 {
			return nil, &fault.Error{Code: fault.TooLarge, Field: "request",
				Message: fmt.Sprintf("the request alone would make an answer over the %d bytes this deployment can send; send fewer messages, or upload images and send their refs", ResponseLimit)}
		}
		inline = min(inline, left)
	}
	w, build, err := f.parse(body.Request)
	if err != nil {
		return nil, err
	}
	rt := &restoration{Restore: rs, ctx: ctx, tenant: tenant, mode: body.Mode, walk: w, build: build,
		order: w.newestFirst(), links: f.urls() && rs.Linker != nil, answerLeft: math.MaxInt64,
		answer:   beforeRequestAnswer{Restoration: wire.Restoration{Restored: []string{}, Unrestored: []Unrestored{}}},
		restored: map[string]bool{}, listed: map[Unrestored]bool{}, linked: map[string]string{}}
	rt.first = make(map[string]int)
	for i := len(w.slots) - 1; i >= 0; i-- {
		rt.first[w.slots[i].name] = i
	}
	if body.BudgetBytes == nil || rs.Bounded {
		rt.answerLeft = canAdd(size, w)
	}
	if rt.mode == ModeDescribe {
		rt.asText = newTextRefs(describableRefs(MaxDescribedRefs, rt.answerLeft))
		return rt, nil
	}
	// Descriptions are given their bytes first: the budget only shrinks for a
	// request that is large.
	describable := 0
	if rs.Descriptions != nil {
		describable = describableRefs(min(len(w.slots), MaxDescribedRefs), rt.answerLeft)
	}
	rt.asText = newTextRefs(describable)
	rt.answerLeft -= int64(describable) * describedRefBytes
	rt.inline = NewInlineBudget(min(inline, rt.answerLeft), 0)
	// Each distinct name is read once, and only names of this request's
	// ref blocks are read at all. No more images are restored than the
	// provider takes (imagesLeft), so no more names are read than twice that:
	// the images that may be found, and as many again that may be missing.
	// Work and memory go with the distinct names read and the answer,
	// not with how many ref blocks repeat them.
	rt.imagesLeft = max(0, f.maxImages()-w.images)
	seen := map[string]bool{}
	for _, i := range rt.order {
		s := &w.slots[i]
		if s.canImage && !seen[s.name] && len(rt.names) < 2*rt.imagesLeft {
			seen[s.name] = true
			rt.names = append(rt.names, s.name)
		}
	}
	return rt, nil
}

// admit lets the restoration read only the images chat names, when Chats
// is set: one batch read of the names it may read, link or describe (the
// planned names, and as many more as may be described). A failed read
// leaves every ref as text, with the failure's reason.
func (rt *restoration) admit(chat string) {
	rt.chat = store.LinkChat{Tenant: rt.tenant, Chat: chat}
	if rt.Chats == nil {
		return
	}
	asked := slices.Clone(rt.names)
	seen := map[string]bool{}
	for _, n := range asked {
		seen[n] = true
	}
	more := 0
	for _, i := range rt.order {
		if more == rt.asText.limit {
			break
		}
		if n := rt.walk.slots[i].name; !seen[n] {
			seen[n] = true
			asked = append(asked, n)
			more++
		}
	}
	only := &chatNamed{imgs: rt.Images}
	var err error
	if rt.chat, only.named, err = rt.Chats.Named(rt.ctx, rt.tenant, chat, asked); err != nil {
		api.Logger(rt.ctx).Warn("restore: reading which images the chat names", "err", err)
		only.err, rt.chat = err, store.LinkChat{}
	}
	admitted := *rt.Restore
	admitted.Images = only
	if rt.Descriptions != nil {
		only.descs = rt.Descriptions
		admitted.Descriptions = only
	}
	rt.Restore = &admitted
}

// chatNamed reads only the images a chat names: any other is not found;
// every read fails with err when telling which it names failed.
type chatNamed struct {
	imgs  ImageReader
	descs Descriptions
	named map[string]bool
	err   error
}

func (c *chatNamed) admit(name string) error {
	if c.err != nil {
		return c.err
	}
	if !c.named[name] {
		return fmt.Errorf("image %s: not named by the chat: %w", name, store.ErrNotFound)
	}
	return nil
}

func (c *chatNamed) Get(ctx context.Context, tenant, name string) (images.Image, error) {
	if err := c.admit(name); err != nil {
		return images.Image{}, err
	}
	return c.imgs.Get(ctx, tenant, name)
}

func (c *chatNamed) Head(ctx context.Context, tenant, name string) (store.BlobInfo, error) {
	if err := c.admit(name); err != nil {
		return store.BlobInfo{}, err
	}
	return c.imgs.Head(ctx, tenant, name)
}

func (c *chatNamed) Description(ctx context.Context, tenant, name string) (string, error) {
	if err := c.admit(name); err != nil {
		return "", err
	}
	return c.descs.Description(ctx, tenant, name)
}

// run takes the planned restoration through its steps.
func (rt *restoration) run() beforeRequestAnswer {
	if rt.mode == ModeDescribe {
		rt.describeAll()
		return rt.finish()
	}
	rt.read()
	rt.fill()
	return rt.finish()
}

// canAdd is how many bytes restore may add to the answer to a request of
// size (answerSize) and stay within ResponseLimit: what the request
// leaves, less what the lists of names the answer carries may take.
func canAdd(size int64, w *walk) int64 {
	names := map[string]bool{}
	for _, s := range w.slots {
		if len(names) == MaxUnrestored {
			break
		}
		names[s.name] = true
	}
	lists := int64(len(names))*unrestoredBytes + int64(MaxImagesOpenAI)*restoredBytes
	return max(0, ResponseLimit-size-lists)
}

// describableRefs is how many refs left as text may get a description:
// at most n, and no more than answerLeft bytes hold.
func describableRefs(n int, answerLeft int64) int {
	return int(min(int64(n), answerLeft/describedRefBytes))
}

// unrestored adds u to the answer's list, or counts it past MaxUnrestored.
func (a *beforeRequestAnswer) unrestored(u Unrestored) {
	if len(a.Unrestored) < MaxUnrestored {
		a.Unrestored = append(a.Unrestored, u)
		return
	}
	a.UnrestoredOmitted++
}

// defaultBudget is the inline budget of a request that names none: at most
// DefaultBudget, and never more than leaves the answer, request included,
// under Lambda's response limit.
func defaultBudget(size int64) int64 {
	return max(0, min(DefaultBudget, ResponseLimit-size))
}

// answerSize is what req takes of a Lambda response: the answer travels
// inside it as a JSON string (lambdahttp encodes it without HTML escaping),
// where every quote and backslash of the request gains one byte; base64
// gains nothing.
func answerSize(req rawjson.Value) int64 {
	return int64(len(req) + bytes.Count(req, []byte{'"'}) + bytes.Count(req, []byte{'\\'}))
}

// fetched is what restore learned about one image.
type fetched struct {
	data []byte // read: the image's bytes, encoded as base64 into the answer
	// uses counts the ref blocks naming the image where one can go; once,
	// for an image inline at more than one, is its base64 encoded once.
	uses   int
	once   *rawjson.Encoded
	mime   string
	width  int
	height int
	read   bool  // the bytes were read
	exists bool  // known to be stored
	err    error // not found, or the store failed
}

// size is what the image takes inline: its base64.
func (f *fetched) size() int64 { return int64(base64.StdEncoding.EncodedLen(len(f.data))) }

// read learns what each planned name holds: with every image linked (mode
// url), only whether it is stored; else its bytes, as far as the budget
// goes (reads).
func (rt *restoration) read() {
	rt.fetched = make(map[string]*fetched, len(rt.names))
	for _, n := range rt.names {
		rt.fetched[n] = &fetched{}
	}
	for _, s := range rt.walk.slots {
		if f := rt.fetched[s.name]; f != nil && s.canImage {
			f.uses++
		}
	}
	if rt.links && rt.mode == ModeURL {
		parallel.Each(len(rt.names), rt.parallel(), func(k int) { rt.head(rt.names[k]) })
		return
	}
	rt.reads()
}

// reads reads the planned images, at most rt.parallel() at once, newest
// first. Once the images read so far, in that order, pass the
// budget, no later one can be inline (see inlined), so the rest are not
// read: they are only checked to exist when they may be linked, else left
// for the budget. This bounds a request's memory by the budget plus the
// reads in flight.
func (rt *restoration) reads() {
	var mu sync.Mutex
	done := make([]bool, len(rt.names))
	cut := -1 // index of the name whose read passed the budget
	next := 0 // names[:next] are done and summed
	var sum int64
	parallel.Each(len(rt.names), rt.parallel(), func(k int) {
		name := rt.names[k]
		mu.Lock()
		beyond := cut >= 0 && k > cut
		mu.Unlock()
		switch {
		case beyond && !rt.links:
			return
		case beyond:
			rt.head(name)
			return
		}
		rt.readImage(name)
		mu.Lock()
		defer mu.Unlock()
		done[k] = true
		for cut < 0 && next < len(rt.names) && done[next] {
			sum += rt.fetched[rt.names[next]].size()
			if sum > rt.inline.Left() {
				cut = next
			}
			next++
		}
	})
}

// head learns whether name is stored, without reading it.
func (rt *restoration) head(name string) {
	f := rt.fetched[name]
	ctx, cancel := rt.readCtx(rt.ctx)
	defer cancel()
	info, err := rt.Images.Head(ctx, rt.tenant, name)
	if err != nil {
		f.err = err
		return
	}
	f.exists, f.mime = true, info.ContentType
}

// readImage reads name's image; its type is the store's (ImageReader).
func (rt *restoration) readImage(name string) {
	f := rt.fetched[name]
	ctx, cancel := rt.readCtx(rt.ctx)
	defer cancel()
	img, err := rt.Images.Get(ctx, rt.tenant, name)
	if err != nil {
		f.err = err
		return
	}
	f.data, f.mime, f.read, f.exists = img.Data, img.MimeType, true, true
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(img.Data)); err == nil {
		f.width, f.height = cfg.Width, cfg.Height
	}
}

// fill puts an image, a link or text in the place of each ref block,
// newest first.
func (rt *restoration) fill() {
	for _, i := range rt.order {
		rt.place(&rt.walk.slots[i])
	}
}

// place fills the ref block of s, or leaves it as text with its reason.
func (rt *restoration) place(s *slot) {
	if !s.canImage {
		rt.leave(s, ReasonFormat)
		return
	}
	g := rt.fetched[s.name]
	if rt.imagesLeft == 0 || g == nil {
		rt.leave(s, ReasonLimit)
		return
	}
	if g.err != nil {
		rt.leave(s, reasonOf(g.err))
		return
	}
	p := picture{name: s.name, mimeType: g.mime}
	if rt.inlined(g) {
		if g.once == nil && g.uses > 1 {
			g.once = &rawjson.Encoded{}
		}
		p.data, p.once = g.data, g.once
	} else {
		url, reason := rt.link(s.name, g)
		if reason != "" {
			rt.leave(s, reason)
			return
		}
		p.url = url
	}
	s.fill(p)
	rt.imagesLeft--
	if !rt.restored[s.name] {
		rt.restored[s.name] = true
		rt.answer.Restored = append(rt.answer.Restored, s.name)
	}
	rt.answer.Images++
	rt.answer.EstimatedImageTokens += imageTokens(g.width, g.height)
}

// inlined reports whether g goes inline, and spends what it takes of the
// inline budget (newest first, closing at the first image that does not
// fit: every older image is linked or stays text) and of the answer.
func (rt *restoration) inlined(g *fetched) bool {
	size := g.size()
	if rt.links && rt.mode == ModeURL || !g.read || size+blockBytes > rt.answerLeft {
		rt.inline.Close()
		return false
	}
	if !rt.inline.Take(size) {
		return false
	}
	rt.answerLeft -= size + blockBytes
	rt.answer.InlineBytes += size
	return true
}

// link returns the link to name's image for a ref past the budget, or why
// the ref stays text.
func (rt *restoration) link(name string, g *fetched) (url, reason string) {
	if !rt.links || !g.exists {
		return "", ReasonBudget
	}
	url, ok := rt.linked[name]
	if !ok {
		ttl := rt.LinkTTL
		if ttl <= 0 {
			ttl = DefaultLinkTTL
		}
		var err error
		if url, err = rt.Linker.URL(rt.ctx, store.ImageKey(rt.tenant, name), rt.chat, ttl); err != nil {
			api.Logger(rt.ctx).Warn("restore: link failed", "image", name, "err", err)
			url = ""
		}
		rt.linked[name] = url
	}
	if url == "" {
		return "", ReasonUnavailable
	}
	cost := int64(len(url)) + blockBytes
	if cost > rt.answerLeft {
		return "", ReasonBudget // the answer holds no more
	}
	rt.answerLeft -= cost
	return url, ""
}

// leave leaves the ref of s as text, listed once per name and reason.
func (rt *restoration) leave(s *slot, reason string) {
	u := Unrestored{Name: s.name, Reason: reason}
	if !rt.listed[u] {
		rt.listed[u] = true
		rt.answer.unrestored(u)
	}
	rt.asText.add(s)
	rt.answer.Images++
	rt.answer.EstimatedImageTokens += imageTokens(0, 0)
}

// describeAll answers mode describe: every ref stays text, with its
// image's description, reported with reason "describe"; no image is read.
func (rt *restoration) describeAll() {
	seen := map[string]bool{}
	for _, i := range rt.order {
		s := &rt.walk.slots[i]
		if !seen[s.name] {
			seen[s.name] = true
			rt.answer.unrestored(Unrestored{Name: s.name, Reason: ReasonDescribe})
		}
		rt.asText.add(s)
	}
	rt.walk.slots = nil // what build needs is held by the slots kept
}

// finish describes the refs left as text, counts the images the request
// already carries (they are left as they are) and rebuilds the request.
func (rt *restoration) finish() beforeRequestAnswer {
	rt.inRequestOrder()
	rt.answer.Images += rt.walk.images
	rt.answer.EstimatedImageTokens += rt.walk.images * imageTokens(0, 0)
	rt.describe()
	rt.answer.Request = rt.build()
	return rt.answer
}

// inRequestOrder sorts the answer's lists by where each name is first in
// the request: they are spent newest first, but a host reads them in the
// order of its messages.
func (rt *restoration) inRequestOrder() {
	slices.SortStableFunc(rt.answer.Restored, func(a, b string) int { return cmp.Compare(rt.first[a], rt.first[b]) })
	slices.SortStableFunc(rt.answer.Unrestored, func(a, b Unrestored) int { return cmp.Compare(rt.first[a.Name], rt.first[b.Name]) })
}

// textRefs are the ref blocks left as text. Only the first limit (at most
// MaxDescribedRefs, and what the answer has room for) may get a
// description, so only those slots are kept; of the rest, only their
// names, which count as pending. Keeping no more lets the parsed blocks of
// a request of many refs go before its answer is built.
type textRefs struct {
	limit int
	slots []slot
	more  map[string]bool
}

func newTextRefs(limit int) *textRefs { return &textRefs{limit: limit, more: map[string]bool{}} }

func (t *textRefs) add(s *slot) {
	if len(t.slots) < t.limit {
		t.slots = append(t.slots, *s)
		return
	}
	t.more[s.name] = true
}

// describe turns the ref of each slot kept in asText into "[image <name>:
// <description>]" where the image has a description, reading each name's
// once, at most rt.parallel() at once. An image with no description (or
// beyond that bound, or whose description could not be read) is counted as
// pending. Text that merely mentions a ref is never a slot, so it is never
// touched.
func (rt *restoration) describe() {
	descs := map[string]string{}
	if rt.Descriptions != nil && len(rt.asText.slots) > 0 {
		var names []string
		for _, s := range rt.asText.slots {
			if _, ok := descs[s.name]; !ok {
				descs[s.name] = ""
				names = append(names, s.name)
			}
		}
		got := make([]string, len(names))
		parallel.Each(len(names), rt.parallel(), func(k int) {
			ctx, cancel := rt.readCtx(rt.ctx)
			defer cancel()
			d, err := rt.Descriptions.Description(ctx, rt.tenant, names[k])
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				api.Logger(ctx).Warn("restore: reading a description", "image", names[k], "err", err)
			}
			got[k] = d
		})
		for k, n := range names {
			descs[n] = got[k]
		}
	}
	pending := map[string]bool{}
	for i := range rt.asText.slots {
		s := &rt.asText.slots[i]
		d := descs[s.name]
		if d == "" {
			pending[s.name] = true
			continue
		}
		s.text(DescribedRef(s.name, d))
		rt.answer.Described++
	}
	for n := range rt.asText.more {
		if descs[n] == "" {
			pending[n] = true
		}
	}
	rt.answer.PendingDescriptions = len(pending)
}

// DescribedRef is the text a described ref becomes:
// "[image <name>: <description>]".
func DescribedRef(name, description string) string {
	return "[image " + name + ": " + description + "]"
}

func (rs *Restore) parallel() int {
	if rs.Parallel > 0 {
		return rs.Parallel
	}
	return DefaultParallel
}

func (rs *Restore) readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	t := rs.ReadTimeout
	if t <= 0 {
		t = DefaultReadTimeout
	}
	return context.WithTimeout(ctx, t)
}

// imageTokens estimates an image's input tokens the way Anthropic documents
// it (width x height / 750, after scaling the long side to at most 1568 px),
// capped at 1600. An image of unknown size counts as the cap.
func imageTokens(width, height int) int {
	const maxTokens, maxSide = 1600, 1568
	if width <= 0 || height <= 0 {
		return maxTokens
	}
	w, h := float64(width), float64(height)
	if long := max(w, h); long > maxSide {
		w, h = w*maxSide/long, h*maxSide/long
	}
	return min(maxTokens, int(w*h/750+0.999))
}
