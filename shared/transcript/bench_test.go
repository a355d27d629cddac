package transcript

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/pi"
	"github.com/durachat/durachat/shared/refs"
	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/testenv"
)

// BenchmarkChatTableBytes logs a chat of 50 messages (25 user, 25
// assistant) in which 6 distinct images are sent 3 times each, one append
// per message as a host logs them, and reports:
//
//   - table-B: bytes of every item written (entry rows, receipt records,
//     the chat's identity), as DynamoDB counts item size;
//   - rows-B: the entry rows alone;
//   - inline-B: the same entry rows with each ref replaced by the image's
//     base64, which is what a chat history keeping images in its rows stores;
//   - inline-over-limit: how many of those rows would pass DynamoDB's 400 KB;
//   - images: image objects stored;
//   - table-writes: items written (entries, receipts, the identity).
//
// Images are PNGs of noise (incompressible): 200 px is about 160 KB of
// base64, 600 px about 1.4 MB (under the 2 MiB shrink threshold, so kept
// byte-identical).
func BenchmarkChatTableBytes(b *testing.B) {
	for _, side := range []int{200, 600} {
		b.Run(fmt.Sprintf("%dpx", side), func(b *testing.B) { benchChat(b, side) })
	}
}

func benchChat(b *testing.B, side int) {
	var b64s []string
	for i := range 6 {
		b64s = append(b64s, pngB64(b, uint64(1000+i), side, side))
	}
	byName := map[string]string{}
	for _, s := range b64s {
		byName[images.Name(s)] = s
	}
	var msgs []pi.Message
	for i := range 50 {
		k := i / 2
		switch {
		case i%2 == 1:
			msgs = append(msgs, msg(b, `{"role":"assistant","content":[{"type":"text","text":`+jsonString(fmt.Sprintf("Reply %d: %s", k, strings.Repeat("the chart shows a steady rise. ", 6)))+`}]}`))
		case k < 18:
			msgs = append(msgs, imageMsg(b, fmt.Sprintf("Question %d: what does this picture show?", k), b64s[k%6]))
		default:
			msgs = append(msgs, imageMsg(b, fmt.Sprintf("Question %d: and what follows from that?", k)))
		}
	}
	f := newFixture(b, testenv.Embedded(b))
	ctx := context.Background()
	var tableB, rowsB, inlineB, over, objects, writes int
	run := 0
	for b.Loop() {
		run++
		f.table.written = nil
		f.blobs.keys = nil
		ch := fmt.Sprintf("bench%d", run)
		for i, m := range msgs {
			if _, err := f.log.Append(ctx, tenant, ch, []pi.Message{m}, fmt.Sprint(i)); err != nil {
				b.Fatal(err)
			}
		}
		tableB, rowsB, inlineB, over = 0, 0, 0, 0
		writes = len(f.table.writes())
		for _, it := range f.table.writes() {
			tableB += it.Size()
			if !strings.HasPrefix(it.SK, store.EntryPrefix) {
				continue
			}
			rowsB += it.Size()
			inline := it
			body := string(it.Body)
			for _, n := range refs.Names(body) {
				body = strings.ReplaceAll(body, refs.Ref(n), byName[n])
			}
			inline.Body = []byte(body)
			inlineB += inline.Size()
			if inline.Size() > store.MaxItemSize {
				over++
			}
		}
		objects = f.blobs.keysWithPrefix("images/")
	}
	b.ReportMetric(float64(tableB), "table-B")
	b.ReportMetric(float64(rowsB), "rows-B")
	b.ReportMetric(float64(inlineB), "inline-B")
	b.ReportMetric(float64(inlineB)/float64(tableB), "inline/table")
	b.ReportMetric(float64(over), "inline-over-limit")
	b.ReportMetric(float64(objects), "images")
	b.ReportMetric(float64(writes), "table-writes")
}

// BenchmarkRequestDigest measures what every append now pays up front to
// recognise its request: the digest of a user message carrying a 600 px
// noise PNG (about 1.4 MB of base64) and an assistant reply.
func BenchmarkRequestDigest(b *testing.B) {
	msgs := messages(b, fmt.Sprintf(receiptRequest, pngB64(b, 1, 600, 600)))
	size := 0
	for _, m := range msgs {
		for _, blk := range m.Content.Blocks {
			size += len(blk.Data) + len(blk.Text)
		}
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := requestDigest(msgs); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSplitText cuts a long text into its pieces, against one count
// of its runes (the baseline: the least any cut must read). The cut reads
// each piece once, so its ratio to the baseline stays flat as the text
// grows; counting what was left at every piece made it grow with the
// number of pieces.
func BenchmarkSplitText(b *testing.B) {
	for _, size := range []int{1 << 20, 10 << 20} {
		text := strings.Repeat("many words ", size/11)
		b.Run(fmt.Sprintf("%dMiB/baseline", size>>20), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if utf8.RuneCountInString(text) == 0 {
					b.Fatal("no runes")
				}
			}
		})
		b.Run(fmt.Sprintf("%dMiB/split", size>>20), func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if len(splitText(text, PieceChars)) < 2 {
					b.Fatal("one piece")
				}
			}
		})
	}
}
