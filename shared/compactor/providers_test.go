package compactor_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model"
	"github.com/durachat/durachat/shared/model/anthropic"
	"github.com/durachat/durachat/shared/model/anthropic/anthropictest"
	"github.com/durachat/durachat/shared/model/bedrock"
	"github.com/durachat/durachat/shared/model/bedrock/bedrocktest"
	"github.com/durachat/durachat/shared/model/offline"
	"github.com/durachat/durachat/shared/model/openai"
	"github.com/durachat/durachat/shared/model/openai/openaitest"
)

// bigView is a compaction view long enough to carry cache marks.
func bigView(lines int) string {
	var b strings.Builder
	b.WriteString("<chat>\n")
	for i := 0; i < lines; i++ {
		fmt.Fprintf(&b, "%d+1|user: message number %d\n", i, i)
	}
	b.WriteString("</chat>")
	return b.String()
}

// wireCall is one request as a provider's server saw it, reduced to what
// the compactor's rules are about.
type wireCall struct {
	system   string
	messages int
	first    []string // texts of the first user message's blocks ("<image>" for an image)
	lastUser string
}

// provider runs the compactor through one provider's official SDK against
// a local server answering with reply(n, hasImages).
type provider struct {
	name string
	open func(t *testing.T, reply func(n int, images bool) (text string, status int)) (model.Model, func() []wireCall)
}

var providers = []provider{
	{"anthropic", func(t *testing.T, reply func(int, bool) (string, int)) (model.Model, func() []wireCall) {
		srv := anthropictest.New(t, func(n int, req anthropictest.Request) anthropictest.Reply {
			hasImages := false
			for _, b := range req.Messages[0].Content {
				hasImages = hasImages || b.Type == "image"
			}
			text, status := reply(n, hasImages)
			kind := map[int]string{400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}[status]
			return anthropictest.Reply{Text: text, Status: status, ErrorType: kind}
		})
		calls := func() []wireCall {
			var out []wireCall
			for _, r := range srv.Requests() {
				c := wireCall{system: r.System[0].Text, messages: len(r.Messages)}
				// The view arrives as 4-line blocks: join them back.
				var prefix strings.Builder
				inView := false
				for _, b := range r.Messages[0].Content {
					switch {
					case b.Type == "image":
						c.first = append(c.first, "<image>")
					case inView || (len(c.first) == 0 && strings.HasPrefix(b.Text, "<chat>")):
						inView = true
						prefix.WriteString(b.Text)
						if strings.HasSuffix(b.Text, "</chat>") {
							inView = false
							c.first = append(c.first, prefix.String())
						}
					default:
						c.first = append(c.first, b.Text)
					}
				}
				last := r.Messages[len(r.Messages)-1].Content
				c.lastUser = last[len(last)-1].Text
				out = append(out, c)
			}
			return out
		}
		return anthropic.New(srv.Client(), "claude-test", anthropic.Options{}), calls
	}},
	{"bedrock", func(t *testing.T, reply func(int, bool) (string, int)) (model.Model, func() []wireCall) {
		srv := bedrocktest.New(t, func(n int, req bedrocktest.Request) bedrocktest.Reply {
			hasImages := false
			for _, b := range req.Messages[0].Content {
				hasImages = hasImages || b.Image != nil
			}
			text, status := reply(n, hasImages)
			kind := map[int]string{400: "ValidationException", 403: "AccessDeniedException", 429: "ThrottlingException"}[status]
			return bedrocktest.Reply{Text: text, Status: status, ErrorType: kind}
		})
		calls := func() []wireCall {
			var out []wireCall
			for _, r := range srv.Requests() {
				c := wireCall{system: *r.System[0].Text, messages: len(r.Messages)}
				for _, b := range r.Messages[0].Content {
					if b.Image != nil {
						c.first = append(c.first, "<image>")
					} else if b.Text != nil {
						c.first = append(c.first, *b.Text)
					}
				}
				for _, b := range r.Messages[len(r.Messages)-1].Content {
					if b.Text != nil {
						c.lastUser = *b.Text
					}
				}
				out = append(out, c)
			}
			return out
		}
		return bedrock.New(srv.Client(), "test-model-v1", bedrock.Options{}), calls
	}},
	{"openai", func(t *testing.T, reply func(int, bool) (string, int)) (model.Model, func() []wireCall) {
		srv := openaitest.New(t, func(n int, req openaitest.Request) openaitest.Reply {
			hasImages := false
			for _, p := range req.Messages[1].Parts {
				hasImages = hasImages || p.ImageURL != nil
			}
			text, status := reply(n, hasImages)
			return openaitest.Reply{Text: text, Status: status}
		})
		calls := func() []wireCall {
			var out []wireCall
			for _, r := range srv.Requests() {
				c := wireCall{system: r.Messages[0].Parts[0].Text, messages: len(r.Messages) - 1}
				for _, p := range r.Messages[1].Parts {
					if p.ImageURL != nil {
						c.first = append(c.first, "<image>")
					} else {
						c.first = append(c.first, p.Text)
					}
				}
				last := r.Messages[len(r.Messages)-1].Parts
				c.lastUser = last[len(last)-1].Text
				out = append(out, c)
			}
			return out
		}
		return openai.New(srv.Client(), "gpt-test", openai.Options{}), calls
	}},
}

func TestEachProviderGetsTheViewThenTheTaskWithTheRuler(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			m, calls := p.open(t, func(int, bool) (string, int) { return "the line", 0 })
			in := leaf(long(900))
			in.Context = bigView(60)
			out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if out.Line != "the line" || out.Model != m.Name() {
				t.Fatalf("out = %+v", out)
			}
			c := calls()[0]
			if c.system != compactor.SystemPrompt || c.messages != 1 || len(c.first) != 2 || c.first[0] != in.Context {
				t.Fatalf("call = %+v", c)
			}
			if !strings.Contains(c.first[1], strings.Repeat("-", 512)) || !strings.Contains(c.first[1], "<input>\n"+in.Source+"\n</input>") {
				t.Fatalf("task = %q", c.first[1])
			}
		})
	}
}

func TestEachProviderRunsTheTooLongLoopAndKeepsTheShortestOfFive(t *testing.T) {
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			lens := []int{900, 640, 700, 800, 1000}
			m, calls := p.open(t, func(n int, _ bool) (string, int) { return strings.Repeat(string(rune('a'+n)), lens[n]), 0 })
			out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), leaf(long(3000)))
			if err != nil {
				t.Fatal(err)
			}
			if out.Line != strings.Repeat("b", 512) || out.Attempts != 5 {
				t.Fatalf("line %q (%d bytes), %d attempts", out.Line[:10], len(out.Line), out.Attempts)
			}
			cs := calls()
			if len(cs) != 5 {
				t.Fatalf("%d calls, want 5", len(cs))
			}
			for i, c := range cs {
				if c.messages != 1+2*i {
					t.Fatalf("call %d has %d messages, want %d", i, c.messages, 1+2*i)
				}
				if i > 0 && !strings.HasPrefix(c.lastUser, fmt.Sprintf("too long: %d bytes, over the limit", lens[i-1])) {
					t.Fatalf("call %d follow-up = %q", i, c.lastUser)
				}
			}
		})
	}
}

func TestEachProviderClassifiesErrorsThroughTheCompactor(t *testing.T) {
	for _, p := range providers {
		for _, tt := range []struct {
			status    int
			retryable bool
		}{{429, true}, {500, true}, {400, false}} {
			t.Run(fmt.Sprintf("%s/%d", p.name, tt.status), func(t *testing.T) {
				m, calls := p.open(t, func(int, bool) (string, int) { return "", tt.status })
				_, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), leaf(long(900)))
				if err == nil || model.IsRetryable(err) != tt.retryable || len(calls()) != 1 {
					t.Fatalf("err %v (retryable %v), %d calls", err, model.IsRetryable(err), len(calls()))
				}
			})
		}
	}
}

func TestEachProviderGetsImagesAfterTheTaskAndNamesOnlyWhenRejected(t *testing.T) {
	a, b := named("a", pngOf(t, 10, 10, red)), named("b", pngOf(t, 20, 10, blue))
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			// The provider rejects images: the second call has names only.
			m, calls := p.open(t, func(_ int, images bool) (string, int) {
				if images {
					return "", 400
				}
				return "ok", 0
			})
			source := "user: " + refOf(a) + " and " + refOf(b)
			in := leaf(source, a, b)
			out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if out.Line != source || !out.Verbatim || !out.NamesOnly || out.Attached != 2 {
				t.Fatalf("out = %+v", out)
			}
			cs := calls()
			if len(cs) != 2 {
				t.Fatalf("%d calls", len(cs))
			}
			want := []string{view, "task", refOf(a), "<image>", refOf(b), "<image>"}
			got := append([]string(nil), cs[0].first...)
			got[1] = "task"
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("first call blocks = %q, want %q", got, want)
			}
			if len(cs[1].first) != 2 || cs[1].first[0] != view {
				t.Fatalf("names-only call blocks = %q", cs[1].first)
			}
		})
	}
}

func TestOnAnthropicTheCacheMarksStayOnTheViewBlocksWithImagesAfterThem(t *testing.T) {
	srv := anthropictest.New(t, func(int, anthropictest.Request) anthropictest.Reply {
		return anthropictest.Reply{Text: "a red square and a blue one"}
	})
	m := anthropic.New(srv.Client(), "claude-test", anthropic.Options{})
	c := compactor.New(m, compactor.Options{})
	ctxView := bigView(170) // 43 whole blocks: marks on 42, 22 and 2
	a, b := named("a", pngOf(t, 10, 10, red)), named("b", pngOf(t, 10, 10, blue))
	in := leaf("user: "+refOf(a)+" "+refOf(b), a, b)
	in.Context = ctxView
	if _, err := c.Compact(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	text := leaf(long(900))
	text.Context = ctxView
	if _, err := c.Compact(context.Background(), text); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	withImages, textOnly := reqs[0].Messages[0].Content, reqs[1].Messages[0].Content

	var joined strings.Builder
	viewBlocks := 0
	marks := 0
	for i, blk := range withImages {
		if joined.String() == ctxView {
			break
		}
		joined.WriteString(blk.Text)
		viewBlocks = i + 1
		if blk.CacheControl != nil {
			marks++
		}
	}
	if joined.String() != ctxView || marks != 3 {
		t.Fatalf("view blocks do not rebuild the view, or %d marks (want 3)", marks)
	}
	rest := withImages[viewBlocks:]
	if len(rest) != 5 || rest[1].Text != refOf(a) || rest[2].Type != "image" || rest[3].Text != refOf(b) || rest[4].Type != "image" {
		t.Fatalf("after the view: %+v", rest)
	}
	if got := rest[2].Source.Data; got != base64.StdEncoding.EncodeToString(a.Data) {
		t.Fatal("first image is not a's")
	}
	for i, blk := range rest {
		if blk.CacheControl != nil {
			t.Fatalf("block %d after the view carries a cache mark", i)
		}
	}
	// The text-only call's prefix is the same, block for block and mark for mark.
	for i := 0; i < viewBlocks; i++ {
		x, y := withImages[i], textOnly[i]
		if x.Text != y.Text || (x.CacheControl == nil) != (y.CacheControl == nil) {
			t.Fatalf("view block %d differs between the image call and the text call", i)
		}
	}
	if reqs[0].System[0].Text != reqs[1].System[0].Text {
		t.Fatal("system prompts differ")
	}
}

func TestOpenModelOpensTheConfiguredProvider(t *testing.T) {
	ctx := context.Background()
	if m, err := compactor.OpenModel(ctx, config.Model{Provider: config.ProviderOffline}, "", ""); err != nil || m.Name() != "offline" {
		t.Fatalf("offline: %v %v", m, err)
	}
	if _, err := compactor.OpenModel(ctx, config.Model{Provider: "mystery", ID: "x"}, "", ""); err == nil {
		t.Fatal("an unknown provider opened")
	}
}

func TestOpenModelURLReachesEachProvider(t *testing.T) {
	ctx := context.Background()
	t.Setenv("AWS_REGION", "us-east-1")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTEST")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")
	ant := anthropictest.New(t, func(int, anthropictest.Request) anthropictest.Reply {
		return anthropictest.Reply{Text: "from anthropic"}
	})
	bed := bedrocktest.New(t, func(int, bedrocktest.Request) bedrocktest.Reply { return bedrocktest.Reply{Text: "from bedrock"} })
	oai := openaitest.New(t, func(int, openaitest.Request) openaitest.Reply { return openaitest.Reply{Text: "from openai"} })
	for _, tt := range []struct{ spec, url, key, want string }{
		{"anthropic:claude-x", ant.URL, "test-key", "from anthropic"},
		{"bedrock:anthropic.claude-x-v1:0", bed.URL, "", "from bedrock"},
		{"openai:local-model", oai.BaseURL(), openaitest.APIKey, "from openai"},
	} {
		spec, err := config.ParseModel(tt.spec)
		if err != nil {
			t.Fatal(err)
		}
		m, err := compactor.OpenModel(ctx, spec, tt.url, tt.key)
		if err != nil {
			t.Fatalf("%s: %v", tt.spec, err)
		}
		out, err := compactor.New(m, compactor.Options{}).Compact(ctx, leaf(long(900)))
		if err != nil || out.Line != tt.want {
			t.Fatalf("%s: %+v, %v", tt.spec, out, err)
		}
	}
	if bed.Requests()[0].Path != "/model/anthropic.claude-x-v1%3A0/converse" {
		t.Fatalf("bedrock path %s", bed.Requests()[0].Path)
	}
}

func TestOfflineCompactorLinesFitAndSayTheyAreExtracts(t *testing.T) {
	c := compactor.New(offline.New(), compactor.Options{})
	a := named("a", pngOf(t, 4, 4, red))
	leafIn := leaf(long(3000)+" "+refOf(a), a)
	out, err := c.Compact(context.Background(), leafIn)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Line) > 512 || !strings.HasPrefix(out.Line, offline.Marker) || out.Attempts != 1 || out.Attached != 0 ||
		!strings.Contains(out.Line, refOf(a)) {
		t.Fatalf("leaf: %+v", out)
	}
	merge := memory.CompactRequest{Level: 1, Index: 0, Label: "0+2", Context: view, Source: out.Line + "\n" + out.Line, Images: []model.Image{}}
	out2, err := c.Compact(context.Background(), merge)
	if err != nil {
		t.Fatal(err)
	}
	if len(out2.Line) > 512 || strings.Count(out2.Line, offline.Marker) != 1 || out2.Attempts != 1 {
		t.Fatalf("merge: %+v", out2)
	}
	again, _ := c.Compact(context.Background(), merge)
	if again.Line != out2.Line {
		t.Fatal("offline compactor is not deterministic")
	}
}

func TestEachProviderDescribesImagesInTheLeafCallWithoutChangingTheLine(t *testing.T) {
	a, b := named("a", pngOf(t, 10, 10, red)), named("b", pngOf(t, 20, 10, blue))
	long := strings.Repeat("seen ", 100)
	for _, p := range providers {
		t.Run(p.name, func(t *testing.T) {
			// The first reply describes a (too long) and forgets b; the
			// second, asked for b only, describes it.
			m, calls := p.open(t, func(n int, _ bool) (string, int) {
				if n == 0 {
					return "the line: " + refOf(a) + " next to " + refOf(b) + "\ndescription of " + refOf(a) + ": " + long, 0
				}
				return "description of " + refOf(b) + ": a blue block", 0
			})
			in := leaf("user: compare "+refOf(a)+" and "+refOf(b), a, b)
			in.Describe = []string{a.Name, b.Name}
			out, err := compactor.New(m, compactor.Options{}).Compact(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			if want := "the line: " + refOf(a) + " next to " + refOf(b); out.Line != want {
				t.Fatalf("line %q, want %q", out.Line, want)
			}
			da := out.Descriptions[a.Name]
			if len(da) > images.MaxDescription || !strings.HasPrefix(da, "seen seen") || out.Descriptions[b.Name] != "a blue block" {
				t.Fatalf("descriptions %q", out.Descriptions)
			}
			cs := calls()
			if len(cs) != 2 || out.Attempts != 2 || out.DescribeAsked != 2 {
				t.Fatalf("%d calls, %d attempts, %d asked", len(cs), out.Attempts, out.DescribeAsked)
			}
			if task := cs[0].first[1]; !strings.Contains(task, "for each of: "+refOf(a)+", "+refOf(b)) {
				t.Fatalf("task does not ask for both descriptions: %q", task)
			}
			if !strings.Contains(cs[1].lastUser, refOf(b)) || strings.Contains(cs[1].lastUser, refOf(a)) || cs[1].messages != 3 {
				t.Fatalf("follow-up %q in %d messages: want b only, in the same conversation", cs[1].lastUser, cs[1].messages)
			}
		})
	}
}

func TestOpenWritesGroupsWithAModelAndOneNodeACallOffline(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		model  config.Model
		groups bool
	}{
		{config.Model{Provider: config.ProviderOffline}, false},
		{config.Model{Provider: config.ProviderAnthropic, ID: "claude-x"}, true},
	} {
		c, err := compactor.Open(ctx, config.Config{Model: tt.model, ModelKey: "test-key"})
		if err != nil {
			t.Fatal(err)
		}
		if _, groups := c.(memory.GroupCompactor); groups != tt.groups {
			t.Errorf("%s: group calls %v, want %v", tt.model.Provider, groups, tt.groups)
		}
	}
}

func TestOpenEmbedderReachesAKeylessLocalEndpoint(t *testing.T) {
	ctx := context.Background()
	if e, err := compactor.OpenEmbedder(ctx, config.Config{}); err != nil || e != nil {
		t.Fatalf("no embedding model configured opened %v: %v", e, err)
	}
	var auth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		if r.URL.Path != "/v1/embeddings" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.5,0.25]}]}`))
	}))
	t.Cleanup(srv.Close)
	e, err := compactor.OpenEmbedder(ctx, config.Config{EmbedModel: config.Model{Provider: config.ProviderOpenAI, ID: "local"}, EmbedURL: srv.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	vecs, err := e.Embed(ctx, []string{"hello"})
	if err != nil || len(vecs) != 1 || vecs[0][0] != 0.5 || e.Name() != "openai:local" {
		t.Fatalf("%s: %v %v", e.Name(), vecs, err)
	}
	if strings.TrimSpace(strings.TrimPrefix(auth, "Bearer")) != "" {
		t.Fatalf("a key was sent to a keyless endpoint: %q", auth)
	}
}
