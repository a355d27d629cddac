package wire

import "time"

// ChatInfo is one chat as GET /v1/chats lists it.
type ChatInfo struct {
	Chat         string    `json:"chat"`
	Messages     int64     `json:"messages"`
	LastActivity time.Time `json:"lastActivity"`
	// Memory is the chat's summary memory at a glance.
	Memory MemoryGlance `json:"memory"`
	// Deleting is the progress of a deletion under way.
	Deleting *DeleteProgress `json:"deleting,omitempty"`
}

// ChatList is a page of the tenant's chats; Next is "" on the last page,
// else the after of the next.
type ChatList struct {
	Chats []ChatInfo `json:"chats"`
	Next  string     `json:"next"`
}

// DeleteProgress is how far a chat's deletion has come.
type DeleteProgress struct {
	// Removed counts the chat's stored items removed (entries, memory
	// nodes, receipts, state, texts too big for their rows), Images the
	// images deleted with it (those no other chat of the tenant names).
	Removed int64 `json:"removed"`
	Images  int64 `json:"images"`
	// Done says the chat is gone; its id now names a new, empty chat.
	Done bool `json:"done"`
}

// ImportResult says what an import logged.
type ImportResult struct {
	// Messages counts the messages read, Entries the entries they are
	// logged as (a repeat of an import answers the same entries), New
	// those of them this import logged (0: the chat held the file
	// already, nothing new was logged), Skipped the session lines
	// durachat does not log (another branch, model changes, custom
	// entries, system messages, bash executions), and SkippedByKind the
	// same by kind (importfile.Parse names them); absent when none is.
	Messages      int            `json:"messages"`
	Entries       int            `json:"entries"`
	New           int            `json:"new"`
	Skipped       int            `json:"skipped"`
	SkippedByKind map[string]int `json:"skippedByKind,omitempty"`
	// Renamed maps each name an image line carried whose bytes are not
	// that name's to the name they are stored under; the file's refs to
	// it are logged as refs to the new name. Absent when none is.
	Renamed map[string]string `json:"renamed,omitempty"`
}

// Skip counts skipped lines, by kind.
func (r *ImportResult) Skip(kinds map[string]int) {
	for k, n := range kinds {
		if n == 0 {
			continue
		}
		if r.SkippedByKind == nil {
			r.SkippedByKind = map[string]int{}
		}
		r.SkippedByKind[k] += n
		r.Skipped += n
	}
}

// Add adds what another part of an import logged.
func (r *ImportResult) Add(o ImportResult) {
	r.Messages += o.Messages
	r.Entries += o.Entries
	r.New += o.New
	skipped := r.Skipped + o.Skipped
	r.Skip(o.SkippedByKind)
	r.Skipped = skipped
	for from, to := range o.Renamed {
		if r.Renamed == nil {
			r.Renamed = map[string]string{}
		}
		r.Renamed[from] = to
	}
}

// Retention is a retention setting: chats idle longer than Days days are
// deleted (0 keeps them).
type Retention struct {
	Days int `json:"days"`
	// Inherited says a chat has no setting of its own: Days is its
	// tenant's default.
	Inherited bool `json:"inherited,omitempty"`
}

// EraseRequest asks to erase messages of a chat: exactly one of Seqs (the
// messages' seqs as read back), Match (every message whose text or image
// description holds it, literally; at least 4 characters) or Images (every
// message that shows one of these images).
type EraseRequest struct {
	Seqs   []int64  `json:"seqs,omitempty"`
	Match  string   `json:"match,omitempty"`
	Images []string `json:"images,omitempty"`
}

// Erasure is the receipt of an erasure: what it erased, what it rebuilt
// and deleted, and whether it is done.
type Erasure struct {
	Erasure string `json:"erasure"`
	Chat    string `json:"chat"`
	// Done: every step is finished, the summary lines rebuilt included.
	Done     bool       `json:"done"`
	Started  time.Time  `json:"started"`
	Finished *time.Time `json:"finished,omitempty"`
	// Messages are the messages erased: each one's seq and entry ids.
	Messages []ErasedMessage `json:"messages"`
	// Nodes are the summary nodes taken back and rebuilt ("<start>+<count>"),
	// Rebuilt how many of them are built again.
	Nodes   []string `json:"nodes"`
	Rebuilt int      `json:"rebuilt"`
	// ImagesDeleted names the images deleted; ImagesKept counts those kept
	// because a live message (of this chat or another) still names them.
	ImagesDeleted []string `json:"imagesDeleted"`
	ImagesKept    int      `json:"imagesKept"`
	// Refused says why an erasure whose messages were looked for after
	// the request answered (a large chat's, by match or images) erased
	// nothing: the request named no message, or too many.
	Refused string `json:"refused,omitempty"`
}

// ErasedMessage is one erased message: its seq and its entries' ids.
type ErasedMessage struct {
	Seq     int64   `json:"seq"`
	Entries []int64 `json:"entries"`
}
