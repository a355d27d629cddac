// Command eval-locomo measures search's evidence recall on LoCoMo
// conversations (evaluation data, not part of the repository: pass the
// file). Each conversation is logged through the transcript and memory, as
// an append is, each in its own chat and then all in one chat; each
// question of categories 1-4 is asked once, as written, and counts when
// every turn its evidence names is among the hits of the first page, or of
// the first five pages. Beside it, in the same run, BM25 over the raw turns
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

// tally counts questions answered, per category and in all.
type tally struct{ asked, first, five, base20, base100 map[int]int }

func newTally() tally {
	return tally{map[int]int{}, map[int]int{}, map[int]int{}, map[int]int{}, map[int]int{}}
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
	fmt.Fprintf(out, "LoCoMo evidence recall, %d conversations, the question as written, one search a page (20 hits), ranked %s\n\n", len(samples), mode)
	fmt.Fprintln(out, "| category | questions | own: search p1 | own: search p1-5 | own: BM25 raw top 20 | own: BM25 raw top 100 | one chat: search p1 | one chat: search p1-5 | one chat: BM25 raw top 20 | one chat: BM25 raw top 100 |")
	fmt.Fprintln(out, "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
	for _, c := range []int{1, 2, 3, 4, 0} {
		name := strconv.Itoa(c)
		if c == 0 {
			name = "all"
		}
		a := own.asked[c]
		r := func(n int) string { return fmt.Sprintf("%.3f", float64(n)/float64(max(a, 1))) }
		fmt.Fprintf(out, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", name, a,
			r(own.first[c]), r(own.five[c]), r(own.base20[c]), r(own.base100[c]),
			r(one.first[c]), r(one.five[c]), r(one.base20[c]), r(one.base100[c]))
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
	const tenant, chat = "eval", "locomo"
	var docs []string
	ids := map[string]int64{} // sample/dia_id -> entry id
	for _, s := range samples {
		turns, err := s.turns()
		if err != nil {
			return err
		}
		for k := 0; k < len(turns); k += 50 {
			batch := turns[k:min(len(turns), k+50)]
			msgs := make([]pi.Message, len(batch))
			for j, tn := range batch {
				msgs[j] = pi.Message{Role: "user", Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(tn.text())}}}
			}
			c, got, err := log.AppendChat(ctx, tenant, chat, msgs, fmt.Sprintf("%s-%d", s.ID, k))
			if err != nil {
				return err
			}
			for j, tn := range batch {
				ids[s.ID+"/"+tn.DiaID] = got[j]
				for int64(len(docs)) <= got[j] {
					docs = append(docs, "")
				}
				docs[got[j]] = tn.text()
			}
			if err := mem.Appended(ctx, c, got[len(got)-1]+1); err != nil {
				return err
			}
		}
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
			hits := map[int64]bool{}
			first := false
			for p := range pages {
				res, err := mem.Search(ctx, tenant, chat, wire.SearchArgs{Text: q.Question, Skip: int64(p * memory.SearchHits)})
				if err != nil {
					return err
				}
				text := ""
				if len(res.Content) > 0 {
					text = res.Content[0].Text
				}
				for _, m := range hitID.FindAllStringSubmatch(text, -1) {
					id, _ := strconv.ParseInt(m[1], 10, 64)
					hits[id] = true
				}
				if p == 0 {
					first = all(want, hits)
				}
				if !strings.Contains(text, "skip=") {
					break
				}
			}
			top := base.top(q.Question, 100)
			for _, c := range []int{q.Category, 0} {
				t.asked[c]++
				t.first[c] += b2i(first)
				t.five[c] += b2i(all(want, hits))
				t.base20[c] += b2i(all(want, set(top[:min(20, len(top))])))
				t.base100[c] += b2i(all(want, set(top)))
			}
		}
	}
	return nil
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
