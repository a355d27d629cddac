package imagefacts

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/hooks"
	"github.com/durachat/durachat/shared/model/anthropic"
	"github.com/durachat/durachat/shared/testenv"
)

var update = flag.Bool("update", false, "rewrite the measured table in docs/perf-images.md")

// docPath is the document that records the plumbing table; the test keeps
// it equal to what it measures.
var docPath = filepath.Join("..", "..", "docs", "perf-images.md")

const (
	tableBegin   = "<!-- imagefacts table: begin -->\n"
	tableEnd     = "<!-- imagefacts table: end -->"
	answersBegin = "<!-- imagefacts answers: begin -->\n"
	answersEnd   = "<!-- imagefacts answers: end -->"
)

func renderAll(t testing.TB, facts []Fact) [][]byte {
	t.Helper()
	var out [][]byte
	for _, f := range facts {
		png, err := Render(f)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, png)
	}
	return out
}

func storesOf(b testenv.Backend) Stores {
	return Stores{Table: b.Table, Blobs: b.Blobs, Queue: b.Queue, Receiver: b.Receiver}
}

// TestImageFactsReachLeafParentAndRootOnlyWhenImagesAreAttached is the
// plumbing check of image-aware summaries: 18 conversations sending 6
// fact-carrying images go through the real transcript, memory and
// compactor (Anthropic adapter, official SDK, local server) twice. Before:
// the model says it takes no images, as leaves were built before the
// change, so an image message stays its caption and label. After: images
// are attached. The scripted model can only know a fact from an attached
// image or from the text it compresses.
func TestImageFactsReachLeafParentAndRootOnlyWhenImagesAreAttached(t *testing.T) {
	facts := Catalog()
	convs, err := Conversations(facts, renderAll(t, facts))
	if err != nil {
		t.Fatal(err)
	}
	srv := newScripted(t, facts)
	m := anthropic.New(srv.Client(), "claude-scripted", anthropic.Options{})

	// A bound on a hang, not a timing assertion: the run takes seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	before, err := Run(ctx, Setup{Name: "Before: no images attached", Stores: storesOf(testenv.Embedded(t)),
		Model: TextOnly{m}, Facts: facts, Conversations: convs, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	afterStores := storesOf(testenv.Embedded(t))
	after, err := Run(ctx, Setup{Name: "After: images attached", Stores: afterStores,
		Model: m, Facts: facts, Conversations: convs, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	table := Table(before, after)
	t.Logf("image facts, %d conversations per arm:\n%s", len(convs), table)
	if testing.Verbose() {
		// Every line of the before arm misses; the after arm's misses say why
		// a share is below 100%.
		t.Logf("after: lines graded short of their fact:\n%s", MissReport(after))
	}

	for _, p := range srv.Problems() {
		t.Errorf("scripted model: %s", p)
	}
	// Leaves and merges are written in groups too: the shares below hold
	// for lines written several to a call. Which leaves share a call
	// depends on which build starts first, so how many of those calls carry
	// images varies from run to run.
	groups, groupImages := srv.Groups()
	t.Logf("group calls: %d, %d of them with images", groups, groupImages)
	if groups == 0 {
		t.Error("no group call: every line was written by a call of its own")
	}
	n := len(convs)
	if before.Found[AtLeaf] != 0 {
		t.Errorf("before: %d of %d leaves state their image's fact, want 0: no model saw an image", before.Found[AtLeaf], n)
	}
	if after.Found[AtLeaf] != n {
		t.Errorf("after: %d of %d leaves state their image's fact, want all", after.Found[AtLeaf], n)
	}
	for _, level := range []int{AtParent, AtRoot} {
		if after.Share(level) < 0.9 || after.Share(level) < before.Share(level)+0.5 {
			t.Errorf("after: %s share %.0f%% (before %.0f%%), want at least 90%% and 50 points over before",
				levelNames[level], 100*after.Share(level), 100*before.Share(level))
		}
	}
	if before.Invented != 0 || after.Invented != 0 {
		t.Errorf("lines state facts of images their chat never sent: before %d, after %d", before.Invented, after.Invented)
	}
	if after.Images.Attached != int64(n) || after.Images.Skipped != 0 {
		t.Errorf("after: memory reports %d images attached, %d skipped; want %d and 0", after.Images.Attached, after.Images.Skipped, n)
	}
	if before.Images.Attached != 0 || before.Images.Skipped != int64(n) {
		t.Errorf("before: memory reports %d images attached, %d skipped; want 0 and %d", before.Images.Attached, before.Images.Skipped, n)
	}
	if seen := srv.Seen(); len(seen) != len(facts) {
		t.Errorf("the model saw %d distinct images, want %d", len(seen), len(facts))
	}
	if before.Usage.ImageCalls != 0 || after.Usage.ImageCalls != n {
		t.Errorf("calls with images: before %d, after %d; want 0 and %d (one per image message)", before.Usage.ImageCalls, after.Usage.ImageCalls, n)
	}
	if after.Images.Described != int64(n) || after.Images.DescribeFailed != 0 || before.Images.Described != 0 || before.Images.DescribePending != int64(n) {
		t.Errorf("descriptions: after %+v, before %+v; want all %d described after, all pending before", after.Images, before.Images, n)
	}
	checkDoc(t, tableBegin, tableEnd, table)

	// Asked later about each image, with the after arm's stores (where the
	// leaves wrote the descriptions).
	ask := func(name, mode string) Answers {
		a, err := Ask(ctx, AskSetup{Name: name, Blobs: afterStores.Blobs, Model: m, Mode: mode, Facts: facts, Conversations: convs})
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	bare := ask("Text-only model, no images (bare refs)", "")
	inline := ask("Images attached (before-request, inline)", hooks.ModeInline)
	described := ask("Text-only model, descriptions on (before-request, describe)", hooks.ModeDescribe)
	answers := AnswerTable(bare, inline, described)
	t.Logf("questions about the images:\n%s", answers)
	for _, p := range srv.Problems() {
		t.Errorf("scripted model: %s", p)
	}
	if bare.Answered != 0 || inline.Answered != n || described.Answered != n || described.Pending != 0 {
		t.Errorf("answers: bare refs %d, images %d, descriptions %d (%d pending); want 0, %d, %d, 0",
			bare.Answered, inline.Answered, described.Answered, described.Pending, n, n)
	}
	checkDoc(t, answersBegin, answersEnd, answers)
}

// checkDoc keeps the table recorded between begin and end equal to the
// measured one; -update rewrites it.
func checkDoc(t *testing.T, tableBegin, tableEnd, table string) {
	t.Helper()
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatalf("reading the recorded table: %v", err)
	}
	i := bytes.Index(doc, []byte(tableBegin))
	j := bytes.Index(doc, []byte(tableEnd))
	if i < 0 || j < i {
		t.Fatalf("%s has no table between %q and %q", docPath, strings.TrimSpace(tableBegin), tableEnd)
	}
	recorded := string(doc[i+len(tableBegin) : j])
	if recorded == table {
		return
	}
	if !*update {
		t.Errorf("%s records another table; run go test ./eval/imagefacts -update to record this one:\n%s", docPath, table)
		return
	}
	out := append(append(append([]byte{}, doc[:i+len(tableBegin)]...), table...), doc[j:]...)
	if err := os.WriteFile(docPath, out, 0o644); err != nil {
		t.Fatal(err)
	}
}
