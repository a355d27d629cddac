package storetest

import (
	"context"
	"sync"

	"github.com/durachat/durachat/shared/store"
)

// Meter is a store.Table that counts what is asked of the table beneath it
// the way DynamoDB on demand bills it, whatever that table is: a strongly
// consistent read costs a unit per 4 KB of each item (a query per 4 KB of
// its page), a missing item one; a write a unit per 1 KB, a failed
// conditional write too; every request at least one unit. A deletion
// counts one write unit (the size of what it removes is not known here).
type Meter struct {
	store.Table
	mu sync.Mutex
	c  Metered
}

// Metered is what a Meter counted.
type Metered struct {
	// Items is the items read: each key a get or batch get asked for,
	// found or not, and each item a query returned.
	Items int
	// ReadUnits and WriteUnits are request units as billed.
	ReadUnits, WriteUnits int
	// Requests is the requests made, of every kind; a batch get of more
	// than 100 keys is one per 100, as DynamoDB takes them.
	Requests int
}

// Sub is what was counted since before.
func (m Metered) Sub(before Metered) Metered {
	return Metered{
		Items:      m.Items - before.Items,
		ReadUnits:  m.ReadUnits - before.ReadUnits,
		WriteUnits: m.WriteUnits - before.WriteUnits,
		Requests:   m.Requests - before.Requests,
	}
}

// Add is m and o together.
func (m Metered) Add(o Metered) Metered {
	return Metered{
		Items:      m.Items + o.Items,
		ReadUnits:  m.ReadUnits + o.ReadUnits,
		WriteUnits: m.WriteUnits + o.WriteUnits,
		Requests:   m.Requests + o.Requests,
	}
}

// NewMeter meters t.
func NewMeter(t store.Table) *Meter { return &Meter{Table: t} }

// Count returns what was counted so far.
func (m *Meter) Count() Metered {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.c
}

func units(size, per int) int { return max(1, (size+per-1)/per) }

func (m *Meter) add(requests, items, reads, writes int) {
	m.mu.Lock()
	m.c.Requests += requests
	m.c.Items += items
	m.c.ReadUnits += reads
	m.c.WriteUnits += writes
	m.mu.Unlock()
}

func (m *Meter) Get(ctx context.Context, k store.Key) (store.Item, error) {
	it, err := m.Table.Get(ctx, k)
	m.add(1, 1, units(it.Size(), 4096), 0)
	return it, err
}

func (m *Meter) Create(ctx context.Context, it store.Item) error {
	m.add(1, 0, 0, units(it.Size(), 1024))
	return m.Table.Create(ctx, it)
}

func (m *Meter) Update(ctx context.Context, it store.Item) error {
	m.add(1, 0, 0, units(it.Size(), 1024))
	return m.Table.Update(ctx, it)
}

func (m *Meter) Query(ctx context.Context, q store.Query) (store.Page, error) {
	p, err := m.Table.Query(ctx, q)
	size := 0
	for _, it := range p.Items {
		size += it.Size()
	}
	m.add(1, len(p.Items), units(size, 4096), 0)
	return p, err
}

func (m *Meter) BatchGet(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	items, err := m.Table.BatchGet(ctx, keys)
	r := len(keys) - len(items) // a missing item still costs a unit
	for _, it := range items {
		r += units(it.Size(), 4096)
	}
	m.add(max(1, (len(keys)+99)/100), len(keys), r, 0)
	return items, err
}

func (m *Meter) Delete(ctx context.Context, k store.Key, version int64) error {
	m.add(1, 0, 0, 1)
	return m.Table.Delete(ctx, k, version)
}
