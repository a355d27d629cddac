package transcript

import "time"

// Entry kinds, as memory names them.
const (
	KindUser = "user" // the user's words
	KindTalk = "talk" // assistant text, one entry per block
	KindTool = "tool" // a tool call: "<name> <arguments as JSON>"
	KindEcho = "echo" // a tool result: "<name>: <text>"
	KindWork = "work" // a sub-agent's report
	KindNote = "note" // an imported note
)

// Entry is one logged entry; I is dense from 0 within a chat.
type Entry struct {
	I    int64     `json:"i"`
	Kind string    `json:"kind"`
	Text string    `json:"text"`
	Date time.Time `json:"date"`
	// Receipt is the idempotency key of the append that wrote it.
	Receipt string `json:"receipt,omitempty"`
	// Tool names the memory tool ("zoom", "search", "date") when the entry
	// is a logged result of one: search skips those, and a zoom result's
	// leaf does not resend images its original already showed.
	Tool string `json:"tool,omitempty"`
	// Of is, for a logged zoom result, the entry id it zoomed (-1 otherwise).
	Of int64 `json:"of,omitempty"`
	// Erased is when the entry was erased (zero: it was not). An erased
	// entry keeps its id, kind and date; its Text is ErasedText.
	Erased time.Time `json:"-"`
}

// ErasedText is what an entry erased at t reads as: the marker memory
// summarizes and zoom shows in place of the erased words.
func ErasedText(t time.Time) string {
	return "(erased " + t.UTC().Format(time.RFC3339) + ")"
}
