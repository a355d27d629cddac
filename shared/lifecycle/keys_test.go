package lifecycle_test

import (
	"context"
	"fmt"
	"image/color"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/model/offline"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

// keyedBackend is a backend and a way to list every key its stores hold,
// read beneath the stores' contracts: the whole bbolt file, or a scan of
// the DynamoDB table and a listing of the bucket.
type keyedBackend struct {
	testenv.Backend
	keys func(t *testing.T) []string
}

// onDynalite is the AWS backend over a table of its own on dynalite, the
// strict DynamoDB, with dynalite's client and the table's name; ok false
// (logged) under -short or with no local SQS server.
func onDynalite(t *testing.T) (b testenv.Backend, d *awstest.DynamoDB, table string, ok bool) {
	if testing.Short() || awstest.SQSMissing() != "" {
		t.Log("leaving out dynalite: not in -short, or no local SQS server")
		return b, nil, "", false
	}
	b = testenv.AWS(t)
	d = awstest.StartDynalite(t)
	table = d.CreateTable(t)
	b.Name, b.Table = "dynalite", dynamo.New(d.Client, table)
	return b, d, table, true
}

func keyedBackends(t *testing.T) []keyedBackend {
	emb := testenv.Embedded(t)
	out := []keyedBackend{{Backend: emb, keys: func(t *testing.T) []string {
		all, err := emb.DB.Keys()
		if err != nil {
			t.Fatal(err)
		}
		// Queue messages are work in flight, not a chat's data: the
		// builds and deletion steps the test waited out are gone, and a
		// build of a deleted chat delivered later writes nothing.
		return slices.DeleteFunc(all, func(k string) bool { return strings.HasPrefix(k, "queues/") })
	}}}
	b, d, table, ok := onDynalite(t)
	if !ok {
		return out
	}
	out = append(out, keyedBackend{Backend: b, keys: func(t *testing.T) []string {
		var all []string
		p := dynamodb.NewScanPaginator(d.Client, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		for p.HasMorePages() {
			page, err := p.NextPage(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				pk, _ := it["pk"].(*types.AttributeValueMemberS)
				sk, _ := it["sk"].(*types.AttributeValueMemberS)
				if pk == nil || sk == nil {
					t.Fatalf("an item without string keys: %v", it)
				}
				all = append(all, "table/"+pk.Value+"\x00"+sk.Value)
			}
		}
		for after := ""; ; {
			keys, err := b.Blobs.List(t.Context(), "", after, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range keys {
				all = append(all, "blobs/"+k)
			}
			if len(keys) < 1000 {
				break
			}
			after = keys[len(keys)-1]
		}
		return all
	}})
	return out
}

// settle runs the memory's builds until every chat named is built and the
// queue's deletion steps are done, as the compact function would.
func (e *env) settle(chats ...string) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(e.t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = e.consumer.Worker(ctx, e.b.Receiver)
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(2 * time.Minute)
	for _, chat := range chats {
		for {
			s, err := e.memory.Status(ctx, "alice", chat)
			if err != nil {
				e.t.Fatal(err)
			}
			if s.Unbuilt == 0 && s.Entries > 0 {
				break
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("chat %s not built in time: %+v", chat, s)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// Deleted means gone: every key the stores hold after a chat is deleted
// was there before it was created, but for what the other chats still use.
// The chat held everything a chat can: entries and their receipts, memory
// nodes and state, its index item and retention, image references, an
// image another chat shares, its own images logged, images stored only
// through its hooks (after-tool, offload-input), a claimed and an
// unclaimed direct upload, descriptions, texts too big for their rows,
// search turned on, and a view snapshot.
func TestADeletedChatLeavesNoKeyBehindButWhatOtherChatsUse(t *testing.T) {
	t.Parallel()
	for _, kb := range keyedBackends(t) {
		t.Run(kb.Name, func(t *testing.T) {
			comp := compactor.New(offline.New(), compactor.Options{})
			e := newEnvBuilding(t, kb.Backend, 0, nil, comp)
			ctx := t.Context()
			descs := images.New(e.b.Blobs)
			shared := pngFor(t, color.RGBA{7, 7, 70, 255})
			sharedName := images.Name(shared)
			e.append("alice", "other", withImage("kept", shared), user("the other chat"))
			e.append("bob", "gone", user("another tenant's chat of the same id"))
			e.settle("other")
			before := kb.keys(t)

			// The chat, with every kind of thing a chat holds.
			own := pngFor(t, color.RGBA{8, 8, 80, 255})
			big := strings.Repeat("0123456789abcdef", 400<<10/16) // a tool call too big for its row
			e.append("alice", "gone", withImage("shared", shared), withImage("own", own), user("words to search for"),
				map[string]any{"role": "assistant", "timestamp": 1_700_000_001_000, "content": []map[string]any{
					{"type": "text", "text": "writing it"},
					{"type": "toolCall", "id": "t1", "name": "write", "arguments": map[string]any{"content": big}}}})
			hookOnly := e.afterTool("alice", "gone", pngFor(t, color.RGBA{9, 9, 90, 255}))[0]
			inputOnly := e.offloadInput("alice", "gone", pngFor(t, color.RGBA{10, 10, 100, 255}))[0]
			claimed := e.upload("alice", "gone", pngFor(t, color.RGBA{11, 11, 110, 255}))
			unclaimed := e.upload("alice", "gone", pngFor(t, color.RGBA{12, 12, 120, 255}))
			e.append("alice", "gone", refMessage(claimed))
			for _, name := range []string{sharedName, images.Name(own), hookOnly} {
				if err := descs.PutDescription(ctx, "alice", name, "a square of one colour "+name); err != nil {
					t.Fatal(err)
				}
			}
			for _, call := range []struct {
				method, path string
				body         any
			}{
				{"PUT", "/v1/chats/gone/retention", map[string]any{"days": 30}},
				{"PUT", "/v1/chats/gone/memory/settings", map[string]any{"search": true}},
				{"POST", "/v1/chats/gone/tools/search", map[string]any{"text": "search for"}},
				{"POST", "/v1/chats/gone/tools/zoom", map[string]any{"id": 0}},
				{"GET", "/v1/chats/gone/view", nil},
			} {
				if code, body := e.do("alice", call.method, call.path, call.body); code != http.StatusOK {
					t.Fatalf("%s %s: %d %s", call.method, call.path, code, body)
				}
			}
			// Enough short messages that the view, read once they are
			// built, keeps a snapshot of its lines.
			var chatter []map[string]any
			for i := 0; i < 40; i++ {
				chatter = append(chatter, user(fmt.Sprintf("short message %d", i)))
			}
			e.append("alice", "gone", chatter...)
			e.settle("gone")
			if code, body := e.do("alice", "GET", "/v1/chats/gone/view", nil); code != http.StatusOK {
				t.Fatalf("GET view: %d %s", code, body)
			}
			during := kb.keys(t)
			if len(during) <= len(before)+10 {
				t.Fatalf("the chat added %d keys: the test holds less than it says", len(during)-len(before))
			}
			// Its incarnation's partition is chat/alice/gone~<incarnation>.
			if !slices.ContainsFunc(during, func(k string) bool {
				return strings.Contains(k, "chat/alice/gone~") && strings.HasSuffix(k, "\x00"+store.ViewSK)
			}) {
				t.Fatal("the chat holds no view snapshot: the test holds less than it says")
			}

			if code, a := e.delete("alice", "gone"); code != http.StatusOK || !a.Deleted {
				t.Fatalf("delete = %d %+v", code, a)
			}
			e.drain()
			after := kb.keys(t)

			// What other chats still use and the chat's life added: the
			// shared image's description (its chat "other" names it) and
			// the tenant's enrolment in the retention sweep (the tenant's,
			// not the chat's).
			allowed := map[string]bool{}
			for _, k := range during {
				if strings.HasSuffix(k, store.DescriptionKey("alice", sharedName)) || strings.Contains(k, "retention\x00") {
					allowed[k] = true
				}
			}
			var left, lost []string
			for _, k := range after {
				if !slices.Contains(before, k) && !allowed[k] {
					left = append(left, fmt.Sprintf("%q", k))
				}
			}
			for _, k := range before {
				if !slices.Contains(after, k) {
					lost = append(lost, fmt.Sprintf("%q", k))
				}
			}
			t.Logf("%d keys before the chat, %d with it, %d after its deletion", len(before), len(during), len(after))
			if len(left) > 0 || len(lost) > 0 {
				t.Fatalf("after the deletion:\nleft behind: %s\nlost from before: %s", strings.Join(left, "\n  "), strings.Join(lost, "\n  "))
			}
			for _, name := range []string{images.Name(own), hookOnly, inputOnly, claimed, unclaimed} {
				if e.stored("alice", name) {
					t.Fatalf("image %s of the deleted chat is still stored", name)
				}
			}
			if !e.stored("alice", sharedName) {
				t.Fatal("the image the other chat names went with the deleted chat")
			}
			if p := e.messages("alice", "other", ""); len(p.Messages) != 2 {
				t.Fatalf("the other chat reads %d messages, want 2", len(p.Messages))
			}
			if p := e.messages("bob", "gone", ""); len(p.Messages) != 1 {
				t.Fatalf("the other tenant's chat of the same id reads %d messages, want 1", len(p.Messages))
			}
		})
	}
}
