package cost

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/model/bedrock"
	"github.com/durachat/durachat/shared/model/bedrock/bedrocktest"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/store/storetest"
	"github.com/durachat/durachat/shared/testenv"
	"github.com/durachat/durachat/shared/transcript"
)

// The reference chat, one month: 10,000 messages in 2,000 turns of 5, 300
// of them tool results with a screenshot. Turns come 2 minutes apart in
// bursts of 25; the test runs the first bursts and scales the counts.
const (
	monthMessages = 10_000
	turnMessages  = 5
	burstTurns    = 25
	turnGap       = 2 * time.Minute
	burstGap      = 6 * time.Hour
	// Tool results 0, 7 and 14 of every 20 have a screenshot: 300 a month.
	shotsEvery = 20
	modelID    = "us.anthropic.claude-haiku-4-5-20251001-v1:0"
	// minCacheTokens is Claude Haiku 4.5's minimum per cache point on
	// Bedrock.
	minCacheTokens = 4096
)

// counts are the billed requests of a run.
type counts struct {
	Messages, Turns, Screenshots int
	ModelCalls                   int
	InputTokens                  int // uncached
	CacheReadTokens              int
	CacheWriteTokens             int
	OutputTokens                 int
	ReadUnits, WriteUnits        int // DynamoDB request units
	S3Puts, S3Gets               int
	QueueMessages                int
}

// scaled is c multiplied to a month of the reference chat.
func (c counts) scaled() counts {
	f := float64(monthMessages) / float64(c.Messages)
	s := func(n int) int { return int(float64(n)*f + 0.5) }
	return counts{Messages: s(c.Messages), Turns: s(c.Turns), Screenshots: s(c.Screenshots),
		ModelCalls: s(c.ModelCalls), InputTokens: s(c.InputTokens), CacheReadTokens: s(c.CacheReadTokens),
		CacheWriteTokens: s(c.CacheWriteTokens), OutputTokens: s(c.OutputTokens), ReadUnits: s(c.ReadUnits),
		WriteUnits: s(c.WriteUnits), S3Puts: s(c.S3Puts), S3Gets: s(c.S3Gets), QueueMessages: s(c.QueueMessages)}
}

// List prices, us-east-1, November 2026, per unit.
const (
	priceInput      = 1.10 / 1e6  // Claude Haiku 4.5, geographic (us.) profile
	priceCacheWrite = 1.375 / 1e6 // 1.25 x input
	priceCacheRead  = 0.11 / 1e6  // 0.1 x input
	priceOutput     = 5.50 / 1e6
	priceReadUnit   = 0.125 / 1e6 // DynamoDB on demand
	priceWriteUnit  = 0.625 / 1e6
	priceS3Put      = 0.005 / 1000
	priceS3Get      = 0.0004 / 1000
	priceSQSRequest = 0.40 / 1e6 // send, receive and delete: 3 per message
)

func (c counts) bedrock() float64 {
	return float64(c.InputTokens)*priceInput + float64(c.CacheWriteTokens)*priceCacheWrite +
		float64(c.CacheReadTokens)*priceCacheRead + float64(c.OutputTokens)*priceOutput
}

func (c counts) stores() float64 {
	return float64(c.ReadUnits)*priceReadUnit + float64(c.WriteUnits)*priceWriteUnit +
		float64(c.S3Puts)*priceS3Put + float64(c.S3Gets)*priceS3Get + float64(3*c.QueueMessages)*priceSQSRequest
}

// TestReferenceChatCost runs the reference chat twice, with one node to
// a model call and with the group calls memory makes, and reports the
// monthly counts and cost of each; it fails when the model bill passes the
// budget or the group calls pass 0.8 calls per message.
func TestReferenceChatCost(t *testing.T) {
	if testing.Short() {
		t.Skip("a few thousand builds: not in -short")
	}
	const bursts = 8 // 1,000 messages
	var months [2]counts
	for k, arm := range []struct {
		name   string
		groups bool
	}{{"one node a call", false}, {"group calls", true}} {
		got := run(t, bursts, arm.groups)
		m := got.scaled()
		months[k] = m
		t.Logf("%s: measured %d messages: %+v", arm.name, got.Messages, got)
		t.Logf("%s: a month: model calls %d (%.2f a message); input tokens %d uncached, %d cache writes, %d cache reads; output %d",
			arm.name, m.ModelCalls, float64(m.ModelCalls)/float64(m.Messages), m.InputTokens, m.CacheWriteTokens, m.CacheReadTokens, m.OutputTokens)
		t.Logf("%s: a month: DynamoDB %d read units, %d write units; S3 %d puts, %d gets; SQS %d messages",
			arm.name, m.ReadUnits, m.WriteUnits, m.S3Puts, m.S3Gets, m.QueueMessages)
		t.Logf("%s: a month: Bedrock $%.2f, DynamoDB+S3+SQS $%.2f", arm.name, m.bedrock(), m.stores())
		if m.ModelCalls == 0 || m.CacheReadTokens == 0 {
			t.Fatalf("%s: no model calls or no cache reads: %+v", arm.name, m)
		}
	}
	before, after := months[0], months[1]
	// Dollars of Bedrock a month: half of the reference chat's whole bill
	// before the cache blocks (Bedrock about $93 of about $100).
	const budget = 50.0
	if b := after.bedrock(); b > budget {
		t.Errorf("Bedrock costs $%.2f a month, over the $%.0f budget", b, budget)
	}
	if perMessage := float64(after.ModelCalls) / float64(after.Messages); perMessage > 0.8 || after.ModelCalls >= before.ModelCalls {
		t.Errorf("group calls: %.2f model calls a message (%d a month, %d with one node a call), want at most 0.8",
			perMessage, after.ModelCalls, before.ModelCalls)
	}
}

func run(t *testing.T, bursts int, groups bool) counts {
	ctx := context.Background()
	be := testenv.Embedded(t)
	table := storetest.NewMeter(be.Table)
	blobs := &countingBlobs{Blobs: be.Blobs}
	clock := &clock{t: time.Date(2026, 11, 2, 9, 0, 0, 0, time.UTC)}
	queue := &batchQueue{clock: clock}
	cache := newPromptCache(minCacheTokens)
	var reply sync.Mutex
	srv := bedrocktest.New(t, func(n int, req bedrocktest.Request) bedrocktest.Reply {
		reply.Lock()
		defer reply.Unlock()
		cache.bill(req, clock.Now())
		text := answer(n, req)
		cache.output += tokens(len(text))
		return bedrocktest.Reply{Text: text}
	})
	imgs := images.New(blobs)
	log := transcript.New(transcript.Config{Table: table, Blobs: blobs, Images: imgs, Now: clock.Now})
	var comp memory.Compactor = compactor.New(bedrock.New(srv.Client(), modelID, bedrock.Options{CachePoint: true}), compactor.Options{})
	if !groups {
		comp = compactor.Single(comp)
	}
	mem, err := memory.New(memory.Config{
		Table: table, Transcript: log, Images: imgs, Queue: queue, Now: clock.Now,
		Compactor: comp,
		Logger:    slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	const tenant, chat = "t1", "reference"
	rng := rand.New(rand.NewPCG(1, 2))
	shot := screenshot(t)
	var c counts
	tool := 0
	for s := 0; s < bursts; s++ {
		for turn := 0; turn < burstTurns; turn++ {
			msgs := []pi.Message{
				text(pi.RoleUser, words(rng, 200)),
				text(pi.RoleAssistant, words(rng, 700)),
				text(pi.RoleAssistant, words(rng, 150)),
				toolResult(words(rng, 2500)),
				text(pi.RoleAssistant, words(rng, 900)),
			}
			if tool++; tool%shotsEvery%7 == 0 {
				msgs[3].Content.Blocks = append(msgs[3].Content.Blocks, pi.Block{Type: pi.TypeImage, Data: shot, MimeType: "image/png"})
				c.Screenshots++
			}
			for k, msg := range msgs {
				ch, ids, err := log.AppendChat(ctx, tenant, chat, []pi.Message{msg}, fmt.Sprintf("s%d-t%d-m%d", s, turn, k))
				if err != nil {
					t.Fatal(err)
				}
				if err := mem.Appended(ctx, ch, ids[len(ids)-1]+1); err != nil {
					t.Fatal(err)
				}
				c.Messages++
			}
			// The compact function consumes the builds in batches of 10.
			queue.drain(t, ctx, mem)
			// The turn reads the view.
			if _, err := mem.ReadView(ctx, tenant, chat, false); err != nil {
				t.Fatal(err)
			}
			c.Turns++
			clock.Add(turnGap)
		}
		clock.Add(burstGap)
	}
	c.ModelCalls = len(srv.Requests())
	c.InputTokens, c.CacheReadTokens, c.CacheWriteTokens, c.OutputTokens = cache.input, cache.read, cache.write, cache.output
	metered := table.Count()
	c.ReadUnits, c.WriteUnits = metered.ReadUnits, metered.WriteUnits
	c.S3Puts, c.S3Gets = blobs.puts, blobs.gets
	c.QueueMessages = queue.sent
	return c
}

func text(role, s string) pi.Message {
	return pi.Message{Role: role, Content: pi.Content{Blocks: []pi.Block{pi.TextBlock(s)}}}
}

func toolResult(s string) pi.Message {
	m := text(pi.RoleToolResult, s)
	m.ToolCallID, m.ToolName = "call", "shell"
	return m
}

var vocabulary = strings.Fields(`the login page fails when the auth cookie expires before the
redirect so we checked the server logs and found a timeout in the auth service while the cache
held a stale token for every user who signed in during the deploy window and the fix is to
refresh it on read then run the tests again with the new config file and compare output`)

// words is n bytes of plausible text.
func words(rng *rand.Rand, n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
		b.WriteByte(' ')
	}
	return strings.TrimSpace(b.String())
}

// groupNode finds the nodes a group task asks lines for.
var groupNode = regexp.MustCompile(`(?m)^(\d+\+\d+): (?:compress|merge) `)

// answer answers request n as the model would: one line, or for a group
// task one line under each node's head, each line its own.
func answer(n int, req bedrocktest.Request) string {
	var labels []string
	if len(req.Messages) > 0 {
		for _, b := range req.Messages[0].Content {
			if b.Text != nil && strings.HasPrefix(*b.Text, "Write ") {
				for _, m := range groupNode.FindAllStringSubmatch(*b.Text, -1) {
					labels = append(labels, m[1])
				}
			}
		}
	}
	if len(labels) == 0 {
		return line(n)
	}
	out := make([]string, len(labels))
	for k, label := range labels {
		out[k] = label + "|" + line(n*100+k)
	}
	return strings.Join(out, "\n")
}

// line is a summary line of about 330 bytes.
func line(n int) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(n)))
	return fmt.Sprintf("summary %x: ", sum[:4]) + strings.Repeat("the login fix refreshes the token; ", 9)
}

// screenshot is a 1280x800 PNG, base64.
func screenshot(t *testing.T) string {
	img := image.NewRGBA(image.Rect(0, 0, 1280, 800))
	for y := 0; y < 800; y += 40 {
		for x := 0; x < 1280; x++ {
			img.Set(x, y, color.RGBA{R: 40, G: 90, B: 160, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(buf.Bytes())
}
