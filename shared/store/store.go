// Package store defines the small storage contracts durachat is written
// against: a key-value Table with conditional writes (DynamoDB, or bbolt
// embedded), create-once Blobs (S3, or embedded), and a delay Queue (SQS, or
// embedded). It has no dependencies; adapters live in subpackages elsewhere.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// MaxItemSize is DynamoDB's item limit: attribute names plus values.
const MaxItemSize = 400 * 1024

// ItemBudget is what durachat lets a record body use, leaving a margin under
// MaxItemSize for keys, attribute names and the version.
const ItemBudget = 350 * 1024

var (
	// ErrNotFound: the key holds nothing.
	ErrNotFound = errors.New("not found")
	// ErrConditionFailed: a create found the key taken, or an update found
	// another version.
	ErrConditionFailed = errors.New("condition failed")
	// ErrTooLarge: the item would pass MaxItemSize. Nothing was written.
	ErrTooLarge = errors.New("item too large")
	// ErrUnavailable: the store did not answer or refused for load; the
	// operation may be retried.
	ErrUnavailable = errors.New("store unavailable")
)

// UnavailableError wraps a store outage; errors.Is(err, ErrUnavailable) holds.
type UnavailableError struct {
	Op  string
	Err error
}

func (e *UnavailableError) Error() string { return e.Op + ": store unavailable: " + e.Err.Error() }
func (e *UnavailableError) Unwrap() []error {
	return []error{ErrUnavailable, e.Err}
}

// Unavailable wraps err as an outage of op.
func Unavailable(op string, err error) error { return &UnavailableError{Op: op, Err: err} }

// IsOutage reports whether err means a store could not answer in time: a
// store outage (ErrUnavailable), or a context that ended before the answer.
// Such a call may be retried; any other error is an answer.
func IsOutage(err error) bool {
	return errors.Is(err, ErrUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// Key addresses one item: a partition and a sort key.
type Key struct {
	PK string
	SK string
}

// Item is one stored record. Body is the record (JSON, by convention).
type Item struct {
	Key
	// Version counts updates for optimistic locking; 1 after Create.
	Version int64
	Body    []byte
	// Expires is a Unix time after which the item may be dropped (TTL); 0 is never.
	Expires int64
}

// Attribute names as stored; Size counts them the way DynamoDB does.
const (
	AttrPK      = "pk"
	AttrSK      = "sk"
	AttrVersion = "v"
	AttrBody    = "b"
	AttrExpires = "ttl"
)

// Size is the item's size as DynamoDB counts it: attribute name bytes plus
// value bytes (numbers counted generously at 21 bytes).
func (it Item) Size() int {
	n := len(AttrPK) + len(it.PK) + len(AttrSK) + len(it.SK) + len(AttrVersion) + 21
	n += len(AttrBody) + len(it.Body)
	if it.Expires != 0 {
		n += len(AttrExpires) + 21
	}
	return n
}

// CheckSize returns ErrTooLarge (wrapped, naming the key) when it cannot be stored.
func CheckSize(it Item) error {
	if s := it.Size(); s > MaxItemSize {
		return fmt.Errorf("%s/%s is %d bytes, limit %d: %w", it.PK, it.SK, s, MaxItemSize, ErrTooLarge)
	}
	return nil
}

// Query selects the items of one partition whose sort key starts with Prefix,
// in sort key order (descending when Desc), resuming after the sort key After.
type Query struct {
	PK     string
	Prefix string
	After  string
	Limit  int
	Desc   bool
}

// Page is one page of a query; Next is "" on the last page, else the After
// of the next page.
type Page struct {
	Items []Item
	Next  string
}

// Table is the part of DynamoDB durachat uses.
type Table interface {
	// Get returns the item or ErrNotFound.
	Get(ctx context.Context, k Key) (Item, error)
	// Create writes it with Version 1 when the key is free, else ErrConditionFailed.
	Create(ctx context.Context, it Item) error
	// Update writes it when the stored version is it.Version-1, else
	// ErrConditionFailed (also when nothing is stored). it.Version > 1.
	Update(ctx context.Context, it Item) error
	// Query returns one page of a partition, by sort key prefix.
	Query(ctx context.Context, q Query) (Page, error)
	// BatchGet returns the items that exist, in the order of keys; missing
	// ones are left out.
	BatchGet(ctx context.Context, keys []Key) ([]Item, error)
	// Delete removes the item at k. With version 0 it is unconditional and
	// succeeds when nothing is stored; otherwise it removes the item only
	// when its stored version is version, else ErrConditionFailed.
	Delete(ctx context.Context, k Key, version int64) error
}

// Blob is a stored object and its content type.
type Blob struct {
	ContentType string
	Data        []byte
}

// BlobInfo is what Head tells without reading the object.
type BlobInfo struct {
	ContentType string
	Size        int64
}

// Blobs is create-once object storage.
type Blobs interface {
	// Put stores b under key once: when key exists already, Put succeeds and
	// leaves the stored object as it is. Concurrent puts of one key are safe.
	Put(ctx context.Context, key string, b Blob) error
	// Get returns the object or ErrNotFound.
	Get(ctx context.Context, key string) (Blob, error)
	// Head returns the object's info or ErrNotFound.
	Head(ctx context.Context, key string) (BlobInfo, error)
	// Delete removes the object at key; deleting a missing key succeeds.
	Delete(ctx context.Context, key string) error
	// List returns up to limit keys that start with prefix and sort after
	// after ("" for the first), in key order; fewer than limit means there
	// are no more.
	List(ctx context.Context, prefix, after string, limit int) ([]string, error)
}

// Linker makes short-lived URLs that fetch a blob without credentials.
type Linker interface {
	// URL links to key through chat: a Linker that checks its links when
	// they are fetched (the embedded one) signs chat into the link and
	// serves it only while that incarnation still names the image; an S3
	// presigned URL cannot be revoked, and serves until it expires.
	URL(ctx context.Context, key string, chat LinkChat, ttl time.Duration) (string, error)
}

// LinkChat is the chat incarnation a link to an image is made through. The
// zero LinkChat is no chat: a link made so (to read the links' origin)
// serves nothing where links are checked.
type LinkChat struct {
	Tenant, Chat, Inc string
}

// MaxSendBatch is the most bodies one Queue.SendBatch takes: SQS's
// SendMessageBatch limit.
const MaxSendBatch = 10

// Queue sends messages, each delivered at least once after its delay.
type Queue interface {
	Send(ctx context.Context, body string, delay time.Duration) error
	// SendBatch sends 1 to MaxSendBatch bodies, each delivered after delay,
	// in one request. When some are not sent it returns a *BatchError
	// naming them; the others were sent. Any other error sent none.
	SendBatch(ctx context.Context, bodies []string, delay time.Duration) error
}

// BatchError is the error of a SendBatch that sent some of its bodies and
// not others.
type BatchError struct {
	Failed []int // indexes of the bodies not sent, ascending
	Err    error // why the first of them was not
}

func (e *BatchError) Error() string {
	return fmt.Sprintf("%d of the batch's messages not sent: %v", len(e.Failed), e.Err)
}

func (e *BatchError) Unwrap() error { return e.Err }

// CheckSendBatch refuses a batch SendBatch cannot take: none, or more than
// MaxSendBatch bodies.
func CheckSendBatch(bodies []string) error {
	if len(bodies) < 1 || len(bodies) > MaxSendBatch {
		return fmt.Errorf("queue send batch: %d messages, want 1-%d", len(bodies), MaxSendBatch)
	}
	return nil
}

// Delivery is one received message. Receipt acknowledges or retries it.
type Delivery struct {
	ID       string
	Body     string
	Receipt  string
	Receives int
}

// Receiver is the consuming side of a Queue. A delivery that is neither
// acked nor retried comes back once its visibility timeout has passed.
type Receiver interface {
	// Receive waits up to wait for at most max messages and hides them for
	// visibility.
	Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]Delivery, error)
	// Ack deletes a delivered message.
	Ack(ctx context.Context, receipt string) error
	// Retry makes a delivered message visible again after delay.
	Retry(ctx context.Context, receipt string, delay time.Duration) error
}

// MaxTenant bounds a tenant name: escaped, it still fits every key it is
// part of (an S3 key is at most 1,024 bytes).
const MaxTenant = 256

// CheckTenant is the one rule every tenant name follows, whatever names it
// (a configured token, a JWT claim): 1 to MaxTenant bytes of UTF-8 with no
// control characters, and not "." or "..". A tenant is one escaped path
// segment of every key it owns and of every link to one, and HTTP clients
// resolve a dot segment away (images/../name), so such a tenant's links
// would name other objects or none.
func CheckTenant(tenant string) error {
	switch {
	case tenant == "":
		return errors.New("a tenant name is empty")
	case len(tenant) > MaxTenant:
		return fmt.Errorf("a tenant name is at most %d bytes, not %d", MaxTenant, len(tenant))
	case !utf8.ValidString(tenant):
		return errors.New("a tenant name must be UTF-8")
	case strings.ContainsFunc(tenant, unicode.IsControl):
		return errors.New("a tenant name cannot contain control characters")
	case tenant == "." || tenant == "..":
		return fmt.Errorf("the tenant name %q is a dot path segment, which clients rewrite in every link", tenant)
	}
	return nil
}

// Upload describes the one object an upload target accepts: exactly Size
// bytes whose SHA-256 is SHA256, sent with ContentType.
type Upload struct {
	Size        int64
	SHA256      [32]byte
	ContentType string
}

// UploadTarget is where a host PUTs the bytes of an Upload itself, without
// them passing through durachat: the request must carry Header, and the
// target refuses anything after Expires.
type UploadTarget struct {
	Method  string            `json:"method"`
	URL     string            `json:"url"`
	Header  map[string]string `json:"headers"`
	Expires time.Time         `json:"expires"`
}

// Uploader makes short-lived upload targets bound to one object's size and
// checksum: an S3 presigned PUT, or a signed link of the local server.
type Uploader interface {
	UploadTarget(ctx context.Context, key string, u Upload, ttl time.Duration) (UploadTarget, error)
}
