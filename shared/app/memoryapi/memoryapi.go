// Package memoryapi wires the transcript and the summary memory over one
// program's stores: the memory function's routes, the compact function's
// builds and the local server's both. It opens no model: the compact
// function and the local server pass the compactor (compactor.Open).
package memoryapi

import (
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/aws/dynamo"
	"github.com/durachat/durachat/shared/aws/sqsqueue"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/transcript"
)

// API is the transcript and the summary memory over one program's stores,
// and the routes that serve them.
type API struct {
	Images     *images.Store
	Transcript *transcript.Log
	Memory     *memory.Memory
	Chats      *lifecycle.Routes
	// appends holds the bodies of appends, through their route and the
	// MCP endpoint (AppendsHeld).
	appends *api.Held
}

// An append is held whole while it is logged, and copied: the body, the
// text decoded, the message's record and the list of its entries, each
// about the size of the body (AppendCopies); an MCP post holds the SDK's
// copies of its body too (MCPCopies). That bounds the memory of one
// append; the memory the appends hold at once is bounded too, to
// AppendsHeld, each waiting at most AppendsWait for its room (then a 503
// with Retry-After). 128 MiB is three appends of the largest size at once
// through their route, two through the MCP endpoint: with the collector's
// headroom, well inside the local server's soft memory limit beside the
// image decode budget (docs/performance.md).
const (
	AppendsHeld  = 128 << 20
	AppendsWait  = 10 * time.Second
	AppendCopies = 4
	MCPCopies    = 8
)

// New wires the transcript and memory over stores, in one order: the
// chats (which admit appends and delete), the transcript, the memory, and
// the lifecycle routes over all three. compactor may be nil for a program
// that serves and schedules but does not build; metrics, when set,
// receives Embedded Metric Format lines.
func New(cfg config.Config, stores app.Stores, compactor memory.Compactor, logger *slog.Logger, metrics io.Writer) (*API, error) {
	imgs := stores.Images()
	chats := lifecycle.New(lifecycle.Config{Table: stores.Table, Blobs: stores.Blobs, Images: imgs, Linker: stores.Linker, Queue: stores.Queue, Scrubber: stores.Scrubber})
	tl := transcript.New(transcript.Config{Table: stores.Table, Blobs: stores.Blobs, Images: imgs, Chats: chats})
	m, err := memory.New(memory.Config{
		Table:        stores.Table,
		Transcript:   tl,
		Images:       imgs,
		Descriptions: imgs,
		Queue:        stores.Queue,
		Retrier:      stores.Receiver,
		Compactor:    compactor,
		Tasks:        chats,
		Deletions:    chats,
		Openers:      chats,
		Search:       cfg.Search,
		BatchBuilds:  cfg.BatchBuilds,
		Logger:       logger,
		Metrics:      metrics,
		// Lambda sets the function's name; the alarms watch it.
		MetricsFunction: os.Getenv("AWS_LAMBDA_FUNCTION_NAME"),
	})
	if err != nil {
		return nil, err
	}
	return &API{Images: imgs, Transcript: tl, Memory: m, Chats: lifecycle.NewRoutes(chats, tl, m), appends: api.NewHeld(AppendsHeld, AppendsWait)}, nil
}

// NewLambda wires the transcript and memory of a Lambda function: f's
// stores with the DynamoDB table and the SQS build queue of its
// configuration. compactor and metrics are as for New.
func NewLambda(f lambdafn.Function, compactor memory.Compactor, metrics io.Writer) (*API, error) {
	f.Stores.Table = dynamo.New(dynamodb.NewFromConfig(f.AWS), f.Config.Table)
	q := sqsqueue.New(sqs.NewFromConfig(f.AWS), f.Config.QueueURL)
	f.Stores.Queue, f.Stores.Receiver = q, q
	return New(f.Config, f.Stores, compactor, f.Log, metrics)
}

// Routes are the memory API's routes: messages, images, view, tools,
// status, and the chat lifecycle (list, read back, delete).
func (a *API) Routes() []api.Routes {
	return []api.Routes{transcript.NewRoutes(a.Transcript, a.Images, a.Memory).Holding(a.appends.Copies(AppendCopies)), a.Memory, a.Chats}
}
