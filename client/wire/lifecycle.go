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
	// entries).
	Messages int `json:"messages"`
	Entries  int `json:"entries"`
	New      int `json:"new"`
	Skipped  int `json:"skipped"`
	// Renamed maps each name an image line carried whose bytes are not
	// that name's to the name they are stored under; the file's refs to
	// it are logged as refs to the new name. Absent when none is.
	Renamed map[string]string `json:"renamed,omitempty"`
}

// Retention is a retention setting: chats idle longer than Days days are
// deleted (0 keeps them).
type Retention struct {
	Days int `json:"days"`
	// Inherited says a chat has no setting of its own: Days is its
	// tenant's default.
	Inherited bool `json:"inherited,omitempty"`
}
