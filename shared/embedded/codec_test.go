package embedded

import (
	"bytes"
	"testing"

	"github.com/durachat/durachat/shared/store"
)

// FuzzDecodeItem: decoding never panics on damaged bytes, and what is
// encoded decodes to itself.
func FuzzDecodeItem(f *testing.F) {
	f.Add([]byte{itemFormat, 1, 0, '{', '}'}, int64(3), int64(1700000000), []byte(`{"a":1}`))
	f.Add([]byte{}, int64(1), int64(0), []byte{})
	f.Add([]byte{itemFormat, 0xff}, int64(1<<40), int64(-5), []byte{0})
	f.Fuzz(func(t *testing.T, raw []byte, version, expires int64, body []byte) {
		k := store.Key{PK: "p", SK: "s"}
		_, _ = decodeItem(k, raw)
		if version < 1 {
			return
		}
		in := store.Item{Key: k, Version: version, Expires: expires, Body: body}
		out, err := decodeItem(k, encodeItem(in))
		if err != nil {
			t.Fatal(err)
		}
		if out.Version != version || out.Expires != expires || !bytes.Equal(out.Body, body) {
			t.Fatalf("round trip of %+v gave %+v", in, out)
		}
	})
}

// FuzzDecodeBlob: as FuzzDecodeItem, for blobs.
func FuzzDecodeBlob(f *testing.F) {
	f.Add([]byte{blobFormat, 3, 'a', '/', 'b', 'x'}, "image/png", []byte("data"))
	f.Add([]byte{blobFormat, 0xff, 0xff, 0xff, 0xff, 0x0f}, "", []byte{})
	f.Fuzz(func(t *testing.T, raw []byte, contentType string, data []byte) {
		_, _, _ = decodeBlob("k", raw)
		ct, got, err := decodeBlob("k", encodeBlob(store.Blob{ContentType: contentType, Data: data}))
		if err != nil {
			t.Fatal(err)
		}
		if ct != contentType || !bytes.Equal(got, data) {
			t.Fatalf("round trip of %q %q gave %q %q", contentType, data, ct, got)
		}
	})
}

func TestSuccessorBoundsThePrefixRange(t *testing.T) {
	tests := []struct{ in, want string }{
		{"p\x00", "p\x01"},
		{"p\x00a/", "p\x00a0"},
		{"p\x00a\xff", "p\x00b"},
		{"p\x00\xff\xff", "p\x01"},
	}
	for _, tt := range tests {
		if got := successor([]byte(tt.in)); string(got) != tt.want {
			t.Errorf("successor(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if got := successor([]byte("\xff\xff")); got != nil {
		t.Errorf("successor of all 0xff = %q, want nil", got)
	}
}
