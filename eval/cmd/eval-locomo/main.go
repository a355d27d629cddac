// Command eval-locomo measures search's evidence recall on LoCoMo
// conversations (evaluation data, not part of the repository: pass the
// file). Each conversation is logged through the transcript and memory, as
// an append is, each in its own chat and then all in one chat; each
// question of categories 1-4 is asked once, as written, and counts when
// every turn its evidence names is among the hits of the first page, or of
// the first five pages; then its content words (less the common ones) are
// searched one a call, the rarest in the chat first, ten calls in all, and
// it counts when every evidence turn is among their hits. Beside it, in the
// same run, BM25 over the raw turns
// (plain lower-cased words, no stems, no stop words) with the same number of
// hits.
//
// With -embed-model, search ranks by meaning too (fused with the words),
// through that embedding model: openai:<model> at -embed-url (a local
// OpenAI-compatible server needs no key; OPENAI_API_KEY otherwise), or
// bedrock:<model id> with AWS credentials from the environment. Each turn
// is embedded once and each question once.
//
//	eval-locomo -data <locomo json> [-embed-model openai:<model> -embed-url <base URL>]
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kljensen/snowball/english"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/store/storefake"
	"github.com/durachat/durachat/shared/transcript"
)

func main() {
	data := flag.String("data", "", "the LoCoMo JSON file (a list of samples)")
	embedModel := flag.String("embed-model", "", "the embedding model of search by meaning: openai:<model> or bedrock:<model id> (none: by words alone)")
	embedURL := flag.String("embed-url", "", "the base URL of an OpenAI-compatible embeddings endpoint, as http://127.0.0.1:11434/v1")
	flag.Parse()
	if *data == "" {
		fmt.Fprintln(os.Stderr, "eval-locomo: -data <file> is required")
		os.Exit(2)
	}
	ctx := context.Background()
	embedder, err := openEmbedder(ctx, *embedModel, *embedURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "eval-locomo:", err)
		os.Exit(2)
	}
	if err := run(ctx, *data, embedder, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "eval-locomo:", err)
		os.Exit(1)
	}
}

type turn struct {
	Speaker string `json:"speaker"`
	DiaID   string `json:"dia_id"`
	Text    string `json:"text"`
	Caption string `json:"blip_caption"`
}

type question struct {
	Question string   `json:"question"`
	Evidence []string `json:"evidence"`
	Category int      `json:"category"`
}

type sample struct {
	ID           string                     `json:"sample_id"`
	Conversation map[string]json.RawMessage `json:"conversation"`
	QA           []question                 `json:"qa"`
}

// turns are a sample's turns in session order.
func (s sample) turns() ([]turn, error) {
	var out []turn
	for n := 1; ; n++ {
		raw, ok := s.Conversation["session_"+strconv.Itoa(n)]
		if !ok {
			return out, nil
		}
		var ts []turn
		if err := json.Unmarshal(raw, &ts); err != nil {
			return nil, fmt.Errorf("%s session %d: %w", s.ID, n, err)
		}
		out = append(out, ts...)
	}
}

// text is what a turn logs: its speaker, its words and an image's caption.
func (t turn) text() string {
	s := t.Speaker + ": " + t.Text
	if t.Caption != "" {
		s += " [shares an image: " + t.Caption + "]"
	}
	return s
}

const pages = 5

// tally counts questions answered, per category and in all, and per
// conversation (by sample id).
type tally struct {
	asked, first, five, words, base20, base100 map[int]int
	conv                                       map[string]*[4]int // asked, first, five, words
}

func newTally() tally {
	return tally{map[int]int{}, map[int]int{}, map[int]int{}, map[int]int{}, map[int]int{}, map[int]int{}, map[string]*[4]int{}}
}

// add counts one question of the conversation conv and category cat.
func (t tally) add(conv string, cat int, r answered) {
	for _, c := range []int{cat, 0} {
		t.asked[c]++
		t.first[c] += b2i(r.first)
		t.five[c] += b2i(r.five)
		t.words[c] += b2i(r.words)
		t.base20[c] += b2i(r.base20)
		t.base100[c] += b2i(r.base100)
	}
	if t.conv[conv] == nil {
		t.conv[conv] = &[4]int{}
	}
	n := t.conv[conv]
	n[0]++
	n[1] += b2i(r.first)
	n[2] += b2i(r.five)
	n[3] += b2i(r.words)
}

// openEmbedder opens the embedding model named (nil for none), as the
// programs do from DURACHAT_EMBED_MODEL and DURACHAT_EMBED_URL.
func openEmbedder(ctx context.Context, name, url string) (memory.Embedder, error) {
	if name == "" {
		return nil, nil
	}
	m, err := config.ParseModel(name)
	if err != nil {
		return nil, fmt.Errorf("-embed-model: %w", err)
	}
	return compactor.OpenEmbedder(ctx, config.Config{EmbedModel: m, EmbedURL: url, EmbedKey: os.Getenv(config.EnvOpenAIKey)})
}

func run(ctx context.Context, path string, embedder memory.Embedder, out io.Writer) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var samples []sample
	if err := json.Unmarshal(raw, &samples); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if len(samples) == 0 {
		return errors.New("no conversation in the file")
	}
	own, one := newTally(), newTally()
	// Own chats: each conversation alone.
	for _, s := range samples {
		if err := evaluate(ctx, []sample{s}, embedder, own); err != nil {
			return err
		}
	}
	// One long chat: all of them, one after another.
	if err := evaluate(ctx, samples, embedder, one); err != nil {
		return err
	}
	mode := "by words alone"
	if embedder != nil {
		mode = "by words and meaning (" + embedder.Name() + ")"
	}
	fmt.Fprintf(out, "LoCoMo evidence recall, %d conversations, one search a page (%d hits), ranked %s: the question as written (first page; %d pages), its content words one a call, rarest first (%d calls), and BM25 over the raw turns\n\n", len(samples), memory.SearchHits, mode, pages, wordCalls)
	fmt.Fprintln(out, "| category | questions | own: p1 | own: p1-5 | own: words, 10 calls | own: BM25 raw top 20 / 100 | one chat: p1 | one chat: p1-5 | one chat: words, 10 calls | one chat: BM25 raw top 20 / 100 |")
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, c := range []int{1, 2, 3, 4, 0} {
		name := strconv.Itoa(c)
		if c == 0 {
			name = "all"
		}
		a := own.asked[c]
		r := func(n int) string { return fmt.Sprintf("%.3f", float64(n)/float64(max(a, 1))) }
		fmt.Fprintf(out, "| %s | %d | %s | %s | %s | %s / %s | %s | %s | %s | %s / %s |\n", name, a,
			r(own.first[c]), r(own.five[c]), r(own.words[c]), r(own.base20[c]), r(own.base100[c]),
			r(one.first[c]), r(one.five[c]), r(one.words[c]), r(one.base20[c]), r(one.base100[c]))
	}
	fmt.Fprintln(out, "\n| conversation | questions | own: p1 | own: p1-5 | own: words, 10 calls | one chat: p1 | one chat: p1-5 | one chat: words, 10 calls |")
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, s := range samples {
		o, l := own.conv[s.ID], one.conv[s.ID]
		if o == nil || l == nil {
			continue
		}
		r := func(n int) string { return fmt.Sprintf("%.3f", float64(n)/float64(max(o[0], 1))) }
		fmt.Fprintf(out, "| %s | %d | %s | %s | %s | %s | %s | %s |\n", s.ID, o[0], r(o[1]), r(o[2]), r(o[3]), r(l[1]), r(l[2]), r(l[3]))
	}
	return nil
}

var hitID = regexp.MustCompile(`(?m)^id (\d+) `)

// evaluate logs the samples into one chat and asks each question of
// categories 1-4 once, counting into t (category 0: all).
func evaluate(ctx context.Context, samples []sample, embedder memory.Embedder, t tally) error {
	table := storefake.NewTable()
	log := transcript.New(transcript.Config{Table: table, Blobs: storefake.NewBlobs()})
	mem, err := memory.New(memory.Config{Table: table, Transcript: log, Queue: storefake.NewQueue(), Search: true, Embedder: embedder,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return err
	}
	docs, ids, err := ingest(ctx, log, mem, samples)
	if err != nil {
		return err
	}
	// Every turn embedded before the first question, as a chat logged
	// over days would be.
	for left := int64(1); left > 0; {
		if left, err = mem.EmbedPending(ctx, tenant, chat, 1024); err != nil {
			return err
		}
	}
	base := newBM25(docs)
	for _, s := range samples {
		for _, q := range s.QA {
			if q.Category < 1 || q.Category > 4 || len(q.Evidence) == 0 {
				continue
			}
			var want []int64
			for _, e := range q.Evidence {
				if id, ok := ids[s.ID+"/"+strings.TrimSpace(e)]; ok {
					want = append(want, id)
				}
			}
			if len(want) == 0 {
				continue
			}
			r, err := ask(ctx, mem, base, q.Question, want)
			if err != nil {
				return err
			}
			t.add(s.ID, q.Category, r)
		}
	}
	return nil
}

// ingest logs the samples' turns into the chat, 50 a call, as appends
// do: it returns each entry's text by id and the entry id of each turn
// (by sample/dia_id).
func ingest(ctx context.Context, log *transcript.Log, mem *memory.Memory, samples []sample) ([]string, map[string]int64, error) {
	var docs []string
	ids := map[string]int64{} // sample/dia_id -> entry id
	for _, s := range samples {
		turns, err := s.turns()
		if err != nil {
			return nil, nil, err
		}
		for k := 0; k < len(turns); k += 50 {
			batch := turns[k:min(len(turns), k+50)]
			msgs := make([]pi.Message, len(batch))
			for j, tn := range batch {
				msgs[j] = pi.Message{Role: "user", Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(tn.text())}}}
			}
			c, got, err := log.AppendChat(ctx, tenant, chat, msgs, fmt.Sprintf("%s-%d", s.ID, k))
			if err != nil {
				return nil, nil, err
			}
			for j, tn := range batch {
				ids[s.ID+"/"+tn.DiaID] = got[j]
				for int64(len(docs)) <= got[j] {
					docs = append(docs, "")
				}
				docs[got[j]] = tn.text()
			}
			if err := mem.Appended(ctx, c, got[len(got)-1]+1); err != nil {
				return nil, nil, err
			}
		}
	}
	return docs, ids, nil
}

const tenant, chat = "eval", "locomo"

// answered is which ways reached every evidence turn of a question.
type answered struct{ first, five, words, base20, base100 bool }

// ask asks one question every way: as written (first page, and up to
// pages pages), by its content words, and by BM25 over the raw turns.
func ask(ctx context.Context, mem *memory.Memory, base *bm25, question string, want []int64) (answered, error) {
	var r answered
	hits := map[int64]bool{}
	for p := range pages {
		more, err := searchPage(ctx, mem, question, p, hits)
		if err != nil {
			return r, err
		}
		if p == 0 {
			r.first = all(want, hits)
		}
		if !more {
			break
		}
	}
	r.five = all(want, hits)
	words, err := byWords(ctx, mem, base, question)
	if err != nil {
		return r, err
	}
	r.words = all(want, words)
	top := base.top(question, 100)
	r.base20 = all(want, set(top[:min(20, len(top))]))
	r.base100 = all(want, set(top))
	return r, nil
}

// searchPage adds the hits of page p of a search for text to hits and
// reports whether the answer offers a next page.
func searchPage(ctx context.Context, mem *memory.Memory, text string, p int, hits map[int64]bool) (bool, error) {
	res, err := mem.Search(ctx, tenant, chat, wire.SearchArgs{Text: text, Skip: int64(p * memory.SearchHits)})
	if err != nil {
		return false, err
	}
	body := ""
	if len(res.Content) > 0 {
		body = res.Content[0].Text
	}
	for _, m := range hitID.FindAllStringSubmatch(body, -1) {
		id, _ := strconv.ParseInt(m[1], 10, 64)
		hits[id] = true
	}
	return strings.Contains(body, "skip="), nil
}

// wordCalls is how many searches the content-words way makes.
const wordCalls = 10

// byWords searches the question's content words (its words less the
// common ones), one a call, the rarest in the chat first, as a caller
// that knows the chat would: the first page of each, then the second
// pages in the same order, and so on, wordCalls calls in all.
func byWords(ctx context.Context, mem *memory.Memory, base *bm25, question string) (map[int64]bool, error) {
	var ws []string
	for _, w := range plainWords(question) {
		if !english.IsStopWord(w) && !slices.Contains(ws, w) {
			ws = append(ws, w)
		}
	}
	slices.SortStableFunc(ws, func(a, b string) int { return base.df[a] - base.df[b] })
	hits := map[int64]bool{}
	open := slices.Clone(ws) // the words whose next page is still offered
	for calls, p := 0, 0; calls < wordCalls && len(open) > 0; p++ {
		var next []string
		for _, w := range open {
			if calls == wordCalls {
				break
			}
			calls++
			more, err := searchPage(ctx, mem, w, p, hits)
			if err != nil {
				return nil, err
			}
			if more {
				next = append(next, w)
			}
		}
		open = next
	}
	return hits, nil
}

func all(want []int64, got map[int64]bool) bool {
	for _, id := range want {
		if !got[id] {
			return false
		}
	}
	return true
}

func set(ids []int64) map[int64]bool {
	m := map[int64]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// bm25 is the baseline: BM25 over the raw turns' lower-cased words.
type bm25 struct {
	tf  []map[string]int
	len []int
	df  map[string]int
	avg float64
}

func plainWords(s string) []string {
	return strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !('a' <= r && r <= 'z' || '0' <= r && r <= '9' || r > 127)
	})
}

func newBM25(docs []string) *bm25 {
	b := &bm25{df: map[string]int{}}
	total := 0
	for _, d := range docs {
		tf := map[string]int{}
		ws := plainWords(d)
		for _, w := range ws {
			tf[w]++
		}
		for w := range tf {
			b.df[w]++
		}
		b.tf = append(b.tf, tf)
		b.len = append(b.len, len(ws))
		total += len(ws)
	}
	b.avg = float64(total) / float64(max(1, len(docs)))
	return b
}

func (b *bm25) top(q string, n int) []int64 {
	ws := slices.Compact(slices.Sorted(slices.Values(plainWords(q))))
	type scored struct {
		id int64
		s  float64
	}
	var all []scored
	for id, tf := range b.tf {
		s := 0.0
		for _, w := range ws {
			f := float64(tf[w])
			if f == 0 {
				continue
			}
			df := float64(b.df[w])
			idf := math.Log(1 + (float64(len(b.tf))-df+0.5)/(df+0.5))
			s += idf * f * 2.2 / (f + 1.2*(0.25+0.75*float64(b.len[id])/b.avg))
		}
		if s > 0 {
			all = append(all, scored{int64(id), s})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].s > all[j].s || all[i].s == all[j].s && all[i].id > all[j].id })
	out := make([]int64, 0, n)
	for _, s := range all[:min(n, len(all))] {
		out = append(out, s.id)
	}
	return out
}
