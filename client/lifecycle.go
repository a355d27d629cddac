package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/durachat/durachat/shared/memory/status"
)

// ChatInfo is one chat as Chats lists it.
type ChatInfo struct {
	Chat         string    `json:"chat"`
	Messages     int64     `json:"messages"`
	LastActivity time.Time `json:"lastActivity"`
	// Memory is the chat's summary memory at a glance.
	Memory status.Glance `json:"memory"`
	// Deleting is set while the chat is being deleted.
	Deleting *DeleteProgress `json:"deleting,omitempty"`
}

// ChatList is a page of the tenant's chats; Next is "" on the last page,
// else the after of the next.
type ChatList struct {
	Chats []ChatInfo `json:"chats"`
	Next  string     `json:"next"`
}

// Chats lists the tenant's chats in id order with GET /v1/chats: those
// after the chat id after ("" from the start), at most limit (1-100; 0
// lets the server choose).
func (c *Client) Chats(ctx context.Context, after string, limit int) (*ChatList, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out ChatList
	if err := c.call(ctx, call{method: http.MethodGet, path: "/v1/chats", query: q, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StoredMessage is one logged entry read back as a pi message: image refs
// stay refs (text blocks "[image <name>]"), carrying a signed URL when
// read with links.
type StoredMessage struct {
	Seq     int64   `json:"seq"`
	Message Message `json:"message"`
}

// MessagePage is a page of a chat's messages; Next is "" on the last page.
type MessagePage struct {
	Messages []StoredMessage `json:"messages"`
	Next     string          `json:"next"`
}

// ReadOptions page through a chat with Messages.
type ReadOptions struct {
	// After is the Next of the previous page ("" from the start).
	After string
	// Limit is at most 100; 0 lets the server choose.
	Limit int
	// Links gives each image ref a signed URL.
	Links bool
}

// Messages reads the chat back in order with GET .../messages. Pages
// stay stable while the chat is appended to: seqs never move.
func (ch *Chat) Messages(ctx context.Context, o ReadOptions) (*MessagePage, error) {
	q := url.Values{}
	if o.After != "" {
		q.Set("after", o.After)
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Links {
		q.Set("images", "links")
	}
	var out MessagePage
	if err := ch.c.call(ctx, call{method: http.MethodGet, path: ch.path("/messages"), query: q, retry: true}, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteProgress is how far a chat's deletion has come.
type DeleteProgress struct {
	// Removed counts the chat's stored items removed, Images the images
	// deleted with it (those no other chat of the tenant names).
	Removed int64 `json:"removed"`
	Images  int64 `json:"images"`
	Done    bool  `json:"done"`
}

// Deletion is the answer of Delete.
type Deletion struct {
	Chat    string `json:"chat"`
	Deleted bool   `json:"deleted"`
	// Accepted is set when the server answered 202: the deletion goes on
	// in the background; Chats shows its progress, and Delete may be
	// called again (it resumes).
	Accepted bool           `json:"-"`
	Progress DeleteProgress `json:"progress"`
}

// Delete deletes the chat with DELETE /v1/chats/{chat}: its messages,
// memory and state, and the images no other chat of the tenant names. It
// is idempotent; once done, the id names a new, empty chat.
func (ch *Chat) Delete(ctx context.Context) (*Deletion, error) {
	var out Deletion
	if err := ch.c.call(ctx, call{method: http.MethodDelete, path: ch.path(""), retry: true}, &out); err != nil {
		return nil, err
	}
	out.Accepted = !out.Deleted
	return &out, nil
}
