// Package storefake has in-memory implementations of the store interfaces
// for tests: one fake per interface, each run through the storetest
// conformance suite like the real adapters. They are safe for concurrent
// use, honour a done context, and copy what they are given; what they
// return is shared with the fake and must not be modified.
//
// A test that needs to count calls or inject faults wraps a fake (see the
// Failing decorators of shared/testenv) rather than writing another store.
package storefake

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/durachat/durachat/shared/store"
)

// Table is an in-memory store.Table.
type Table struct {
	mu    sync.Mutex
	parts map[string]map[string]store.Item // PK -> SK -> item
}

var _ store.Table = (*Table)(nil)

// NewTable returns an empty Table.
func NewTable() *Table { return &Table{parts: map[string]map[string]store.Item{}} }

// Get returns the item or store.ErrNotFound.
func (t *Table) Get(ctx context.Context, k store.Key) (store.Item, error) {
	if err := ctx.Err(); err != nil {
		return store.Item{}, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	it, ok := t.parts[k.PK][k.SK]
	if !ok {
		return store.Item{}, fmt.Errorf("%s/%s: %w", k.PK, k.SK, store.ErrNotFound)
	}
	return it, nil
}

// Create writes it with Version 1 when the key is free.
func (t *Table) Create(ctx context.Context, it store.Item) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckSize(it); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	part := t.parts[it.PK]
	if _, ok := part[it.SK]; ok {
		return fmt.Errorf("create %s/%s: %w", it.PK, it.SK, store.ErrConditionFailed)
	}
	if part == nil {
		part = map[string]store.Item{}
		t.parts[it.PK] = part
	}
	it.Version = 1
	it.Body = bytes.Clone(it.Body)
	part[it.SK] = it
	return nil
}

// Update writes it when the stored version is it.Version-1.
func (t *Table) Update(ctx context.Context, it store.Item) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := store.CheckSize(it); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.parts[it.PK][it.SK]
	if !ok || old.Version != it.Version-1 {
		return fmt.Errorf("update %s/%s to version %d: %w", it.PK, it.SK, it.Version, store.ErrConditionFailed)
	}
	it.Body = bytes.Clone(it.Body)
	t.parts[it.PK][it.SK] = it
	return nil
}

// Query returns one page of a partition, in sort key order.
func (t *Table) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if err := ctx.Err(); err != nil {
		return store.Page{}, err
	}
	t.mu.Lock()
	var items []store.Item
	for sk, it := range t.parts[q.PK] {
		if strings.HasPrefix(sk, q.Prefix) && (q.After == "" || (!q.Desc && sk > q.After) || (q.Desc && sk < q.After)) {
			items = append(items, it)
		}
	}
	t.mu.Unlock()
	slices.SortFunc(items, func(a, b store.Item) int { return strings.Compare(a.SK, b.SK) })
	if q.Desc {
		slices.Reverse(items)
	}
	var page store.Page
	if q.Limit > 0 && len(items) > q.Limit {
		items = items[:q.Limit]
		page.Next = items[len(items)-1].SK
	}
	page.Items = items
	return page, nil
}

// BatchGet returns the items that exist, in the order of keys.
func (t *Table) BatchGet(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []store.Item
	for _, k := range keys {
		if it, ok := t.parts[k.PK][k.SK]; ok {
			out = append(out, it)
		}
	}
	return out, nil
}

// Delete removes the item at k: unconditionally with version 0, else only
// when its stored version is version.
func (t *Table) Delete(ctx context.Context, k store.Key, version int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	old, ok := t.parts[k.PK][k.SK]
	if version != 0 && (!ok || old.Version != version) {
		return fmt.Errorf("delete %s/%s at version %d: %w", k.PK, k.SK, version, store.ErrConditionFailed)
	}
	delete(t.parts[k.PK], k.SK)
	return nil
}

// Blobs is an in-memory store.Blobs.
type Blobs struct {
	mu    sync.Mutex
	blobs map[string]store.Blob
	puts  int
}

var _ store.Blobs = (*Blobs)(nil)

// NewBlobs returns an empty Blobs.
func NewBlobs() *Blobs { return &Blobs{blobs: map[string]store.Blob{}} }

// Put stores b under key unless key holds an object already.
func (s *Blobs) Put(ctx context.Context, key string, b store.Blob) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts++
	if _, ok := s.blobs[key]; !ok {
		s.blobs[key] = store.Blob{ContentType: b.ContentType, Data: bytes.Clone(b.Data)}
	}
	return nil
}

// Get returns the object or store.ErrNotFound.
func (s *Blobs) Get(ctx context.Context, key string) (store.Blob, error) {
	if err := ctx.Err(); err != nil {
		return store.Blob{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[key]
	if !ok {
		return store.Blob{}, fmt.Errorf("%s: %w", key, store.ErrNotFound)
	}
	return b, nil
}

// Head returns the object's info or store.ErrNotFound.
func (s *Blobs) Head(ctx context.Context, key string) (store.BlobInfo, error) {
	b, err := s.Get(ctx, key)
	if err != nil {
		return store.BlobInfo{}, err
	}
	return store.BlobInfo{ContentType: b.ContentType, Size: int64(len(b.Data))}, nil
}

// Delete removes the object at key, if any.
func (s *Blobs) Delete(ctx context.Context, key string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.blobs, key)
	return nil
}

// List returns up to limit keys with the prefix after after, in order.
func (s *Blobs) List(ctx context.Context, prefix, after string, limit int) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var keys []string
	for k := range s.blobs {
		if strings.HasPrefix(k, prefix) && k > after {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return keys[:min(len(keys), limit)], nil
}

// Puts is the number of Put calls, including those that stored nothing.
func (s *Blobs) Puts() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.puts
}

// Len is the number of objects stored.
func (s *Blobs) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.blobs)
}

// ErrStaleReceipt: a receipt that is not from its message's latest
// delivery, or whose message was acked. Nothing changed.
var ErrStaleReceipt = errors.New("storefake: stale or unknown receipt")

// Queue is an in-memory store.Queue and store.Receiver. Delays and
// visibility timeouts pass in real time; messages are received in the order
// they were sent, among those due.
type Queue struct {
	mu   sync.Mutex
	seq  int
	msgs []*queued // in send order
	wake chan struct{}
}

type queued struct {
	id, body  string
	visibleAt time.Time
	receives  int
	receipt   string // of the latest delivery
}

var (
	_ store.Queue    = (*Queue)(nil)
	_ store.Receiver = (*Queue)(nil)
)

// NewQueue returns an empty Queue.
func NewQueue() *Queue { return &Queue{wake: make(chan struct{})} }

// Send queues body, receivable after delay.
func (q *Queue) Send(ctx context.Context, body string, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if len(body) > MaxMessageSize {
		return fmt.Errorf("storefake send: body is %d bytes, limit %d: %w", len(body), MaxMessageSize, store.ErrTooLarge)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.seq++
	q.msgs = append(q.msgs, &queued{id: fmt.Sprint(q.seq), body: body, visibleAt: time.Now().Add(delay)})
	q.notify()
	return nil
}

// SendBatch queues 1 to store.MaxSendBatch bodies, each receivable after
// delay.
func (q *Queue) SendBatch(ctx context.Context, bodies []string, delay time.Duration) error {
	if err := store.CheckSendBatch(bodies); err != nil {
		return err
	}
	var be store.BatchError
	for i, b := range bodies {
		err := q.Send(ctx, b, delay)
		switch {
		case errors.Is(err, store.ErrTooLarge):
			be.Err = cmp.Or(be.Err, err)
			be.Failed = append(be.Failed, i)
		case err != nil:
			return err
		}
	}
	if len(be.Failed) > 0 {
		return &be
	}
	return nil
}

// MaxMessageSize is SQS's limit on a body, which the fake keeps too.
const MaxMessageSize = 256 << 10

// notify wakes every waiting Receive. q.mu is held.
func (q *Queue) notify() {
	close(q.wake)
	q.wake = make(chan struct{})
}

// Receive waits up to wait for at most max due messages and hides them for
// visibility.
func (q *Queue) Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]store.Delivery, error) {
	deadline := time.Now().Add(wait)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.mu.Lock()
		now := time.Now()
		next := deadline // when to look again
		var out []store.Delivery
		for _, m := range q.msgs {
			if len(out) == max {
				break
			}
			if m.visibleAt.After(now) {
				if m.visibleAt.Before(next) {
					next = m.visibleAt
				}
				continue
			}
			m.visibleAt = now.Add(visibility)
			m.receives++
			m.receipt = fmt.Sprintf("%s.%d", m.id, m.receives)
			out = append(out, store.Delivery{ID: m.id, Body: m.body, Receipt: m.receipt, Receives: m.receives})
		}
		wake := q.wake
		q.mu.Unlock()
		if len(out) > 0 || !now.Before(deadline) {
			return out, nil
		}
		timer := time.NewTimer(next.Sub(now))
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, ctx.Err()
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// Ack deletes the message whose latest delivery gave receipt.
func (q *Queue) Ack(ctx context.Context, receipt string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	i := q.delivered(receipt)
	if i < 0 {
		return fmt.Errorf("ack %q: %w", receipt, ErrStaleReceipt)
	}
	q.msgs = slices.Delete(q.msgs, i, i+1)
	return nil
}

// Retry makes the message whose latest delivery gave receipt receivable
// again after delay.
func (q *Queue) Retry(ctx context.Context, receipt string, delay time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	i := q.delivered(receipt)
	if i < 0 {
		return fmt.Errorf("retry %q: %w", receipt, ErrStaleReceipt)
	}
	q.msgs[i].visibleAt = time.Now().Add(delay)
	q.notify()
	return nil
}

// delivered is the index of the message receipt names, or -1. q.mu is held.
func (q *Queue) delivered(receipt string) int {
	return slices.IndexFunc(q.msgs, func(m *queued) bool { return m.receipt != "" && m.receipt == receipt })
}

// Len is the number of messages queued and not acked.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.msgs)
}
