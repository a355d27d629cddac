package memory

import (
	"encoding/json"
	"testing"

	"github.com/durachat/durachat/shared/tasks"
)

func FuzzBuildMessage(f *testing.F) {
	f.Add(`{"kind":"build","tenant":"t","chat":"c","l":0,"i":5}`)
	f.Add(`{"tenant":"t","chat":"c","l":0,"i":5}`)
	f.Add(`{"chat":"c","l":63,"i":1}`)
	f.Add(`{"chat":"","l":0,"i":0}`)
	f.Add(`not json`)
	f.Fuzz(func(t *testing.T, body string) {
		msg, err := tasks.Decode(body)
		if err != nil || msg.Kind != tasks.Build || checkBuild(msg) != nil {
			return
		}
		if msg.Chat == "" || msg.L < 0 || msg.L > 62 || msg.I < 0 {
			t.Fatalf("accepted %q as %+v", body, msg)
		}
	})
}

func FuzzPartitionJSON(f *testing.F) {
	f.Add(`{"r":[[0,0,5],[1,3,2]],"s":10}`)
	f.Add(`{"r":[[2,0,1]],"s":0,"o":true}`)
	f.Fuzz(func(t *testing.T, s string) {
		var p partition
		if err := json.Unmarshal([]byte(s), &p); err != nil {
			return
		}
		b, err := json.Marshal(&p)
		if err != nil {
			t.Fatal(err)
		}
		var q partition
		if err := json.Unmarshal(b, &q); err != nil {
			t.Fatalf("re-reading %s: %v", b, err)
		}
	})
}
