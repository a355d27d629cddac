package hooks

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/rawjson"
	"github.com/durachat/durachat/shared/store"
)

// Descriptions reads the description stored beside an image
// (images.Store): store.ErrNotFound while it has none.
type Descriptions interface {
	Description(ctx context.Context, tenant, name string) (string, error)
}

// ImageReader is the image store restore reads from (images.Store).
type ImageReader interface {
	// Get returns a stored image, or store.ErrNotFound.
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
	// AnswerLimit, when set, bounds every answer, as Lambda bounds a
	// response (ResponseLimit): a budgetBytes that would not fit is
	// clamped to what does, and the images past it stay as links or refs
	// as the budget rule says. 0 (the local server) takes budgetBytes as
	// asked.
	AnswerLimit int64
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
	Request rawjson.Value `json:"-"`
	wire.Restoration
}

func (rs *Restore) beforeRequest(w http.ResponseWriter, r *http.Request) error {
	var body beforeRequestBody
	tenant, _, err := readHook(r, &body)
	if err != nil {
		return err
	}
	f, ok := formatOf(body.Format)
	if !ok {
		return api.BadRequest("format", "format %q is not pi, anthropic, bedrock or openai", body.Format)
	}
	switch body.Mode {
	case "":
		body.Mode = ModeInline
	case ModeInline, ModeURL, ModeDescribe:
	default:
		return api.BadRequest("mode", "mode %q is not inline, url or describe", body.Mode)
	}
	budget := defaultBudget(body.Request)
	if body.BudgetBytes != nil {
		if *body.BudgetBytes < 0 || *body.BudgetBytes > MaxBudget {
			return api.BadRequest("budgetBytes", "budgetBytes must be 0 to %d, not %d", MaxBudget, *body.BudgetBytes)
		}
		budget = *body.BudgetBytes
	}
	if body.Request.IsNull() {
		return api.BadRequest("request", "request is required: the provider request body")
	}
	if rs.AnswerLimit > 0 {
		room := rs.AnswerLimit - answerSize(body.Request)
		if room < 0 {
			return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Field: "request",
				Message: fmt.Sprintf("the request alone would make an answer over the %d bytes this deployment can send; send fewer messages, or upload images and send their refs", rs.AnswerLimit)}
		}
		budget = min(budget, room)
	}
	// A clamped budget, like a default one, keeps room for descriptions.
	answer, err := rs.restore(r.Context(), tenant, f, body.Request, body.Mode, budget, body.BudgetBytes == nil || rs.AnswerLimit > 0)
	if err != nil {
		return err
	}
	return writeAnswer(w, "request", answer.Request, answer)
}

// spare is what restore may add to the answer to req and stay within the
// response limit: what the request leaves, less room for the lists of
// names the answer carries.
func (rs *Restore) spare(req rawjson.Value, w *walk) int64 {
	limit := int64(ResponseLimit)
	if rs.AnswerLimit > 0 {
		limit = min(limit, rs.AnswerLimit)
	}
	names := map[string]bool{}
	for _, s := range w.slots {
		if len(names) == MaxUnrestored {
			break
		}
		names[s.name] = true
	}
	lists := int64(len(names))*unrestoredBytes + int64(MaxImagesOpenAI)*restoredBytes
	return max(0, limit-answerSize(req)-lists)
}

// describableRefs is how many refs left as text may get a description:
// at most n, and no more than spare has room for.
func describableRefs(n int, spare int64) int {
	return int(min(int64(n), spare/describedRefBytes))
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
func defaultBudget(req rawjson.Value) int64 {
	return max(0, min(DefaultBudget, ResponseLimit-answerSize(req)))
}

// answerSize is what req takes of a Lambda response: the answer travels
// inside it as a JSON string (lambdahttp encodes it without HTML escaping),
// where every quote and backslash of the request gains one byte; base64
// gains nothing.
func answerSize(req rawjson.Value) int64 {
	n := int64(len(req))
	for _, c := range req {
		if c == '"' || c == '\\' {
			n++
		}
	}
	return n
}

// fetched is what restore learned about one image.
type fetched struct {
	b64    string // read: the image as base64
	mime   string
	width  int
	height int
	read   bool  // the bytes were read
	exists bool  // known to be stored
	err    error // not found, or the store failed
}

func (f *fetched) size() int64 { return int64(len(f.b64)) }

// restore swaps the ref blocks of req for images. Only a malformed request
// fails it; every store problem leaves a ref as text, reported. A ref left
// as text carries its image's description (describe). With keepRoom (a
// default budget, or a deployment with an answer limit) everything restore
// adds to the answer (inline images, links, descriptions, the lists of
// names) fits in what the request leaves of Lambda's response: what does
// not fit stays a ref, with reason budget.
func (rs *Restore) restore(ctx context.Context, tenant string, f format, req rawjson.Value, mode string, budget int64, keepRoom bool) (beforeRequestAnswer, error) {
	w, build, err := f.parse(req)
	if err != nil {
		return beforeRequestAnswer{}, err
	}
	spare := int64(math.MaxInt64) // what restore may still add to the answer
	if keepRoom {
		spare = rs.spare(req, w)
	}
	if mode == ModeDescribe {
		return rs.describeAll(ctx, tenant, w, build, spare)
	}
	// Descriptions are given room first: the budget only shrinks for a
	// request that is large.
	describable := 0
	if rs.Descriptions != nil {
		describable = describableRefs(min(len(w.slots), MaxDescribedRefs), spare)
	}
	if keepRoom {
		spare -= int64(describable) * describedRefBytes
		budget = min(budget, spare)
	}
	// Each distinct name is read once, and only names of this request's
	// ref blocks are read at all. No more images are restored than the
	// provider takes (room), so no more names are read than twice that:
	// room that may be found, and as many again that may be missing.
	// Work and memory go with the distinct names read and the answer,
	// not with how many ref blocks repeat them.
	room := max(0, f.maxImages()-w.images)
	var names []string
	seen := map[string]bool{}
	for _, s := range w.slots {
		if s.canImage && !seen[s.name] && len(names) < 2*room {
			seen[s.name] = true
			names = append(names, s.name)
		}
	}
	links := f.urls() && rs.Linker != nil
	allLinks := links && mode == ModeURL
	var got map[string]*fetched
	if allLinks {
		got = rs.heads(ctx, tenant, names)
	} else {
		got = rs.reads(ctx, tenant, names, budget, links)
	}

	answer := beforeRequestAnswer{Restoration: wire.Restoration{Restored: []string{}, Unrestored: []Unrestored{}}}
	restored := map[string]bool{}
	unrestored := map[Unrestored]bool{}
	asText := newTextRefs(describable)
	leave := func(s *slot, reason string) {
		u := Unrestored{Name: s.name, Reason: reason}
		if !unrestored[u] {
			unrestored[u] = true
			answer.unrestored(u)
		}
		asText.add(s)
		answer.Images++
		answer.EstimatedImageTokens += imageTokens(0, 0)
	}
	// The budget is spent in request order and closes at the first image
	// that does not fit: every image after it is linked (or stays text),
	// so what is inline depends only on the request, and a conversation
	// that grows at its end keeps its inline prefix (and prompt cache).
	var used, added int64 // inline base64; everything added to the answer
	over := false
	filled := 0
	linked := map[string]string{} // one link per name per request
	for _, s := range w.slots {
		if !s.canImage {
			leave(s, ReasonFormat)
			continue
		}
		g := got[s.name]
		if filled == room || g == nil {
			leave(s, ReasonLimit)
			continue
		}
		if g.err != nil {
			leave(s, reasonOfRead(g.err))
			continue
		}
		p := picture{name: s.name, mimeType: g.mime}
		switch {
		case !allLinks && !over && g.read && used+g.size() <= budget && added+g.size()+blockBytes <= spare:
			p.b64 = g.b64
			used += g.size()
			added += g.size() + blockBytes
		default:
			over = true
			if !links || !g.exists {
				leave(s, ReasonBudget)
				continue
			}
			url, ok := linked[s.name]
			if !ok {
				var err error
				if url, err = rs.link(ctx, tenant, s.name); err != nil {
					api.Logger(ctx).Warn("restore: link failed", "image", s.name, "err", err)
					url = ""
				}
				linked[s.name] = url
			}
			if url == "" {
				leave(s, ReasonUnavailable)
				continue
			}
			if cost := int64(len(url)) + blockBytes; added+cost <= spare {
				added += cost
			} else {
				leave(s, ReasonBudget) // no room left in the answer
				continue
			}
			p.url = url
		}
		if err := s.fill(p); err != nil {
			return beforeRequestAnswer{}, err
		}
		filled++
		if !restored[s.name] {
			restored[s.name] = true
			answer.Restored = append(answer.Restored, s.name)
		}
		answer.Images++
		answer.EstimatedImageTokens += imageTokens(g.width, g.height)
	}
	answer.InlineBytes = used
	answer.Images += w.images
	answer.EstimatedImageTokens += w.images * imageTokens(0, 0)
	rs.describe(ctx, tenant, asText, &answer)
	if answer.Request, err = build(); err != nil {
		return beforeRequestAnswer{}, err
	}
	return answer, nil
}

// describeAll answers mode describe: every ref stays text, with its
// image's description, reported with reason "describe"; no image is read.
// Images the request already carries inline are left as they are.
func (rs *Restore) describeAll(ctx context.Context, tenant string, w *walk, build func() (rawjson.Value, error), spare int64) (beforeRequestAnswer, error) {
	answer := beforeRequestAnswer{Restoration: wire.Restoration{Restored: []string{}, Unrestored: []Unrestored{},
		Images: w.images, EstimatedImageTokens: w.images * imageTokens(0, 0)}}
	asText := newTextRefs(describableRefs(MaxDescribedRefs, spare))
	seen := map[string]bool{}
	for _, s := range w.slots {
		if !seen[s.name] {
			seen[s.name] = true
			answer.unrestored(Unrestored{Name: s.name, Reason: ReasonDescribe})
		}
		asText.add(s)
	}
	w.slots = nil // what build needs is held by the slots kept
	rs.describe(ctx, tenant, asText, &answer)
	var err error
	if answer.Request, err = build(); err != nil {
		return beforeRequestAnswer{}, err
	}
	return answer, nil
}

// textRefs are the ref blocks left as text. Only the first limit (at most
// MaxDescribedRefs, and what the answer has room for) may get a
// description, so only those slots are kept; of the rest, only their
// names, which count as pending. Keeping no more lets the parsed blocks of
// a request of many refs go before its answer is built.
type textRefs struct {
	limit int
	slots []*slot
	more  map[string]bool
}

func newTextRefs(limit int) *textRefs { return &textRefs{limit: limit, more: map[string]bool{}} }

func (t *textRefs) add(s *slot) {
	if len(t.slots) < t.limit {
		t.slots = append(t.slots, s)
		return
	}
	t.more[s.name] = true
}

// describe turns the ref of each slot kept in refs into "[image <name>:
// <description>]" where the image has a description, reading each name's
// once, at most rs.parallel() at once. An image with no description (or
// beyond that bound, or whose description could not be read) is counted as
// pending. Text that merely mentions a ref is never a slot, so it is never
// touched.
func (rs *Restore) describe(ctx context.Context, tenant string, refs *textRefs, answer *beforeRequestAnswer) {
	descs := map[string]string{}
	if rs.Descriptions != nil && len(refs.slots) > 0 {
		var names []string
		for _, s := range refs.slots {
			if _, ok := descs[s.name]; !ok {
				descs[s.name] = ""
				names = append(names, s.name)
			}
		}
		got := make([]string, len(names))
		rs.each(names, func(k int, n string) {
			rctx, cancel := rs.readCtx(ctx)
			defer cancel()
			d, err := rs.Descriptions.Description(rctx, tenant, n)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				api.Logger(ctx).Warn("restore: reading a description", "image", n, "err", err)
			}
			got[k] = d
		})
		for k, n := range names {
			descs[n] = got[k]
		}
	}
	pending := map[string]bool{}
	for _, s := range refs.slots {
		d := descs[s.name]
		if d == "" {
			pending[s.name] = true
			continue
		}
		s.text(DescribedRef(s.name, d))
		answer.Described++
	}
	for n := range refs.more {
		if descs[n] == "" {
			pending[n] = true
		}
	}
	answer.PendingDescriptions = len(pending)
}

// DescribedRef is the text a described ref becomes:
// "[image <name>: <description>]".
func DescribedRef(name, description string) string {
	return "[image " + name + ": " + description + "]"
}

func (rs *Restore) link(ctx context.Context, tenant, name string) (string, error) {
	ttl := rs.LinkTTL
	if ttl <= 0 {
		ttl = DefaultLinkTTL
	}
	return rs.Linker.URL(ctx, store.ImageKey(tenant, name), ttl)
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

// heads learns which names are stored, without reading them (all links).
func (rs *Restore) heads(ctx context.Context, tenant string, names []string) map[string]*fetched {
	got := make(map[string]*fetched, len(names))
	for _, n := range names {
		got[n] = &fetched{}
	}
	rs.each(names, func(_ int, n string) { rs.head(ctx, tenant, n, got[n]) })
	return got
}

// each calls fn for every name, at most rs.parallel() at once, and waits.
func (rs *Restore) each(names []string, fn func(k int, name string)) {
	sem := make(chan struct{}, rs.parallel())
	var wg sync.WaitGroup
	for k, n := range names {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(k, n)
		}()
	}
	wg.Wait()
}

func (rs *Restore) head(ctx context.Context, tenant, name string, f *fetched) {
	rctx, cancel := rs.readCtx(ctx)
	defer cancel()
	info, err := rs.Images.Head(rctx, tenant, name)
	if err != nil {
		f.err = err
		return
	}
	f.exists, f.mime = true, info.ContentType
}

// reads reads the images of names in parallel, at most rs.parallel() at
// once, in first-seen order. Once the images read so far, in that order,
// pass the budget, no later one can be inline (see restore), so the rest
// are not read: they are only checked to exist when they will be linked
// (link), else left for the budget. This bounds a request's memory by the
// budget plus the reads in flight.
func (rs *Restore) reads(ctx context.Context, tenant string, names []string, budget int64, link bool) map[string]*fetched {
	got := make(map[string]*fetched, len(names))
	done := make([]bool, len(names))
	for _, n := range names {
		got[n] = &fetched{}
	}
	var mu sync.Mutex
	cut := -1 // index of the name whose read passed the budget
	next := 0 // names[:next] are done and summed
	var sum int64
	advance := func() { // with mu held
		for cut < 0 && next < len(names) && done[next] {
			sum += got[names[next]].size()
			if sum > budget {
				cut = next
			}
			next++
		}
	}
	sem := make(chan struct{}, rs.parallel())
	var wg sync.WaitGroup
	for k, n := range names {
		sem <- struct{}{}
		mu.Lock()
		beyond := cut >= 0 && k > cut
		mu.Unlock()
		if beyond && !link {
			<-sem
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f := got[n]
			if beyond {
				rs.head(ctx, tenant, n, f)
				return
			}
			rs.read(ctx, tenant, n, f)
			mu.Lock()
			done[k] = true
			advance()
			mu.Unlock()
		}()
	}
	wg.Wait()
	return got
}

func (rs *Restore) read(ctx context.Context, tenant, name string, f *fetched) {
	rctx, cancel := rs.readCtx(ctx)
	defer cancel()
	img, err := rs.Images.Get(rctx, tenant, name)
	if err != nil {
		f.err = err
		return
	}
	mime := img.MimeType
	switch mime {
	case images.PNG, images.JPEG, images.GIF, images.WebP:
	default:
		// Stored with a type no request format names: trust the bytes.
		if mime, err = images.Detect(img.Data); err != nil {
			f.err = err
			return
		}
	}
	f.b64 = base64.StdEncoding.EncodeToString(img.Data)
	f.mime, f.read, f.exists = mime, true, true
	if cfg, _, err := image.DecodeConfig(bytes.NewReader(img.Data)); err == nil {
		f.width, f.height = cfg.Width, cfg.Height
	}
}

func reasonOfRead(err error) string {
	if errors.Is(err, store.ErrNotFound) {
		return ReasonNotFound
	}
	return ReasonUnavailable
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
