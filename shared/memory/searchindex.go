package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode"

	"github.com/kljensen/snowball/english"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/textcut"
	"github.com/durachat/durachat/shared/transcript"
)

// The search index of a chat lives in the chat's incarnation partition
// (so a chat's deletion sweeps it with everything else) as sealed
// segments of segEntries consecutive entries:
//
//   - s/m/<from>: the segment's marker, written last: where it ends,
//     how many entries it indexes and their total length in terms (for
//     BM25's average); a search reads every marker in one query (about 60
//     bytes per segment).
//   - s/p/<term>/<from>: the postings of one term in one segment,
//     [id, term frequency, entry length] each; a search reads a term's
//     postings of every segment in one query by the prefix
//     s/p/<term>/.
//   - s/t/<from>: the segment's terms, read only by an erasure, which
//     rewrites the segment without the erased words.
//
// Segments are immutable and their content follows from the entries, so
// two writers sealing the same segment write the same items (a Create that
// finds its key taken is done). The entries after the last segment (fewer
// than segEntries) are read and scored at each search. No item grows with
// the chat: a posting item holds at most segEntries postings, a marker a few
// numbers and a terms item at most segTerms terms.
const (
	segEntries = 128
	segTerms   = 8000
	maxTermLen = 64
	// indexedBytes is how much of an entry's text is indexed: a 9 MiB
	// tool call costs no more to index than its first 256 KiB.
	indexedBytes = 256 << 10
	// sealPerCall bounds the segments one call seals; a chat never indexed
	// catches up over several calls, scanning the rest meanwhile.
	sealPerCall = 40
	// indexChunk is how many entries are read from the log at a time.
	indexChunk = 8
)

const (
	searchMarkerPrefix = store.SearchPrefix + "m/"
	searchPostPrefix   = store.SearchPrefix + "p/"
	searchTermsPrefix  = store.SearchPrefix + "t/"
)

func segSK(prefix string, from int64) string { return fmt.Sprintf("%s%012d", prefix, from) }

func postSK(term string, from int64) string {
	return fmt.Sprintf("%s%s/%012d", searchPostPrefix, term, from)
}

// segMarker is the body of a segment's marker.
type segMarker struct {
	From  int64 `json:"from"`
	To    int64 `json:"to"`
	Docs  int64 `json:"docs"`
	Terms int64 `json:"len"`
}

// posting is one entry holding a term: [id, frequency, entry length].
type posting [3]int64

// terms cuts text into search terms: runs of letters and digits, lower
// cased, English stop words dropped, each cut to its stem. keepStop keeps
// the stop words (a query of stop words only).
func terms(text string, keepStop bool) []string {
	var out []string
	if len(text) > indexedBytes {
		text = text[:indexedBytes]
	}
	for _, w := range words(text) {
		if english.IsStopWord(w) && !keepStop {
			continue
		}
		out = append(out, stem(w))
	}
	return out
}

// words are text's runs of letters and digits, lower cased.
func words(text string) []string {
	return strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r)
	})
}

// stem is w's term: its first maxTermLen characters cut to their stem.
func stem(w string) string {
	if r := []rune(w); len(r) > maxTermLen {
		w = string(r[:maxTermLen])
	}
	return english.Stem(w, true)
}

// indexable reports whether e's words are searched: originals only, never
// a logged result of memory's own tools, never an erased entry.
func indexable(e transcript.Entry) bool { return e.Tool == "" && e.Erased.IsZero() }

// docTerms is the term frequencies and length of an entry.
func docTerms(e transcript.Entry) (map[string]int64, int64) {
	if !indexable(e) {
		return nil, 0
	}
	tf := map[string]int64{}
	ts := terms(e.Text, false)
	for _, t := range ts {
		tf[t]++
	}
	return tf, int64(len(ts))
}

// markers reads the chat's segment markers, in order; the index reaches
// the end of the last.
func (m *Memory) markers(ctx context.Context, c chatid.Chat) ([]segMarker, error) {
	var out []segMarker
	q := store.Query{PK: c.PK(), Prefix: searchMarkerPrefix}
	for {
		page, err := m.table.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("memory: reading the search index of %s: %w", c.ID, err)
		}
		for _, it := range page.Items {
			var s segMarker
			if err := json.Unmarshal(it.Body, &s); err != nil {
				return nil, fmt.Errorf("memory: search marker %s of %s: %w", it.SK, c.ID, err)
			}
			out = append(out, s)
		}
		if page.Next == "" {
			return out, nil
		}
		q.After = page.Next
	}
}

func indexedTo(segs []segMarker) int64 {
	if len(segs) == 0 {
		return 0
	}
	return segs[len(segs)-1].To
}

// sealSearch seals the complete segments after the index's end, up to
// sealPerCall of them, and returns the markers.
func (m *Memory) sealSearch(ctx context.Context, c chatid.Chat) ([]segMarker, error) {
	segs, err := m.markers(ctx, c)
	if err != nil {
		return nil, err
	}
	st, version, _, err := m.states.read(ctx, c)
	if err != nil || version == 0 || !m.searchOn(st) {
		// No state: a deleted incarnation, whose partition gets nothing
		// new. Search off: the chat pays no index writes until it is on.
		return segs, err
	}
	t, err := m.transcript.Len(ctx, c)
	if err != nil {
		return nil, err
	}
	read := 0
	for k := 0; k < sealPerCall && read < searchBytes; k++ {
		from := indexedTo(segs)
		if t-from < segEntries {
			break
		}
		s, n, err := m.writeSegment(ctx, c, from, nil)
		if err != nil {
			return nil, err
		}
		read += n
		segs = append(segs, s)
	}
	return segs, nil
}

// writeSegment writes the segment of segEntries entries starting at from:
// its postings, its terms and last its marker, reading the log a few
// entries at a time; it returns the bytes of text it read. Postings of old
// terms the entries no longer hold are deleted (a rewrite after an
// erasure).
func (m *Memory) writeSegment(ctx context.Context, c chatid.Chat, from int64, old []string) (segMarker, int, error) {
	s := segMarker{From: from, To: from + segEntries}
	post := map[string][]posting{}
	read := 0
	for at := from; at < s.To; at += indexChunk {
		entries, err := m.transcript.Entries(ctx, c, at, min(s.To, at+indexChunk))
		if err != nil {
			return s, read, err
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return s, read, err
			}
			read += len(e.Text)
			if indexable(e) {
				e.Text = m.describedText(ctx, c.Tenant, e.Text)
			}
			tf, n := docTerms(e)
			if tf == nil {
				continue
			}
			s.Docs++
			s.Terms += n
			for t, f := range tf {
				if len(post) >= segTerms && post[t] == nil {
					continue // bounded: the last new words of a huge segment go unindexed
				}
				post[t] = append(post[t], posting{e.I, f, n})
			}
		}
	}
	s, err := m.putSegment(ctx, c, s, post, old)
	return s, read, err
}

// putSegment writes a segment's items, its marker last.
func (m *Memory) putSegment(ctx context.Context, c chatid.Chat, s segMarker, post map[string][]posting, old []string) (segMarker, error) {
	from := s.From
	names := make([]string, 0, len(post))
	for t := range post {
		names = append(names, t)
	}
	slices.Sort(names)
	for _, t := range names {
		body, err := json.Marshal(post[t])
		if err != nil {
			return s, err
		}
		if err := m.putItem(ctx, store.Item{Key: store.Key{PK: c.PK(), SK: postSK(t, from)}, Body: body}, old != nil); err != nil {
			return s, err
		}
	}
	for _, t := range old {
		if _, ok := post[t]; !ok {
			if err := m.table.Delete(ctx, store.Key{PK: c.PK(), SK: postSK(t, from)}, 0); err != nil {
				return s, fmt.Errorf("memory: search index of %s: %w", c.ID, err)
			}
		}
	}
	body, err := json.Marshal(names)
	if err != nil {
		return s, err
	}
	if err := m.putItem(ctx, store.Item{Key: store.Key{PK: c.PK(), SK: segSK(searchTermsPrefix, from)}, Body: body}, old != nil); err != nil {
		return s, err
	}
	body, err = json.Marshal(s)
	if err != nil {
		return s, err
	}
	return s, m.putItem(ctx, store.Item{Key: store.Key{PK: c.PK(), SK: segSK(searchMarkerPrefix, from)}, Body: body}, old != nil)
}

// putItem creates it; a taken key holds the same content (sealing is
// deterministic) unless replace, when it is overwritten.
func (m *Memory) putItem(ctx context.Context, it store.Item, replace bool) error {
	err := m.table.Create(ctx, it)
	if errors.Is(err, store.ErrConditionFailed) && replace {
		for range 10 {
			cur, gerr := m.table.Get(ctx, it.Key)
			if errors.Is(gerr, store.ErrNotFound) {
				err = m.table.Create(ctx, it)
			} else if gerr != nil {
				err = gerr
			} else {
				it.Version = cur.Version + 1
				err = m.table.Update(ctx, it)
			}
			if !errors.Is(err, store.ErrConditionFailed) {
				break
			}
		}
	} else if errors.Is(err, store.ErrConditionFailed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("memory: writing search index item %s: %w", it.SK, err)
	}
	return nil
}

// unindex rewrites the sealed segments holding ids from the log as it is
// now, so an erased entry's words leave the index.
func (m *Memory) unindex(ctx context.Context, c chatid.Chat, ids []int64) error {
	segs, err := m.markers(ctx, c)
	if err != nil {
		return err
	}
	done := map[int64]bool{}
	for _, id := range ids {
		k, found := slices.BinarySearchFunc(segs, id, func(s segMarker, id int64) int {
			if id < s.From {
				return 1
			}
			if id >= s.To {
				return -1
			}
			return 0
		})
		if !found || done[segs[k].From] {
			continue // after the index: read from the log at each search
		}
		s := segs[k]
		done[s.From] = true
		it, err := m.table.Get(ctx, store.Key{PK: c.PK(), SK: segSK(searchTermsPrefix, s.From)})
		var old []string
		if err == nil {
			err = json.Unmarshal(it.Body, &old)
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("memory: search terms of %s: %w", c.ID, err)
		}
		if old == nil {
			old = []string{}
		}
		if _, _, err := m.writeSegment(ctx, c, s.From, old); err != nil {
			return err
		}
	}
	return nil
}

// maxDescribed bounds the images of one entry whose descriptions are
// indexed with it.
const maxDescribed = 8

// describedText is text with the descriptions of the first maxDescribed
// images it names beside their refs, so that search finds an image by
// what it shows. A sealed segment indexes the descriptions written by
// then (a leaf's build writes its images'); the entries after the index
// are searched by their own words.
func (m *Memory) describedText(ctx context.Context, tenant, text string) string {
	if m.descs == nil {
		return text
	}
	for k, name := range refs.Names(textcut.Head(text, indexedBytes)) {
		if k == maxDescribed {
			break
		}
		text = m.withDescription(ctx, tenant, name, text)
	}
	return text
}

// maxQueryTerms bounds the distinct terms a query reads the postings of:
// a sentence's worth; a longer query keeps its first ones.
const maxQueryTerms = 32

// firstDistinct is the first n distinct terms of ts.
func firstDistinct(ts []string, n int) []string {
	var out []string
	for _, t := range ts {
		if len(out) == n {
			break
		}
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// ranked is one scored entry.
type ranked struct {
	id    int64
	score float64
}

// BM25's constants, the usual ones.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// corpus is what BM25 scores over: the postings of the query's terms and
// the count and total length of the entries they come from.
type corpus struct {
	post         map[string][]posting
	docs, length int64
}

// rank scores the entries holding any of qterms by BM25 over the index and
// the entries after it, best first (newer first among equals). With all,
// only the entries holding every term are kept (a quoted phrase's).
// unread is how many entries after the index the call left unread (a chat
// whose index is still catching up).
func (m *Memory) rank(ctx context.Context, c chatid.Chat, qterms []string, all bool, before int64) (out []ranked, unread int64, err error) {
	segs, err := m.sealSearch(ctx, c)
	if err != nil {
		return nil, 0, err
	}
	cp := corpus{post: map[string][]posting{}}
	for _, s := range segs {
		cp.docs += s.Docs
		cp.length += s.Terms
	}
	uniq := slices.Compact(slices.Sorted(slices.Values(qterms)))
	if len(uniq) > maxQueryTerms {
		uniq = firstDistinct(qterms, maxQueryTerms)
	}
	for _, t := range uniq {
		if cp.post[t], err = m.postings(ctx, c, t); err != nil {
			return nil, 0, err
		}
	}
	if unread, err = m.rankTail(ctx, c, indexedTo(segs), uniq, &cp); err != nil {
		return nil, 0, err
	}
	if cp.docs == 0 {
		return nil, unread, nil
	}
	return cp.score(uniq, all, before), unread, nil
}

// postings reads the index's postings of term t in the chat c.
func (m *Memory) postings(ctx context.Context, c chatid.Chat, t string) ([]posting, error) {
	var out []posting
	q := store.Query{PK: c.PK(), Prefix: searchPostPrefix + t + "/"}
	for {
		page, err := m.table.Query(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("memory: reading the search index of %s: %w", c.ID, err)
		}
		for _, it := range page.Items {
			var ps []posting
			if err := json.Unmarshal(it.Body, &ps); err != nil {
				return nil, fmt.Errorf("memory: search postings %s of %s: %w", it.SK, c.ID, err)
			}
			out = append(out, ps...)
		}
		if page.Next == "" {
			return out, nil
		}
		q.After = page.Next
	}
}

// rankTail adds to cp the entries after the index (from indexed on), newest
// first, at most searchBytes of their text: fewer than segEntries entries
// (more only while a chat never indexed catches up). It returns how many
// it left unread.
func (m *Memory) rankTail(ctx context.Context, c chatid.Chat, indexed int64, uniq []string, cp *corpus) (int64, error) {
	t, err := m.transcript.Len(ctx, c)
	if err != nil {
		return 0, err
	}
	read, to := 0, t
	for ; to > indexed && read < searchBytes; to -= indexChunk {
		entries, err := m.transcript.Entries(ctx, c, max(indexed, to-indexChunk), to)
		if err != nil {
			return 0, err
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return 0, err
			}
			read += len(e.Text)
			tf, n := docTerms(e)
			if tf == nil {
				continue
			}
			cp.docs++
			cp.length += n
			for _, q := range uniq {
				if f := tf[q]; f > 0 {
					cp.post[q] = append(cp.post[q], posting{e.I, f, n})
				}
			}
		}
	}
	return max(0, to-indexed), nil
}

// score is the BM25 ranking of the entries before before holding any of
// uniq (every one, with all), best first, newer first among equals.
func (cp corpus) score(uniq []string, all bool, before int64) []ranked {
	avg := float64(cp.length) / float64(cp.docs)
	score := map[int64]float64{}
	held := map[int64]int{}
	for _, q := range uniq {
		ps := cp.post[q]
		df := float64(len(ps))
		idf := math.Log(1 + (float64(cp.docs)-df+0.5)/(df+0.5))
		for _, p := range ps {
			if p[0] >= before {
				continue
			}
			f, dl := float64(p[1]), float64(p[2])
			score[p[0]] += idf * f * (bm25K1 + 1) / (f + bm25K1*(1-bm25B+bm25B*dl/avg))
			held[p[0]]++
		}
	}
	if !all {
		score = withNeighbours(score, before)
	}
	out := make([]ranked, 0, len(score))
	for id, s := range score {
		if all && held[id] < len(uniq) {
			continue
		}
		out = append(out, ranked{id, s})
	}
	return bestOf(out, len(out))
}

// neighbourShare is the part of its better neighbour's score an entry
// gains. In a conversation a question's words and its answer's are often
// in neighbouring messages ("what did the book teach you?" and "that hard
// times pass"), so an entry beside a hit ranks higher, and one holding
// none of the query's words is still found beside it.
const neighbourShare = 0.5

// withNeighbours is each entry's score plus neighbourShare of its better
// neighbour's (the entry before it or after it, before before): the
// entries scored and those beside them.
func withNeighbours(score map[int64]float64, before int64) map[int64]float64 {
	out := make(map[int64]float64, 3*len(score))
	for id := range score {
		for _, n := range [3]int64{id - 1, id, id + 1} {
			if _, done := out[n]; done || n < 0 || n >= before {
				continue
			}
			out[n] = score[n] + neighbourShare*max(score[n-1], score[n+1])
		}
	}
	return out
}

// termSnippet is about SnippetChars characters of text around its first
// word whose term is one of qterms (the start when none is).
func termSnippet(text string, qterms []string) string {
	r := []rune(text)
	at, wlen := 0, 0
	for k := 0; k < len(r); {
		if !unicode.IsLetter(r[k]) && !unicode.IsDigit(r[k]) {
			k++
			continue
		}
		j := k
		for j < len(r) && (unicode.IsLetter(r[j]) || unicode.IsDigit(r[j]) || unicode.Is(unicode.Mn, r[j])) {
			j++
		}
		if slices.Contains(qterms, stem(strings.ToLower(string(r[k:j])))) {
			at, wlen = k, j-k
			break
		}
		k = j
	}
	start := max(0, at-(SnippetChars-wlen)/2)
	end := min(len(r), start+SnippetChars)
	start = max(0, end-SnippetChars)
	snip := strings.Join(strings.Fields(string(r[start:end])), " ")
	if start > 0 {
		snip = "..." + snip
	}
	if end < len(r) {
		snip += "..."
	}
	return snip
}
