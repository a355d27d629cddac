package memory

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/textcut"
	"github.com/durachat/durachat/shared/transcript"
)

// Embedder turns texts into vectors of one embedding model, for search by
// meaning. An error is an outage of the model: memory embeds the entries
// later and searches by words meanwhile.
type Embedder interface {
	// Name is the model as the settings show it ("openai:<model>").
	Name() string
	// Embed returns one vector per text, in order, each of the same
	// length.
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// The vectors of a chat live in its incarnation partition beside the
// search index:
//
//   - s/v/<id>: the vector of entry id, unit length, quantized to one
//     signed byte a dimension with the vector's own scale (a 1,024
//     dimension vector is about 1 KB, whatever the entry's size);
//   - s/w: how far the log is embedded, and by which model.
//
// An entry is embedded once, after it is logged: by the build of its leaf,
// or by a search that finds it not yet embedded. An outage of the model
// leaves the mark where it is, and the next build or search goes on from
// there; a search meanwhile ranks by words alone and says so.
const (
	vectorPrefix = store.SearchPrefix + "v/"
	// embedBatch is how many entries one call of the model embeds.
	embedBatch = 16
	// embedChars is how much of an entry's text is embedded: about 2,000
	// tokens, inside every common model's input.
	embedChars = 8000
	// buildEmbeds and searchEmbeds bound the entries one build, and one
	// search, embed before going on.
	buildEmbeds  = 4 * embedBatch
	searchEmbeds = 2 * embedBatch
	// maxDims bounds a stored vector: 4 KB at a byte a dimension.
	maxDims = 4096
	// vectorHits is how deep the ranking by meaning goes into fusion:
	// past it, the nearest vectors are rarely near at all.
	vectorHits = 100
	// rrfK is reciprocal rank fusion's constant, the usual one.
	rrfK = 60
	// embedWait bounds one call of the model: a search answers by words
	// rather than wait out a model that hangs.
	embedWait = 10 * time.Second
)

func embedMarkKey(c chatid.Chat) store.Key {
	return store.Key{PK: c.PK(), SK: store.SearchPrefix + "w"}
}

func vectorKey(c chatid.Chat, id int64) store.Key {
	return store.Key{PK: c.PK(), SK: fmt.Sprintf("%s%012d", vectorPrefix, id)}
}

// embedMark is how far the log of a chat is embedded, and by which model
// (a tag of its name: vectors of another model are embedded again).
type embedMark struct {
	To    int64  `json:"to"`
	Model uint32 `json:"model"`
}

// modelTag is a short tag of an embedding model's name, stored with each
// vector so that a vector of another model is never compared.
func modelTag(name string) uint32 {
	h := sha256.Sum256([]byte(name))
	return binary.BigEndian.Uint32(h[:4])
}

// quantize encodes v as stored: the model tag, the scale, and each
// dimension of v at unit length as a signed byte.
func quantize(tag uint32, v []float32) []byte {
	var norm, peak float64
	for _, x := range v {
		norm += float64(x) * float64(x)
		peak = max(peak, math.Abs(float64(x)))
	}
	norm = math.Sqrt(norm)
	out := make([]byte, 8+len(v))
	binary.BigEndian.PutUint32(out, tag)
	if norm == 0 || peak == 0 {
		return out
	}
	scale := peak / norm / 127
	binary.BigEndian.PutUint32(out[4:], math.Float32bits(float32(scale)))
	for k, x := range v {
		out[8+k] = byte(int8(math.Round(float64(x) / norm / scale)))
	}
	return out
}

// similarity is the cosine of the unit query q and the stored vector b
// (0 when b is of another model or length).
func similarity(tag uint32, q []float32, b []byte) float64 {
	if len(b) != 8+len(q) || binary.BigEndian.Uint32(b) != tag {
		return 0
	}
	scale := float64(math.Float32frombits(binary.BigEndian.Uint32(b[4:])))
	var dot float32
	for k, x := range q {
		dot += x * float32(int8(b[8+k]))
	}
	return float64(dot) * scale
}

// unit is v at unit length.
func unit(v []float32) []float32 {
	var norm float64
	for _, x := range v {
		norm += float64(x) * float64(x)
	}
	out := make([]float32, len(v))
	if norm == 0 {
		return out
	}
	norm = math.Sqrt(norm)
	for k, x := range v {
		out[k] = float32(float64(x) / norm)
	}
	return out
}

// EmbedError is an outage of the embedding model (or an answer memory
// cannot use): search ranks by words meanwhile.
type EmbedError struct{ Err error }

func (e *EmbedError) Error() string { return "embedding model: " + e.Err.Error() }
func (e *EmbedError) Unwrap() error { return e.Err }

// embed asks the model for one vector per text, each of 1 to maxDims
// dimensions; any failure is an *EmbedError.
func (m *Memory) embed(ctx context.Context, texts []string) ([][]float32, error) {
	ctx, cancel := context.WithTimeout(ctx, embedWait)
	defer cancel()
	vecs, err := m.embedder.Embed(ctx, texts)
	if err != nil {
		return nil, &EmbedError{Err: err}
	}
	if len(vecs) != len(texts) {
		return nil, &EmbedError{Err: fmt.Errorf("%d vectors for %d texts", len(vecs), len(texts))}
	}
	for _, v := range vecs {
		if len(v) == 0 || len(v) > maxDims {
			return nil, &EmbedError{Err: fmt.Errorf("a vector of %d dimensions (1 to %d)", len(v), maxDims)}
		}
	}
	return vecs, nil
}

// embedFollow embeds the entries logged since the mark, when a model is
// set and the chat searches; a failure is logged and left to the next
// build or search, which go on from the mark.
func (m *Memory) embedFollow(ctx context.Context, c chatid.Chat) {
	if m.embedder == nil {
		return
	}
	st, version, _, err := m.states.read(ctx, c)
	if err != nil || version == 0 || !m.searchOn(st) {
		return
	}
	if _, err := m.embedPending(ctx, c, buildEmbeds); err != nil {
		m.logger.WarnContext(ctx, "memory: embedding entries for search", "chat", c.ID, "err", err)
	}
}

// byMeaning fuses the ranking by words with the ranking by meaning of
// query, after embedding a few entries not embedded yet. An outage of the
// model leaves the ranking by words, and the note says so; an outage of
// the table is an error.
func (m *Memory) byMeaning(ctx context.Context, c chatid.Chat, query string, before int64, lexical []ranked) ([]ranked, string, error) {
	var outage *EmbedError
	pending, err := m.embedPending(ctx, c, searchEmbeds)
	if err != nil && !errors.As(err, &outage) {
		return nil, "", err
	}
	var vecs [][]float32
	if err == nil {
		vecs, err = m.embed(ctx, []string{textcut.Head(query, embedChars)})
	}
	if err != nil {
		if !errors.As(err, &outage) {
			return nil, "", err
		}
		m.logger.WarnContext(ctx, "memory: search by meaning unavailable", "chat", c.ID, "err", err)
		return lexical, "[search by meaning is unavailable just now (the embedding model failed): these hits match by words only]", nil
	}
	near, err := m.nearest(ctx, c, unit(vecs[0]), before)
	if err != nil {
		return nil, "", err
	}
	note := ""
	if pending > 0 {
		note = fmt.Sprintf("[%d recent entries are not embedded yet: they are found by their words only]", pending)
	}
	return fuse(lexical, near), note, nil
}

// EmbedModel is the embedding model's name, "" without one.
func (m *Memory) EmbedModel() string {
	if m.embedder == nil {
		return ""
	}
	return m.embedder.Name()
}

// readMark reads how far c is embedded by the configured model, and the
// mark's version (0: none yet).
func (m *Memory) readMark(ctx context.Context, c chatid.Chat) (embedMark, int64, error) {
	it, err := m.table.Get(ctx, embedMarkKey(c))
	if errors.Is(err, store.ErrNotFound) {
		return embedMark{}, 0, nil
	}
	if err != nil {
		return embedMark{}, 0, fmt.Errorf("memory: reading the embedding mark of %s: %w", c.ID, err)
	}
	var mk embedMark
	if err := json.Unmarshal(it.Body, &mk); err != nil {
		return embedMark{}, 0, fmt.Errorf("memory: embedding mark of %s: %w", c.ID, err)
	}
	if mk.Model != modelTag(m.embedder.Name()) {
		mk.To = 0 // another model's: embed again from the start
	}
	return mk, it.Version, nil
}

// EmbedPending embeds up to limit entries of the chat not embedded yet, as
// builds and searches do a few at a time, and returns how many are left:
// for a program that logs a whole chat before it searches (an import, an
// evaluation). Without an embedding model nothing is left.
func (m *Memory) EmbedPending(ctx context.Context, tenant, chat string, limit int64) (int64, error) {
	if m.embedder == nil {
		return 0, nil
	}
	c, err := m.current(ctx, tenant, chat)
	if err != nil {
		return 0, err
	}
	return m.embedPending(ctx, c, limit)
}

// embedPending embeds up to limit entries of c after its mark, embedBatch
// to a call, and moves the mark past them. It returns how many entries are
// left to embed.
func (m *Memory) embedPending(ctx context.Context, c chatid.Chat, limit int64) (int64, error) {
	mk, version, err := m.readMark(ctx, c)
	if err != nil {
		return 0, err
	}
	t, err := m.transcript.Len(ctx, c)
	if err != nil {
		return 0, err
	}
	tag := modelTag(m.embedder.Name())
	for done := int64(0); mk.To < t && done < limit; done += embedBatch {
		to := min(t, mk.To+embedBatch)
		if err := m.embedRange(ctx, c, tag, mk.To, to); err != nil {
			return t - mk.To, err
		}
		mk = embedMark{To: to, Model: tag}
		if version, err = m.advanceMark(ctx, c, mk, version); err != nil {
			return t - mk.To, err
		}
	}
	return t - mk.To, nil
}

// embedRange embeds the searchable entries [from, to) of c and writes their
// vectors.
func (m *Memory) embedRange(ctx context.Context, c chatid.Chat, tag uint32, from, to int64) error {
	entries, err := m.transcript.Entries(ctx, c, from, to)
	if err != nil {
		return err
	}
	entries = slices.DeleteFunc(entries, func(e transcript.Entry) bool {
		return !indexable(e) || strings.TrimSpace(e.Text) == ""
	})
	if len(entries) == 0 {
		return nil
	}
	texts := make([]string, len(entries))
	for k, e := range entries {
		texts[k] = textcut.Head(m.describedText(ctx, c.Tenant, e.Text), embedChars)
	}
	vecs, err := m.embed(ctx, texts)
	if err != nil {
		return fmt.Errorf("memory: embedding entries %d to %d of %s: %w", from, to, c.ID, err)
	}
	for k, e := range entries {
		it := store.Item{Key: vectorKey(c, e.I), Body: quantize(tag, vecs[k])}
		if err := m.putItem(ctx, it, true); err != nil {
			return err
		}
	}
	return nil
}

// advanceMark writes mk over the mark at version (0: none), unless another
// writer moved it as far already; it returns the mark's new version.
func (m *Memory) advanceMark(ctx context.Context, c chatid.Chat, mk embedMark, version int64) (int64, error) {
	body, err := json.Marshal(mk)
	if err != nil {
		return 0, err
	}
	it := store.Item{Key: embedMarkKey(c), Version: version + 1, Body: body}
	if version == 0 {
		err = m.table.Create(ctx, it)
	} else {
		err = m.table.Update(ctx, it)
	}
	if errors.Is(err, store.ErrConditionFailed) {
		cur, v, rerr := m.readMark(ctx, c)
		if rerr != nil {
			return 0, rerr
		}
		if cur.To >= mk.To {
			return v, nil
		}
		return m.advanceMark(ctx, c, mk, v)
	}
	if err != nil {
		return 0, fmt.Errorf("memory: writing the embedding mark of %s: %w", c.ID, err)
	}
	return it.Version, nil
}

// unembed deletes the vectors of ids: an erased entry's meaning leaves the
// index with its words.
func (m *Memory) unembed(ctx context.Context, c chatid.Chat, ids []int64) error {
	for _, id := range ids {
		if err := m.table.Delete(ctx, vectorKey(c, id), 0); err != nil {
			return fmt.Errorf("memory: deleting the vector of entry %d of %s: %w", id, c.ID, err)
		}
	}
	return nil
}

// nearest ranks the embedded entries of c before before by their
// similarity to the unit query vector q, the vectorHits nearest first,
// reading the vectors a page at a time.
func (m *Memory) nearest(ctx context.Context, c chatid.Chat, q []float32, before int64) ([]ranked, error) {
	tag := modelTag(m.embedder.Name())
	var top []ranked
	query := store.Query{PK: c.PK(), Prefix: vectorPrefix}
	for {
		page, err := m.table.Query(ctx, query)
		if err != nil {
			return nil, fmt.Errorf("memory: reading the vectors of %s: %w", c.ID, err)
		}
		for _, it := range page.Items {
			id, err := strconv.ParseInt(strings.TrimPrefix(it.SK, vectorPrefix), 10, 64)
			if err != nil || id >= before {
				continue
			}
			if s := similarity(tag, q, it.Body); s > 0 {
				top = append(top, ranked{id, s})
			}
		}
		top = bestOf(top, vectorHits)
		if page.Next == "" {
			return top, nil
		}
		query.After = page.Next
	}
}

// bestOf is the n best of rs, best first (newer first among equals).
func bestOf(rs []ranked, n int) []ranked {
	slices.SortFunc(rs, func(a, b ranked) int {
		if c := cmp.Compare(b.score, a.score); c != 0 {
			return c
		}
		return cmp.Compare(b.id, a.id)
	})
	return rs[:min(n, len(rs))]
}

// fuse merges rankings by reciprocal rank fusion: an entry scores the sum
// of 1/(rrfK+rank) over the rankings holding it (rank from 1), best first,
// newer first among equals.
func fuse(rankings ...[]ranked) []ranked {
	score := map[int64]float64{}
	for _, r := range rankings {
		for k, h := range r {
			score[h.id] += 1 / float64(rrfK+k+1)
		}
	}
	out := make([]ranked, 0, len(score))
	for id, s := range score {
		out = append(out, ranked{id, s})
	}
	return bestOf(out, len(out))
}
