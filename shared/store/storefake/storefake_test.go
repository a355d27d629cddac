package storefake_test

import (
	"testing"

	"github.com/durachat/durachat/shared/store"
	"github.com/durachat/durachat/shared/store/storefake"
	"github.com/durachat/durachat/shared/store/storetest"
)

func TestTableConformance(t *testing.T) {
	storetest.TestTable(t, func(t *testing.T) store.Table { return storefake.NewTable() })
}

func TestBlobsConformance(t *testing.T) {
	storetest.TestBlobs(t, func(t *testing.T) store.Blobs { return storefake.NewBlobs() })
}

func TestQueueConformance(t *testing.T) {
	storetest.TestQueue(t, func(t *testing.T) (store.Queue, store.Receiver) {
		q := storefake.NewQueue()
		return q, q
	})
}
