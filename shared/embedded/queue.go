package embedded

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/durachat/durachat/shared/store"
)

// SQS's limits, kept so that what works here works there.
const (
	MaxMessageSize = 256 << 10
	MaxDelay       = 15 * time.Minute // Send's delay
	MaxVisibility  = 12 * time.Hour   // Receive's visibility and Retry's delay
	MaxWait        = 20 * time.Second // Receive's long poll
	MaxReceive     = 10               // messages per Receive
	maxQueueName   = 80
)

// ErrStaleReceipt: the receipt does not name a message's latest delivery:
// the message was received again since (and holds a newer receipt), it was
// acked already, or the text is no receipt of this queue. Nothing changed.
// A worker that finishes after its visibility timeout gets this from Ack
// while the message goes on to whoever received it next.
var ErrStaleReceipt = errors.New("embedded: stale or unknown receipt")

var (
	queueMessages = []byte("m") // visible-at ‖ id -> message
	queueIndex    = []byte("i") // id -> visible-at ‖ id
)

const idLen = 16

// Queue is a durable delay queue (store.Queue and store.Receiver) in the
// "queues" bucket. A message is keyed by the time it becomes visible, then
// its id, so the receivable messages are a prefix of the bucket. Receiving
// one moves it to now+visibility and gives it a fresh receipt; acking
// deletes it. Messages, in flight or not, survive Close and Open.
type Queue struct {
	db   *DB
	name string

	mu   sync.Mutex
	wake chan struct{} // closed (and replaced) when a message may have become receivable
}

var (
	_ store.Queue    = (*Queue)(nil)
	_ store.Receiver = (*Queue)(nil)
)

// message is a stored message. Token is the secret part of the latest
// delivery's receipt.
type message struct {
	Body     string `json:"body"`
	Receives int    `json:"receives"`
	Token    []byte `json:"token,omitempty"`
	Sent     int64  `json:"sent"` // Unix nanoseconds
}

// Name is the queue's name.
func (q *Queue) Name() string { return q.name }

// Send stores body, receivable after delay (0 to MaxDelay).
func (q *Queue) Send(ctx context.Context, body string, delay time.Duration) error {
	if len(body) > MaxMessageSize {
		return fmt.Errorf("send to %s: body is %d bytes, limit %d: %w", q.name, len(body), MaxMessageSize, store.ErrTooLarge)
	}
	return q.put(ctx, []string{body}, delay)
}

// SendBatch stores 1 to store.MaxSendBatch bodies in one transaction, each
// receivable after delay. A body over MaxMessageSize is not sent and is
// named in the *store.BatchError, with store.ErrTooLarge; the others are.
func (q *Queue) SendBatch(ctx context.Context, bodies []string, delay time.Duration) error {
	if err := store.CheckSendBatch(bodies); err != nil {
		return fmt.Errorf("send to %s: %w", q.name, err)
	}
	var be store.BatchError
	fit := make([]string, 0, len(bodies))
	for i, b := range bodies {
		if len(b) > MaxMessageSize {
			if be.Err == nil {
				be.Err = fmt.Errorf("send to %s: body is %d bytes, limit %d: %w", q.name, len(b), MaxMessageSize, store.ErrTooLarge)
			}
			be.Failed = append(be.Failed, i)
			continue
		}
		fit = append(fit, b)
	}
	if len(fit) > 0 {
		if err := q.put(ctx, fit, delay); err != nil {
			return err
		}
	}
	if len(be.Failed) > 0 {
		return &be
	}
	return nil
}

// put stores bodies (each within MaxMessageSize) in one transaction.
func (q *Queue) put(ctx context.Context, bodies []string, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := q.checkName(); err != nil {
		return err
	}
	if delay < 0 || delay > MaxDelay {
		return fmt.Errorf("send to %s: delay %s outside 0-%s", q.name, delay, MaxDelay)
	}
	now := time.Now()
	recs := make([][]byte, len(bodies))
	for i, body := range bodies {
		rec, err := json.Marshal(message{Body: body, Sent: now.UnixNano()})
		if err != nil {
			return fmt.Errorf("send to %s: %w", q.name, err)
		}
		recs[i] = rec
	}
	err := q.db.update("send", func(tx *bolt.Tx) error {
		m, idx, err := q.buckets(tx)
		if err != nil {
			return err
		}
		for _, rec := range recs {
			id := make([]byte, idLen)
			rand.Read(id)
			key := messageKey(now.Add(delay), id)
			if err := m.Put(key, rec); err != nil {
				return err
			}
			if err := idx.Put(id, key); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	q.notify()
	return nil
}

// Receive returns up to maxMessages (1 to MaxReceive) receivable messages and hides
// them for visibility (0 to MaxVisibility). When none is receivable it
// waits up to wait (0 to MaxWait) for one, waking on a Send or Retry and
// when the earliest delayed message comes due; no polling. It returns an
// empty slice when the wait ends with nothing, ctx's error when ctx ends
// first, and ErrClosed when the DB is closed.
func (q *Queue) Receive(ctx context.Context, maxMessages int, visibility, wait time.Duration) ([]store.Delivery, error) {
	if err := q.checkName(); err != nil {
		return nil, err
	}
	switch {
	case maxMessages < 1 || maxMessages > MaxReceive:
		return nil, fmt.Errorf("receive from %s: max %d outside 1-%d", q.name, maxMessages, MaxReceive)
	case visibility < 0 || visibility > MaxVisibility:
		return nil, fmt.Errorf("receive from %s: visibility %s outside 0-%s", q.name, visibility, MaxVisibility)
	case wait < 0 || wait > MaxWait:
		return nil, fmt.Errorf("receive from %s: wait %s outside 0-%s", q.name, wait, MaxWait)
	}
	deadline := time.Now().Add(wait)
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// Take the wake channel before looking, so a Send that lands
		// between the look and the wait still wakes us.
		wake := q.wakeChan()
		got, nextDue, err := q.receiveOnce(maxMessages, visibility)
		if err != nil || len(got) > 0 {
			return got, err
		}
		sleep := time.Until(deadline)
		if sleep <= 0 {
			return []store.Delivery{}, nil
		}
		if !nextDue.IsZero() {
			if d := time.Until(nextDue); d < sleep {
				sleep = max0(d)
			}
		}
		if timer == nil {
			timer = time.NewTimer(sleep)
		} else {
			timer.Reset(sleep)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-q.db.closed:
			return nil, fmt.Errorf("receive from %s: %w", q.name, ErrClosed)
		case <-wake:
		case <-timer.C:
		}
	}
}

func max0(d time.Duration) time.Duration {
	if d < 0 {
		return 0
	}
	return d
}

// receiveOnce delivers what is receivable now. When nothing is, nextDue is
// when the earliest hidden message becomes receivable (zero when the queue
// is empty).
func (q *Queue) receiveOnce(maxMessages int, visibility time.Duration) (got []store.Delivery, nextDue time.Time, err error) {
	now := time.Now()
	nowKey := uint64(now.UnixNano())
	err = q.db.update("receive", func(tx *bolt.Tx) error {
		m, idx, err := q.buckets(tx)
		if err != nil {
			return err
		}
		type due struct{ key, val []byte }
		var batch []due
		c := m.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if at := binary.BigEndian.Uint64(k); at > nowKey {
				nextDue = time.Unix(0, int64(at))
				break
			}
			if len(batch) == maxMessages {
				break
			}
			batch = append(batch, due{bytes.Clone(k), bytes.Clone(v)})
		}
		hiddenUntil := now.Add(visibility)
		for _, d := range batch {
			var rec message
			if err := json.Unmarshal(d.val, &rec); err != nil {
				return fmt.Errorf("%w: queue %s message %x: %w", errCorrupt, q.name, d.key, err)
			}
			id := d.key[8:]
			rec.Receives++
			rec.Token = make([]byte, idLen)
			rand.Read(rec.Token)
			val, err := json.Marshal(rec)
			if err != nil {
				return err
			}
			key := messageKey(hiddenUntil, id)
			if err := m.Delete(d.key); err != nil {
				return err
			}
			if err := m.Put(key, val); err != nil {
				return err
			}
			if err := idx.Put(id, key); err != nil {
				return err
			}
			got = append(got, store.Delivery{
				ID:       hex.EncodeToString(id),
				Body:     rec.Body,
				Receipt:  hex.EncodeToString(id) + hex.EncodeToString(rec.Token),
				Receives: rec.Receives,
			})
		}
		return nil
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return got, nextDue, nil
}

// Ack deletes the message whose latest delivery gave receipt, or returns
// ErrStaleReceipt and changes nothing.
func (q *Queue) Ack(ctx context.Context, receipt string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := q.checkName(); err != nil {
		return err
	}
	return q.db.update("ack", func(tx *bolt.Tx) error {
		m, idx, key, err := q.delivered(tx, receipt)
		if err != nil {
			return fmt.Errorf("ack on %s: %w", q.name, err)
		}
		if err := m.Delete(key); err != nil {
			return err
		}
		return idx.Delete(key[8:])
	})
}

// Retry makes the message whose latest delivery gave receipt receivable
// again after delay (0 to MaxVisibility), or returns ErrStaleReceipt and
// changes nothing. The receipt stays valid until the next delivery.
func (q *Queue) Retry(ctx context.Context, receipt string, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := q.checkName(); err != nil {
		return err
	}
	if delay < 0 || delay > MaxVisibility {
		return fmt.Errorf("retry on %s: delay %s outside 0-%s", q.name, delay, MaxVisibility)
	}
	err := q.db.update("retry", func(tx *bolt.Tx) error {
		m, idx, key, err := q.delivered(tx, receipt)
		if err != nil {
			return fmt.Errorf("retry on %s: %w", q.name, err)
		}
		val := bytes.Clone(m.Get(key))
		id := bytes.Clone(key[8:])
		if err := m.Delete(key); err != nil {
			return err
		}
		newKey := messageKey(time.Now().Add(delay), id)
		if err := m.Put(newKey, val); err != nil {
			return err
		}
		return idx.Put(id, newKey)
	})
	if err != nil {
		return err
	}
	q.notify()
	return nil
}

// delivered finds the message that receipt names and checks that the
// receipt is from its latest delivery. key is a copy.
func (q *Queue) delivered(tx *bolt.Tx, receipt string) (m, idx *bolt.Bucket, key []byte, err error) {
	raw, err := hex.DecodeString(receipt)
	if err != nil || len(raw) != 2*idLen {
		return nil, nil, nil, fmt.Errorf("%w: malformed receipt", ErrStaleReceipt)
	}
	id, token := raw[:idLen], raw[idLen:]
	if m, idx, err = q.buckets(tx); err != nil {
		return nil, nil, nil, err
	}
	key = bytes.Clone(idx.Get(id))
	if key == nil {
		return nil, nil, nil, fmt.Errorf("%w: message %x is gone", ErrStaleReceipt, id)
	}
	v := m.Get(key)
	if v == nil {
		return nil, nil, nil, fmt.Errorf("%w: queue %s index names missing message %x", errCorrupt, q.name, id)
	}
	var rec message
	if err := json.Unmarshal(v, &rec); err != nil {
		return nil, nil, nil, fmt.Errorf("%w: queue %s message %x: %w", errCorrupt, q.name, id, err)
	}
	if rec.Token == nil || !bytes.Equal(rec.Token, token) {
		return nil, nil, nil, fmt.Errorf("%w: message %x was delivered again since", ErrStaleReceipt, id)
	}
	return m, idx, key, nil
}

// buckets returns the queue's message and index buckets, creating them on
// first use (tx is a write transaction).
func (q *Queue) buckets(tx *bolt.Tx) (m, idx *bolt.Bucket, err error) {
	qb, err := tx.Bucket(bucketQueues).CreateBucketIfNotExists([]byte(q.name))
	if err != nil {
		return nil, nil, fmt.Errorf("queue %s: %w", q.name, err)
	}
	if m, err = qb.CreateBucketIfNotExists(queueMessages); err != nil {
		return nil, nil, fmt.Errorf("queue %s: %w", q.name, err)
	}
	if idx, err = qb.CreateBucketIfNotExists(queueIndex); err != nil {
		return nil, nil, fmt.Errorf("queue %s: %w", q.name, err)
	}
	return m, idx, nil
}

// checkName applies SQS's queue name rule: 1-80 of A-Z a-z 0-9 - _.
func (q *Queue) checkName() error {
	if q.name == "" || len(q.name) > maxQueueName {
		return fmt.Errorf("embedded: queue name %q must be 1-%d characters", q.name, maxQueueName)
	}
	for _, r := range q.name {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("embedded: queue name %q may hold only A-Z a-z 0-9 - _", q.name)
		}
	}
	return nil
}

func (q *Queue) wakeChan() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.wake
}

// notify wakes every waiting Receive of this queue.
func (q *Queue) notify() {
	q.mu.Lock()
	defer q.mu.Unlock()
	close(q.wake)
	q.wake = make(chan struct{})
}

// messageKey is the big-endian visible-at time in Unix nanoseconds, then
// the id: byte order is time order.
func messageKey(visibleAt time.Time, id []byte) []byte {
	k := make([]byte, 8, 8+len(id))
	binary.BigEndian.PutUint64(k, uint64(visibleAt.UnixNano()))
	return append(k, id...)
}
