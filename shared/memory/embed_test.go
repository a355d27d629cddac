package memory

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/tasks"
	"github.com/durachat/durachat/shared/testenv"
)

// synonyms is an embedding model for tests: each word is a dimension of
// its own, except that words of one meaning share theirs, so a text and a
// query sharing no word but a meaning are near.
type synonyms struct {
	mu    sync.Mutex
	down  bool
	calls int
	texts int
}

var meanings = map[string]int{
	"relax": 0, "unwind": 0, "destress": 0, "calm": 0,
	"car": 1, "automobile": 1, "vehicle": 1,
	"spa": 2, "sauna": 2,
}

const synonymDims = 64

func (s *synonyms) Name() string { return "test:synonyms" }

func (s *synonyms) Embed(_ context.Context, texts []string) ([][]float32, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.down {
		return nil, errors.New("503 Service Unavailable")
	}
	s.texts += len(texts)
	out := make([][]float32, len(texts))
	for k, text := range texts {
		v := make([]float32, synonymDims)
		for _, w := range words(text) {
			if d, ok := meanings[w]; ok {
				v[d] += 4
				continue
			}
			h := 0
			for _, r := range w {
				h = h*31 + int(r)
			}
			v[8+(h%(synonymDims-8)+synonymDims-8)%(synonymDims-8)] += 0.1
		}
		out[k] = v
	}
	return out, nil
}

func (s *synonyms) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func TestFusionRanksEachEntryByItsReciprocalRanks(t *testing.T) {
	r := func(ids ...int64) []ranked {
		out := make([]ranked, len(ids))
		for k, id := range ids {
			out[k] = ranked{id: id, score: float64(len(ids) - k)}
		}
		return out
	}
	tests := []struct {
		name     string
		lexical  []ranked
		vector   []ranked
		wantBest []int64
	}{
		{"words alone", r(3, 1, 2), nil, []int64{3, 1, 2}},
		{"meaning alone", nil, r(7, 5), []int64{7, 5}},
		{"an entry both rank first is first", r(4, 1), r(4, 2), []int64{4, 2, 1}},
		{"an entry in both lists beats one first in one", r(1, 2, 3), r(9, 3, 8), []int64{3, 9, 1, 2, 8}},
		{"equal fused scores: the newer first", r(1), r(2), []int64{2, 1}},
		{"no ranking: no hit", nil, nil, []int64{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fuse(tt.lexical, tt.vector)
			ids := make([]int64, len(got))
			for k, h := range got {
				ids[k] = h.id
			}
			if fmt.Sprint(ids) != fmt.Sprint(tt.wantBest) {
				t.Fatalf("fused ids = %v, want %v", ids, tt.wantBest)
			}
			for k := 1; k < len(got); k++ {
				if got[k].score > got[k-1].score {
					t.Fatalf("not best first: %v", got)
				}
			}
		})
	}
}

func TestAQuantizedVectorKeepsItsCosine(t *testing.T) {
	a := []float32{0.3, -1.2, 0.05, 2.5, 0, -0.7, 0.9, 1.1}
	b := []float32{0.1, -1, 0.4, 2, 0.2, 0.1, -0.3, 1.5}
	var dot, na, nb float64
	for k := range a {
		dot += float64(a[k]) * float64(b[k])
		na += float64(a[k]) * float64(a[k])
		nb += float64(b[k]) * float64(b[k])
	}
	want := dot / math.Sqrt(na) / math.Sqrt(nb)
	tag := modelTag("m")
	got := similarity(tag, unit(a), quantize(tag, b))
	if math.Abs(got-want) > 0.01 {
		t.Fatalf("cosine %f after quantizing, want %f", got, want)
	}
	if s := similarity(modelTag("other"), unit(a), quantize(tag, b)); s != 0 {
		t.Fatalf("a vector of another model compared: %f", s)
	}
}

// embeddingFixture is a fixture over the embedded store's table whose
// memory searches with the synonyms model (nil: by words alone).
func embeddingFixture(t *testing.T, e Embedder) *fixture {
	t.Helper()
	f := newFixture(t)
	table := testenv.Embedded(t).Table
	m, err := New(Config{Table: table, Transcript: f.log, Queue: f.queue, Compactor: f.comp, Now: f.clock.Now,
		Logger: discardLogger(), Search: true, Embedder: e})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	f.append(t, "user",
		"After work I went to the sauna to unwind",
		"My car broke down on the highway",
		"We talked about the weather",
	)
	return f
}

func TestSearchFindsByMeaningAnEntrySharingNoWordWithTheQuery(t *testing.T) {
	query := wire.SearchArgs{Text: "how does she relax at the spa?"}
	if text := searchText(t, embeddingFixture(t, nil), query); strings.Contains(text, "id 0 ") {
		t.Fatalf("by words alone the query finds entry 0, so this test checks nothing:\n%s", text)
	}
	f := embeddingFixture(t, &synonyms{})
	text := searchText(t, f, query)
	if !strings.HasPrefix(strings.SplitN(text, "\n", 3)[2], "id 0 ") {
		t.Fatalf("entry 0 (sauna, unwind) is not the best hit for relax and spa:\n%s", text)
	}
	if strings.Contains(text, "not embedded") || strings.Contains(text, "unavailable") {
		t.Fatalf("a note where every entry is embedded:\n%s", text)
	}
	if text := searchText(t, f, wire.SearchArgs{Text: "automobile"}); !strings.Contains(text, "id 1 ") {
		t.Fatalf("automobile does not find the car:\n%s", text)
	}
}

func TestAnEmbeddingOutageFailsNoAppendAndSearchFallsBackToWords(t *testing.T) {
	model := &synonyms{down: true}
	f := embeddingFixture(t, model)
	msg := tasks.For(tasks.Build, f.ch())
	if err := f.m.BuildTask(t.Context(), msg); err != nil {
		t.Fatalf("a leaf's build failed with the embedding model down: %v", err)
	}
	text := searchText(t, f, wire.SearchArgs{Text: "car sauna"})
	if !strings.Contains(text, "id 0 ") || !strings.Contains(text, "id 1 ") || !strings.Contains(text, "match by words only") {
		t.Fatalf("with the model down, search must rank by words and say so:\n%s", text)
	}
	model.setDown(false)
	if err := f.m.BuildTask(t.Context(), msg); err != nil {
		t.Fatal(err)
	}
	mk, _, err := f.m.readMark(t.Context(), f.ch())
	if err != nil || mk.To != 3 {
		t.Fatalf("the build embedded up to %d, want 3: %v", mk.To, err)
	}
	if text := searchText(t, f, wire.SearchArgs{Text: "relax"}); !strings.Contains(text, "id 0 ") || strings.Contains(text, "words only") {
		t.Fatalf("once the model is back, search by meaning:\n%s", text)
	}
	calls := model.texts
	searchText(t, f, wire.SearchArgs{Text: "relax"})
	if model.texts != calls+1 {
		t.Fatalf("a search embedded %d texts, want only its query: each entry is embedded once", model.texts-calls)
	}
}

func TestAnErasedEntryLeavesTheVectors(t *testing.T) {
	f := embeddingFixture(t, &synonyms{})
	if text := searchText(t, f, wire.SearchArgs{Text: "relax"}); !strings.Contains(text, "id 0 ") {
		t.Fatalf("no hit before the erasure:\n%s", text)
	}
	f.erase(t, 0)
	if _, err := f.m.table.Get(t.Context(), vectorKey(f.ch(), 0)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the erased entry's vector is still stored: %v", err)
	}
	if text := searchText(t, f, wire.SearchArgs{Text: "relax"}); strings.Contains(text, "id 0 ") {
		t.Fatalf("the erased entry is found by meaning:\n%s", text)
	}
}

func TestSettingsSayHowSearchRanks(t *testing.T) {
	for _, tt := range []struct {
		e          Embedder
		mode, name string
	}{
		{nil, wire.SearchLexical, ""},
		{&synonyms{}, wire.SearchLexicalVector, "test:synonyms"},
	} {
		f := embeddingFixture(t, tt.e)
		rec, out := f.serve(t, "GET", "/v1/chats/"+f.chat+"/memory/settings", nil)
		if rec.Code != 200 || out["searchMode"] != tt.mode || out["search"] != true || (out["embedModel"] != nil) != (tt.name != "") {
			t.Fatalf("GET settings = %d %v, want searchMode %q and model %q", rec.Code, out, tt.mode, tt.name)
		}
		if tt.name != "" && out["embedModel"] != tt.name {
			t.Fatalf("GET settings names the model %v, want %q", out["embedModel"], tt.name)
		}
		s, err := f.m.Status(t.Context(), f.tenant, f.chat)
		if err != nil || s.SearchMode != tt.mode || s.EmbedModel != tt.name {
			t.Fatalf("status says %q %q, want %q %q: %v", s.SearchMode, s.EmbedModel, tt.mode, tt.name, err)
		}
	}
}

// descriptions are images' descriptions, by name.
type descriptions map[string]string

func (d descriptions) Description(_ context.Context, _, name string) (string, error) {
	if s, ok := d[name]; ok {
		return s, nil
	}
	return "", store.ErrNotFound
}

func (d descriptions) PutDescription(context.Context, string, string, string) error { return nil }

func TestAnImageIsFoundByItsDescription(t *testing.T) {
	f := newFixture(t)
	name := strings.Repeat("ab", 8)
	m, err := New(Config{Table: f.table, Transcript: f.log, Queue: f.queue, Compactor: f.comp, Now: f.clock.Now,
		Logger: discardLogger(), Search: true, Descriptions: descriptions{name: "a red bicycle leaning on a fence"}})
	if err != nil {
		t.Fatal(err)
	}
	f.m = m
	f.log.add(f.chat, "user", "look at this "+refs.Ref(name))
	for i := range segEntries {
		f.log.add(f.chat, "user", fmt.Sprintf("entry %d", i))
	}
	if err := m.Appended(t.Context(), f.ch(), segEntries+1); err != nil {
		t.Fatal(err)
	}
	if text := searchText(t, f, wire.SearchArgs{Text: "bicycles"}); !strings.Contains(text, "id 0 ") {
		t.Fatalf("the image's description is not searched:\n%s", text)
	}
}

// hanging is an embedding model that never answers.
type hanging struct{}

func (hanging) Name() string { return "test:hanging" }

func (hanging) Embed(ctx context.Context, _ []string) ([][]float32, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestAHangingEmbeddingModelLeavesSearchByWords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.m.search, f.m.embedder = true, hanging{}
		f.append(t, "user", "my car broke down")
		if text := searchText(t, f, wire.SearchArgs{Text: "car"}); !strings.Contains(text, "id 0 ") || !strings.Contains(text, "words only") {
			t.Fatalf("with the model hanging, search must answer by words and say so:\n%s", text)
		}
	})
}
