package hooks

import (
	"context"
	"strings"
	"testing"

	"github.com/durachat/durachat/shared/refs"
)

// TestARefIsRestoredOnlyThroughAChatThatNamesIt: before-request restores,
// links and describes a ref only when the request's chat names its image;
// a ref to an image of the tenant that only another chat names, or that
// no chat names, is left as text as if the image were not stored, without
// its description. Telling which the chat names is one read of its
// identity and one batch read of its references, however many refs.
func TestARefIsRestoredOnlyThroughAChatThatNamesIt(t *testing.T) {
	eachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		mine := e.put(t, tenantA, pngB64(t, 81, 8, 8))
		elsewhere := e.putFor(t, tenantA, "chat-2", pngB64(t, 82, 8, 8))
		unnamed, err := e.images.Put(ctx, tenantA, pngB64(t, 83, 8, 8))
		if err != nil {
			t.Fatal(err)
		}
		const secret = "a passport photo of another chat"
		for _, n := range []string{mine, elsewhere, unnamed} {
			if err := e.images.PutDescription(ctx, tenantA, n, secret); err != nil {
				t.Fatal(err)
			}
		}
		content := list{}
		for range 10 { // repeated refs: still one batch read
			content = append(content, textBlock(refs.Ref(mine)), textBlock(refs.Ref(elsewhere)), textBlock(refs.Ref(unnamed)))
		}
		req := obj{"messages": list{obj{"role": "user", "content": content}}}
		tests := []struct {
			name   string
			body   obj
			mine   bool   // mine is restored
			reason string // why the others are not
		}{
			{"Inline", restoreBody(FormatAnthropic, req), true, ReasonNotFound},
			{"Links", obj{"format": FormatOpenAI, "budgetBytes": 0, "request": req}, true, ReasonNotFound},
			{"Budget", obj{"format": FormatPi, "budgetBytes": 0, "request": req}, false, ReasonNotFound},
			{"Describe", obj{"format": FormatAnthropic, "mode": ModeDescribe, "request": req}, false, ReasonDescribe},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				gets, batches := e.table.gets.Load(), e.table.batchGets.Load()
				var got describedAnswer
				e.postOK(t, tenantA, "hooks/before-request", tt.body, &got)
				if g, b := e.table.gets.Load()-gets, e.table.batchGets.Load()-batches; g != 1 || b != 1 {
					t.Errorf("%d reads and %d batch reads of the table, want 1 and 1", g, b)
				}
				reasons := map[string]string{}
				for _, u := range got.Unrestored {
					reasons[u.Name] = u.Reason
				}
				for _, n := range []string{elsewhere, unnamed} {
					if reasons[n] != tt.reason {
						t.Errorf("ref to %s: reason %q, want %q", n, reasons[n], tt.reason)
					}
				}
				if restored := len(got.Restored) == 1 && got.Restored[0] == mine; restored != tt.mine {
					t.Errorf("restored %v, want %s restored: %v", got.Restored, mine, tt.mine)
				}
				// Only mine's description may show: once per ref to it.
				if n := strings.Count(string(got.Request), secret); tt.mine && n != 0 || !tt.mine && n != 10 {
					t.Errorf("the description shows %d times: %s", n, got.Request)
				}
				if got.Described != strings.Count(string(got.Request), secret) {
					t.Errorf("described %d", got.Described)
				}
			})
		}
	})
}
