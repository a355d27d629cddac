package memory

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/transcript"
)

func textResult(text string) wire.ToolResult {
	return wire.ToolResult{Content: []wire.Block{{Type: "text", Text: text}}}
}

func toolError(format string, args ...any) wire.ToolResult {
	return wire.ToolResult{Content: []wire.Block{{Type: "text", Text: fmt.Sprintf(format, args...)}}, IsError: true}
}

// zoomImageBudget bounds the base64 of the images one zoom page carries, so
// an answer stays under Lambda's 6 MB response limit.
const zoomImageBudget = 4 << 20

// Zoom answers the zoom tool. Bad arguments are an error result the model
// can read; only an outage is an error.
func (m *Memory) Zoom(ctx context.Context, tenant, chat string, a wire.ZoomArgs) (wire.ToolResult, error) {
	c, err := m.current(ctx, tenant, chat)
	if err != nil {
		return wire.ToolResult{}, err
	}
	return m.zoom(ctx, c, a)
}

// zoom is Zoom of the incarnation c.
func (m *Memory) zoom(ctx context.Context, c chatid.Chat, a wire.ZoomArgs) (wire.ToolResult, error) {
	t, err := m.transcript.Len(ctx, c)
	if err != nil {
		return wire.ToolResult{}, err
	}
	if !a.Given("id") {
		return toolError("zoom needs an id: the first entry of the block to open (the number before the + in a view line)."), nil
	}
	id, n := a.ID, int64(1)
	if a.Given("n") {
		n = a.N
	}
	switch {
	case n < 1 || n&(n-1) != 0:
		return toolError("zoom: n = %d is not a power of two (1, 2, 4, 8, ...).", n), nil
	case id < 0:
		return toolError("zoom: id = %d is negative.", id), nil
	case id%n != 0:
		return toolError("zoom: id = %d is not a multiple of n = %d; an aligned block starts at a multiple of its size (try id = %d).", id, n, id-id%n), nil
	case id > t-n: // not id+n > t: a huge id and n would overflow past the check
		return toolError("zoom: the block %d+%d ends past the log, which holds %d entries (ids 0 to %d).", id, n, t, t-1), nil
	}
	if n > 1 {
		if a.Given("offset") || a.Given("limit") {
			return toolError("zoom: offset and limit page one entry; use them with n = 1."), nil
		}
		return m.zoomBlock(ctx, c, Node{L: log2(n), I: id / n})
	}
	return m.zoomEntry(ctx, c, id, a)
}

func log2(n int64) int {
	l := 0
	for n > 1 {
		n >>= 1
		l++
	}
	return l
}

// zoomBlock answers the two child lines of an aligned block.
func (m *Memory) zoomBlock(ctx context.Context, c chatid.Chat, n Node) (wire.ToolResult, error) {
	a, b := n.Children()
	st, _, err := m.states.get(ctx, c)
	if err != nil {
		return wire.ToolResult{}, err
	}
	var want []Node
	for _, child := range []Node{a, b} {
		if st.built(child) {
			want = append(want, child)
		}
	}
	rows, err := m.rows(ctx, c, st.Gen, want)
	if err != nil {
		return wire.ToolResult{}, err
	}
	var sb strings.Builder
	for _, c := range []Node{a, b} {
		sb.WriteString(c.Label())
		sb.WriteByte('|')
		if r, ok := rows[c]; ok {
			sb.WriteString(r.line)
		} else {
			sb.WriteString("not summarized yet: zoom it")
		}
		sb.WriteByte('\n')
	}
	if a.L == 0 {
		fmt.Fprintf(&sb, "(zoom id=%d or id=%d with n=1 for the original entries)", a.Start(), b.Start())
	} else {
		fmt.Fprintf(&sb, "(zoom id=%d or id=%d with n=%d to open either half)", a.Start(), b.Start(), a.Count())
	}
	return textResult(sb.String()), nil
}

// zoomEntry answers one original entry, a page (a's offset and limit) of
// at most PageChars characters, with the images that page names.
func (m *Memory) zoomEntry(ctx context.Context, c chatid.Chat, id int64, a wire.ZoomArgs) (wire.ToolResult, error) {
	entries, err := m.transcript.Entries(ctx, c, id, id+1)
	if err != nil {
		return wire.ToolResult{}, err
	}
	if len(entries) != 1 {
		return wire.ToolResult{}, fmt.Errorf("reading entry %d of %s: the log returned %d entries", id, c.ID, len(entries))
	}
	e := entries[0]
	source := LeafSource(e.Kind, e.Text)
	total := int64(utf8.RuneCountInString(source))
	off, lim := int64(0), int64(PageChars)
	if a.Given("offset") {
		off = a.Offset
	}
	if a.Given("limit") {
		lim = a.Limit
	}
	switch {
	case off < 0:
		return toolError("zoom: offset = %d is negative.", off), nil
	case lim < 1:
		return toolError("zoom: limit = %d must be at least 1.", lim), nil
	case off > 0 && off >= total:
		return toolError("zoom: offset = %d is past the end of entry %d, which has %d characters.", off, id, total), nil
	}
	lim = min(lim, PageChars)
	page := runeSlice(source, off, off+lim)
	end := off + int64(utf8.RuneCountInString(page))

	text, images, err := m.pageImages(ctx, c.Tenant, page)
	if err != nil {
		return wire.ToolResult{}, err
	}
	if end < total {
		text += fmt.Sprintf("\n[page: characters %d to %d of %d; call zoom with id=%d, n=1, offset=%d for the next page]", off, end, total, id, end)
	} else if off > 0 {
		text += fmt.Sprintf("\n[page: characters %d to %d of %d; the end of entry %d]", off, end, total, id)
	}
	return wire.ToolResult{Content: append([]wire.Block{{Type: "text", Text: text}}, images...)}, nil
}

// pageImages reads the images a zoom page names, at most MaxLeafImages and
// zoomImageBudget of base64, and returns the page's text, each ref with
// its image's description, followed by a note for each image not
// attached.
func (m *Memory) pageImages(ctx context.Context, tenant, page string) (text string, images []wire.Block, err error) {
	var notes []string
	budget := zoomImageBudget
	text = page
	for _, name := range refs.Names(page) {
		text = m.withDescription(ctx, tenant, name, text)
		if len(images) == MaxLeafImages {
			// No provider takes more in one request; the rest are not read.
			notes = append(notes, fmt.Sprintf("[image %s is not attached: this page carries %d images already; zoom with a smaller limit to see it]", name, MaxLeafImages))
			continue
		}
		img, err := m.images.Get(ctx, tenant, name)
		if errors.Is(err, store.ErrNotFound) {
			notes = append(notes, fmt.Sprintf("[image %s is not stored any more; its ref is left as text]", name))
			continue
		}
		if err != nil {
			return "", nil, fmt.Errorf("reading image %s for zoom: %w", name, err)
		}
		data := base64.StdEncoding.EncodeToString(img.Data)
		if len(data) > budget {
			notes = append(notes, fmt.Sprintf("[image %s is not attached: this page's images passed %d MB; zoom with a smaller limit to see it]", name, zoomImageBudget>>20))
			continue
		}
		budget -= len(data)
		images = append(images, wire.Block{Type: "image", Data: data, MimeType: img.MimeType, Name: name})
	}
	for _, note := range notes {
		text += "\n" + note
	}
	return text, images, nil
}

// withDescription puts the description of image name, when it has one,
// right after the first ref to it in text: "[image <name>] (description:
// ...)". The ref itself is left whole, so the page still names the image.
// A description that cannot be read is left out, not an error: the page
// and its images do not depend on it.
func (m *Memory) withDescription(ctx context.Context, tenant, name, text string) string {
	if m.descs == nil {
		return text
	}
	d, err := m.descs.Description(ctx, tenant, name)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			m.logger.WarnContext(ctx, "memory: zoom: reading a description", "image", name, "err", err)
		}
		return text
	}
	ref := refs.Ref(name)
	return strings.Replace(text, ref, ref+" (description: "+d+")", 1)
}

// runeSlice is s's characters [from, to).
func runeSlice(s string, from, to int64) string {
	var i int64
	start, stop := len(s), len(s)
	for pos := range s {
		if i == from {
			start = pos
		}
		if i == to {
			stop = pos
			break
		}
		i++
	}
	if start > stop {
		return ""
	}
	return s[start:stop]
}

// Date answers the date tool: when entry a.ID was logged.
func (m *Memory) Date(ctx context.Context, tenant, chat string, a wire.DateArgs) (wire.ToolResult, error) {
	c, err := m.current(ctx, tenant, chat)
	if err != nil {
		return wire.ToolResult{}, err
	}
	return m.date(ctx, c, a)
}

// date is Date of the incarnation c.
func (m *Memory) date(ctx context.Context, c chatid.Chat, a wire.DateArgs) (wire.ToolResult, error) {
	if !a.Given("id") {
		return toolError("date needs an id: the entry whose time you want."), nil
	}
	id := a.ID
	t, err := m.transcript.Len(ctx, c)
	if err != nil {
		return wire.ToolResult{}, err
	}
	if id < 0 || id >= t {
		return toolError("date: id = %d is outside the log, which holds %d entries (ids 0 to %d).", id, t, t-1), nil
	}
	entries, err := m.transcript.Entries(ctx, c, id, id+1)
	if err != nil {
		return wire.ToolResult{}, err
	}
	if len(entries) != 1 {
		return wire.ToolResult{}, fmt.Errorf("reading entry %d of %s: the log returned %d entries", id, c.ID, len(entries))
	}
	d := entries[0].Date.UTC()
	return textResult(fmt.Sprintf("entry %d was logged at %s (%s)", id, d.Format(time.RFC3339), d.Format("Monday, 2 January 2006 15:04 MST"))), nil
}

// searchScan and searchBytes bound the entries, and the bytes of their
// text, one search call reads; the answer says where to go on from. An
// entry may hold 100 KB of text, so entries are read a few at a time.
const (
	searchScan  = 20_000
	searchBytes = 16 << 20
	searchChunk = 50
)

func (m *Memory) searchOn(st *chatState) bool {
	if st.Search != nil {
		return *st.Search
	}
	return m.search
}

// setSettings sets the chat's own opt-ins that are given (not nil).
func (m *Memory) setSettings(ctx context.Context, c chatid.Chat, search, forget *bool) error {
	_, err := m.states.update(ctx, c, func(st *chatState) error {
		if search != nil {
			st.Search = search
		}
		if forget != nil {
			st.Forget = forget
		}
		return nil
	})
	if errors.Is(err, errRetired) {
		return nil // deleted under this call: its settings went with it
	}
	return err
}

// Search answers the search tool: the original entries (never summaries,
// never logged tool results of memory's own tools) holding the query's
// words, ranked by BM25 over stemmed terms, SearchHits a page; a phrase in
// double quotes must appear as written (case aside).
func (m *Memory) Search(ctx context.Context, tenant, chat string, a wire.SearchArgs) (wire.ToolResult, error) {
	c, err := m.current(ctx, tenant, chat)
	if err != nil {
		return wire.ToolResult{}, err
	}
	return m.searchIn(ctx, c, a)
}

// searchIn is Search of the incarnation c.
func (m *Memory) searchIn(ctx context.Context, c chatid.Chat, a wire.SearchArgs) (wire.ToolResult, error) {
	st, _, err := m.states.get(ctx, c)
	if err != nil {
		return wire.ToolResult{}, err
	}
	if !m.searchOn(st) {
		return wire.ToolResult{}, ErrSearchOff
	}
	query := strings.TrimSpace(a.Text)
	if query == "" {
		return toolError("search needs text: the words to find in the original messages."), nil
	}
	if a.Skip < 0 {
		return toolError("search: skip = %d is negative; it counts the hits already read.", a.Skip), nil
	}
	t, err := m.transcript.Len(ctx, c)
	if err != nil {
		return wire.ToolResult{}, err
	}
	before := t
	if a.Given("before") {
		if a.Before < 0 || a.Before > t {
			return toolError("search: before = %d is outside the log, which holds %d entries.", a.Before, t), nil
		}
		before = a.Before
	}
	page := searchPage{query: query, skip: int(min(a.Skip, searchScan*SearchHits))}
	phrases := quoted(query)
	qterms := terms(query, false)
	if len(qterms) == 0 {
		qterms = terms(query, true)
	}
	if len(qterms) == 0 {
		return toolError("search: %q holds no word to find.", query), nil
	}
	ranking, unread, err := m.rank(ctx, c, qterms, len(phrases) > 0, before)
	page.unread = unread
	if err != nil {
		return wire.ToolResult{}, err
	}
	if len(phrases) == 0 && m.embedder != nil {
		if ranking, page.note, err = m.byMeaning(ctx, c, query, before, ranking); err != nil {
			return wire.ToolResult{}, err
		}
	}
	if err := m.pageOf(ctx, c, ranking, searchTerms{phrases, qterms}, &page); err != nil {
		return wire.ToolResult{}, err
	}
	return m.searchAnswer(ctx, c, st, page)
}

// quoted returns the phrases in double quotes in q.
func quoted(q string) []string {
	parts := strings.Split(q, `"`)
	var out []string
	for k := 1; k < len(parts)-1; k += 2 {
		if p := strings.TrimSpace(parts[k]); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// searchPage is one page of search: the hits, best first, from the
// ranking's position skip; next is where the next page starts (0: none).
type searchPage struct {
	query      string
	hits       []searchHit
	skip, next int
	// unread counts the entries not yet indexed that the call left unread.
	unread int64
	// note says what search by meaning could not do this time.
	note string
}

type searchHit struct {
	e       transcript.Entry
	snippet string
}

// searchTerms are a query's quoted phrases and its terms.
type searchTerms struct {
	phrases, terms []string
}

// pageOf reads the entries of the ranking from p.skip until the page holds
// SearchHits hits; with phrases, only entries holding each of them as
// written count, and at most searchScan entries or searchBytes bytes are
// read.
func (m *Memory) pageOf(ctx context.Context, c chatid.Chat, ranking []ranked, q searchTerms, p *searchPage) error {
	matchers := make([]*matcher, len(q.phrases))
	for k, ph := range q.phrases {
		matchers[k] = newMatcher(foldString(ph))
	}
	read, readBytes := 0, 0
	k := p.skip
	for ; k < len(ranking) && len(p.hits) < SearchHits; k++ {
		if read >= searchScan || readBytes >= searchBytes {
			break
		}
		id := ranking[k].id
		entries, err := m.transcript.Entries(ctx, c, id, id+1)
		if err != nil {
			return err
		}
		read++
		if len(entries) != 1 || !indexable(entries[0]) {
			continue
		}
		e := entries[0]
		readBytes += len(e.Text)
		snip, ok, err := phraseSnippet(ctx, e.Text, matchers)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if snip == "" {
			snip = termSnippet(e.Text, q.terms)
		}
		p.hits = append(p.hits, searchHit{e: e, snippet: snip})
	}
	if k < len(ranking) {
		p.next = k
	}
	return nil
}

// phraseSnippet reports whether text holds every phrase of matchers, with
// a snippet around the first ("" when there are none).
func phraseSnippet(ctx context.Context, text string, matchers []*matcher) (string, bool, error) {
	snip := ""
	for _, mt := range matchers {
		s, found, err := matchSnippet(ctx, text, mt)
		if err != nil {
			return "", false, fmt.Errorf("memory: search: %w", err)
		}
		if !found {
			return "", false, nil
		}
		if snip == "" {
			snip = s
		}
	}
	return snip, true, nil
}

// searchAnswer writes the page's hits, each with the view line holding it
// when that is a summary, and where the next page starts.
func (m *Memory) searchAnswer(ctx context.Context, c chatid.Chat, st *chatState, p searchPage) (wire.ToolResult, error) {
	holders := map[int64]Node{}
	var want []Node
	for _, h := range p.hits {
		if n, ok := st.View.covering(h.e.I); ok && st.built(n) {
			holders[h.e.I] = n
			want = append(want, n)
		}
	}
	rows, err := m.rows(ctx, c, st.Gen, want)
	if err != nil {
		return wire.ToolResult{}, err
	}
	var sb strings.Builder
	if len(p.hits) == 0 {
		fmt.Fprintf(&sb, "no original entry matches %q", p.query)
		if p.skip > 0 {
			fmt.Fprintf(&sb, " after the first %d hits", p.skip)
		}
	} else {
		fmt.Fprintf(&sb, "%d entries match %q, best first:\n", len(p.hits), p.query)
	}
	for _, h := range p.hits {
		fmt.Fprintf(&sb, "\nid %d (%s, %s): %s", h.e.I, h.e.Kind, h.e.Date.UTC().Format(time.RFC3339), h.snippet)
		if n, ok := holders[h.e.I]; ok {
			if r, ok := rows[n]; ok && (n.L > 0 || !r.verbatim) {
				fmt.Fprintf(&sb, "\n  in view line %s|%s", n.Label(), r.line)
			}
		}
	}
	if p.next > 0 {
		fmt.Fprintf(&sb, "\n\n[more entries may match: call search with the same text and skip=%d]", p.next)
	}
	if p.unread > 0 {
		fmt.Fprintf(&sb, "\n\n[the search index is catching up: %d older entries were not searched this time; search again]", p.unread)
	}
	if p.note != "" {
		sb.WriteString("\n\n" + p.note)
	}
	return textResult(sb.String()), nil
}

// foldString lower-cases s one character at a time, so character positions
// in the folded text are those of the original.
func foldString(s string) []rune {
	r := []rune(s)
	for k, c := range r {
		r[k] = unicode.ToLower(c)
	}
	return r
}

// matcher finds a folded query in a text in one pass over it, whatever the
// query (Knuth-Morris-Pratt over lower-cased characters): a text of n
// characters takes O(n) steps, where comparing at every position took
// O(n*m), hours for a 9 MiB text and a 20,000-character query.
type matcher struct {
	query []rune
	// border[k] is the length of the longest proper border (a prefix
	// that is also a suffix) of query[:k+1].
	border []int
}

func newMatcher(query []rune) *matcher {
	border := make([]int, len(query))
	k := 0
	for i := 1; i < len(query); i++ {
		for k > 0 && query[i] != query[k] {
			k = border[k-1]
		}
		if query[i] == query[k] {
			k++
		}
		border[i] = k
	}
	return &matcher{query: query, border: border}
}

// cancelEvery is how many characters a match reads between looks at its
// context: a few milliseconds of work.
const cancelEvery = 1 << 16

// index is the character position of the first match in text, or -1. It
// stops with the context's error when ctx ends.
func (m *matcher) index(ctx context.Context, text string) (int, error) {
	if len(m.query) == 0 {
		return 0, nil
	}
	k, pos := 0, 0
	for _, c := range text {
		if pos%cancelEvery == 0 {
			if err := ctx.Err(); err != nil {
				return -1, err
			}
		}
		c = unicode.ToLower(c)
		for k > 0 && c != m.query[k] {
			k = m.border[k-1]
		}
		if c == m.query[k] {
			k++
		}
		pos++
		if k == len(m.query) {
			return pos - k, nil
		}
	}
	return -1, nil
}

// matchSnippet finds the query in text and returns about SnippetChars
// characters around the first match.
func matchSnippet(ctx context.Context, text string, m *matcher) (string, bool, error) {
	at, err := m.index(ctx, text)
	if err != nil || at < 0 {
		return "", false, err
	}
	n := utf8.RuneCountInString(text)
	start := max(0, at-(SnippetChars-len(m.query))/2)
	end := min(n, start+SnippetChars)
	start = max(0, end-SnippetChars)
	snip := strings.Join(strings.Fields(runeSlice(text, int64(start), int64(end))), " ")
	if start > 0 {
		snip = "..." + snip
	}
	if end < n {
		snip += "..."
	}
	return snip, true, nil
}
