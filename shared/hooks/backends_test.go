package hooks

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/durachat/durachat/shared/aws/awstest"
	"github.com/durachat/durachat/shared/aws/s3blobs"
	"github.com/durachat/durachat/shared/embedded"
	"github.com/durachat/durachat/shared/store"
)

type backend struct {
	name   string
	blobs  store.Blobs
	linker store.Linker
}

func backends(t testing.TB) []backend {
	t.Helper()
	db, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	mux := http.NewServeMux()
	links := httptest.NewServer(mux)
	t.Cleanup(links.Close)
	linker := embedded.NewLinker(links.URL, []byte("test secret"))
	mux.Handle("GET "+embedded.LinkPath+"{key...}", linker.Handler(db.Blobs()))

	s3 := awstest.StartS3(t)
	bucket := s3blobs.New(s3.Client, s3.CreateBucket(t))
	return []backend{
		{name: "embedded", blobs: db.Blobs(), linker: linker},
		{name: "aws", blobs: bucket, linker: bucket},
	}
}
