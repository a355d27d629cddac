package pi

import (
	"encoding/json"
	"testing"

	"github.com/durachat/durachat/shared/fault"
)

func TestUnknownFieldsPassThroughUnchanged(t *testing.T) {
	in := `{"role":"toolResult","toolCallId":"c1","toolName":"read","isError":false,"timestamp":1700000000000,"details":{"x":[1,2]},"content":[{"type":"text","text":"hi","cache":true},{"type":"image","data":"AAAA","mimeType":"image/png"}]}`
	var m Message
	if err := json.Unmarshal([]byte(in), &m); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	json.Unmarshal([]byte(in), &a)
	json.Unmarshal(out, &b)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if string(ja) != string(jb) {
		t.Fatalf("round trip changed the message:\n in %s\nout %s", ja, jb)
	}
}

func TestStringContentKeepsItsShape(t *testing.T) {
	var m Message
	if err := json.Unmarshal([]byte(`{"role":"user","content":"hello"}`), &m); err != nil {
		t.Fatal(err)
	}
	if !m.Content.IsString || m.Content.Blocks[0].Text != "hello" {
		t.Fatalf("got %+v", m.Content)
	}
	out, _ := json.Marshal(m)
	if string(out) != `{"content":"hello","role":"user"}` {
		t.Fatalf("got %s", out)
	}
}

func TestBadMessagesNameTheField(t *testing.T) {
	cases := map[string]string{
		`{"role":"robot","content":"x"}`:         "role",
		`{"content":"x"}`:                        "role",
		`{"role":"user","content":5}`:            "content",
		`{"role":"user","content":[{"text":1}]}`: "content",
	}
	for in, field := range cases {
		var m Message
		err := json.Unmarshal([]byte(in), &m)
		fe, ok := err.(*fault.Error)
		if !ok || len(fe.Field) < len(field) || fe.Field[:len(field)] != field {
			t.Errorf("%s: err %v, want a field error on %s", in, err, field)
		}
	}
}
