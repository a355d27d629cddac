package testenv

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/durachat/durachat/shared/store"
)

// ErrInjected is the cause inside every outage the helpers below make.
var ErrInjected = errors.New("injected fault")

// Outage is a fault function for a keyed call: it fails every call with
// store.ErrUnavailable. Use it as, e.g., FailingBlobs{FailPut: testenv.Outage}.
func Outage(key string) error { return store.Unavailable("injected on "+key, ErrInjected) }

// KeyOutage is Outage for table keys.
func KeyOutage(k store.Key) error {
	return store.Unavailable("injected on "+k.PK+"/"+k.SK, ErrInjected)
}

// FailingTable passes calls on to Table unless the Fail function for the
// call returns an error, which the call then returns without touching
// Table. A nil Fail function never fails.
type FailingTable struct {
	store.Table
	FailGet      func(k store.Key) error
	FailCreate   func(k store.Key) error
	FailUpdate   func(k store.Key) error
	FailQuery    func(q store.Query) error
	FailBatchGet func(keys []store.Key) error
	FailDelete   func(k store.Key) error
}

var _ store.Table = (*FailingTable)(nil)

func (f *FailingTable) Get(ctx context.Context, k store.Key) (store.Item, error) {
	if f.FailGet != nil {
		if err := f.FailGet(k); err != nil {
			return store.Item{}, err
		}
	}
	return f.Table.Get(ctx, k)
}

func (f *FailingTable) Create(ctx context.Context, it store.Item) error {
	if f.FailCreate != nil {
		if err := f.FailCreate(it.Key); err != nil {
			return err
		}
	}
	return f.Table.Create(ctx, it)
}

func (f *FailingTable) Update(ctx context.Context, it store.Item) error {
	if f.FailUpdate != nil {
		if err := f.FailUpdate(it.Key); err != nil {
			return err
		}
	}
	return f.Table.Update(ctx, it)
}

func (f *FailingTable) Query(ctx context.Context, q store.Query) (store.Page, error) {
	if f.FailQuery != nil {
		if err := f.FailQuery(q); err != nil {
			return store.Page{}, err
		}
	}
	return f.Table.Query(ctx, q)
}

func (f *FailingTable) BatchGet(ctx context.Context, keys []store.Key) ([]store.Item, error) {
	if f.FailBatchGet != nil {
		if err := f.FailBatchGet(keys); err != nil {
			return nil, err
		}
	}
	return f.Table.BatchGet(ctx, keys)
}

func (f *FailingTable) Delete(ctx context.Context, k store.Key, version int64) error {
	if f.FailDelete != nil {
		if err := f.FailDelete(k); err != nil {
			return err
		}
	}
	return f.Table.Delete(ctx, k, version)
}

// FailingBlobs passes calls on to Blobs unless the Fail function for the
// call returns an error for the key.
type FailingBlobs struct {
	store.Blobs
	FailPut    func(key string) error
	FailGet    func(key string) error
	FailHead   func(key string) error
	FailDelete func(key string) error
}

var _ store.Blobs = (*FailingBlobs)(nil)

func (f *FailingBlobs) Put(ctx context.Context, key string, b store.Blob) error {
	if f.FailPut != nil {
		if err := f.FailPut(key); err != nil {
			return err
		}
	}
	return f.Blobs.Put(ctx, key, b)
}

func (f *FailingBlobs) Get(ctx context.Context, key string) (store.Blob, error) {
	if f.FailGet != nil {
		if err := f.FailGet(key); err != nil {
			return store.Blob{}, err
		}
	}
	return f.Blobs.Get(ctx, key)
}

func (f *FailingBlobs) Head(ctx context.Context, key string) (store.BlobInfo, error) {
	if f.FailHead != nil {
		if err := f.FailHead(key); err != nil {
			return store.BlobInfo{}, err
		}
	}
	return f.Blobs.Head(ctx, key)
}

func (f *FailingBlobs) Delete(ctx context.Context, key string) error {
	if f.FailDelete != nil {
		if err := f.FailDelete(key); err != nil {
			return err
		}
	}
	return f.Blobs.Delete(ctx, key)
}

// FailingQueue passes sends on to Queue unless FailSend returns an error
// for the body.
type FailingQueue struct {
	store.Queue
	FailSend func(body string) error
}

var _ store.Queue = (*FailingQueue)(nil)

func (f *FailingQueue) Send(ctx context.Context, body string, delay time.Duration) error {
	if f.FailSend != nil {
		if err := f.FailSend(body); err != nil {
			return err
		}
	}
	return f.Queue.Send(ctx, body, delay)
}

// SendBatch sends the bodies FailSend passes and names the others in a
// *store.BatchError, as a queue refusing some entries of a batch does.
func (f *FailingQueue) SendBatch(ctx context.Context, bodies []string, delay time.Duration) error {
	if err := store.CheckSendBatch(bodies); err != nil {
		return err
	}
	var be store.BatchError
	var pass []string
	var passed []int // pass[k] is bodies[passed[k]]
	for i, b := range bodies {
		if f.FailSend != nil {
			if err := f.FailSend(b); err != nil {
				if be.Err == nil {
					be.Err = err
				}
				be.Failed = append(be.Failed, i)
				continue
			}
		}
		pass, passed = append(pass, b), append(passed, i)
	}
	if len(pass) > 0 {
		err := f.Queue.SendBatch(ctx, pass, delay)
		var inner *store.BatchError
		switch {
		case errors.As(err, &inner):
			for _, k := range inner.Failed {
				be.Failed = append(be.Failed, passed[k])
			}
			be.Err = cmp.Or(be.Err, inner.Err)
			slices.Sort(be.Failed)
		case err != nil && len(be.Failed) == 0:
			return err
		case err != nil:
			be.Failed = append(be.Failed, passed...)
			slices.Sort(be.Failed)
		}
	}
	if len(be.Failed) > 0 {
		return &be
	}
	return nil
}

// FailingReceiver passes calls on to Receiver unless the Fail function for
// the call returns an error.
type FailingReceiver struct {
	store.Receiver
	FailReceive func() error
	FailAck     func(receipt string) error
	FailRetry   func(receipt string) error
}

var _ store.Receiver = (*FailingReceiver)(nil)

func (f *FailingReceiver) Receive(ctx context.Context, max int, visibility, wait time.Duration) ([]store.Delivery, error) {
	if f.FailReceive != nil {
		if err := f.FailReceive(); err != nil {
			return nil, err
		}
	}
	return f.Receiver.Receive(ctx, max, visibility, wait)
}

func (f *FailingReceiver) Ack(ctx context.Context, receipt string) error {
	if f.FailAck != nil {
		if err := f.FailAck(receipt); err != nil {
			return err
		}
	}
	return f.Receiver.Ack(ctx, receipt)
}

func (f *FailingReceiver) Retry(ctx context.Context, receipt string, delay time.Duration) error {
	if f.FailRetry != nil {
		if err := f.FailRetry(receipt); err != nil {
			return err
		}
	}
	return f.Receiver.Retry(ctx, receipt, delay)
}

// Times makes a fault function fail its first n calls with err and pass
// the rest, for retry tests: FailingBlobs{FailPut: testenv.Times(2, testenv.Outage)}.
// It is safe for concurrent use.
func Times[K any](n int, fail func(K) error) func(K) error {
	calls := make(chan struct{}, n)
	for range n {
		calls <- struct{}{}
	}
	return func(k K) error {
		select {
		case <-calls:
			return fail(k)
		default:
			return nil
		}
	}
}
