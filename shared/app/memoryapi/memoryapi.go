// Package memoryapi wires the transcript, the summary memory and the chat
// lifecycle over one program's stores, and the one router of their queue's
// tasks: the memory function's routes, the compact function's tasks and
// the local server's both. It opens no model: the compact function and
// the local server pass the compactor (compactor.Open).
package memoryapi

import (
	"context"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/durachat/durachat/client/wire"
	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/app"
	"github.com/durachat/durachat/shared/app/chatsapi"
	"github.com/durachat/durachat/shared/app/lambdafn"
	"github.com/durachat/durachat/shared/aws/sqsqueue"
	"github.com/durachat/durachat/shared/chatid"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/lifecycle"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/tasks"
	"github.com/durachat/durachat/shared/transcript"
)

// API is the transcript and the summary memory over one program's stores,
// the routes that serve them, and the consumer of their queue.
type API struct {
	Images     *images.Store
	Transcript *transcript.Log
	Memory     *memory.Memory
	Chats      *lifecycle.Routes
	// appends holds the bodies of appends, through their route and the
	// MCP endpoint (AppendsHeld).
	appends *api.Held
	// Tasks runs the queue's messages: the compact function's batches
	// (HandleBatch), the local server's worker (Worker).
	Tasks *tasks.Consumer
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

// Models are the models a program's memory calls: the compactor that
// builds nodes (nil: a program that serves and schedules but does not
// build) and the embedding model of search by meaning (nil: search ranks
// by words alone).
type Models struct {
	Compactor memory.Compactor
	Embedder  memory.Embedder
}

// New wires the transcript and memory over stores, in one order: the
// chats (which admit appends and delete), the transcript, the memory, the
// lifecycle routes over all three, and the router of the queue's tasks.
// models are the program's (Models); metrics, when set, receives Embedded
// Metric Format lines.
func New(cfg config.Config, stores app.Stores, models Models, logger *slog.Logger, metrics io.Writer) (*API, error) {
	imgs := stores.Images()
	chats := chatsapi.New(stores, cfg.SettleAfter)
	tl := transcript.New(transcript.Config{Table: stores.Table, Blobs: stores.Blobs, Images: imgs, Chats: chats})
	// The lifecycle routes are made over the memory below; the forget tool
	// runs their erasure once they are.
	var routes *lifecycle.Routes
	m, err := memory.New(memory.Config{
		Table:        stores.Table,
		Transcript:   tl,
		Images:       imgs,
		Descriptions: imgs,
		Queue:        stores.Queue,
		Compactor:    models.Compactor,
		Chats:        chats,
		Forget: memory.ForgetFunc(func(ctx context.Context, c chatid.Chat, a wire.ForgetArgs) (wire.Erasure, error) {
			return routes.Forget(ctx, c, a)
		}),
		Search:   cfg.Search,
		Embedder: models.Embedder,
		Logger:   logger,
		Metrics:  metrics,
		// Lambda sets the function's name; the alarms watch it.
		MetricsFunction: os.Getenv("AWS_LAMBDA_FUNCTION_NAME"),
	})
	if err != nil {
		return nil, err
	}
	routes = lifecycle.NewRoutes(chats, tl, m)
	return &API{Images: imgs, Transcript: tl, Memory: m, Chats: routes, appends: api.NewHeld(AppendsHeld, AppendsWait),
		Tasks: tasks.NewConsumer(tasks.Config{
			Router:     router(m, routes),
			Queue:      stores.Queue,
			Retrier:    stores.Receiver,
			Batch:      cfg.BatchBuilds,
			Visibility: m.ClaimLease(),
			Logger:     logger,
		})}, nil
}

// router is the one router of the queue's tasks: each kind and the one
// handler that runs it.
func router(m *memory.Memory, chats *lifecycle.Routes) *tasks.Router {
	return tasks.NewRouter(map[tasks.Kind]tasks.Handler{
		tasks.Build:  m.BuildTask,
		tasks.Delete: chats.DeletionTask,
		tasks.Settle: chats.SettleTask,
		tasks.Expire: chats.SweepTask,
		tasks.Erase:  chats.EraseTask,
	})
}

// NewLambda wires the transcript and memory of a Lambda function: f's
// stores with the DynamoDB table and the SQS build queue of its
// configuration. models and metrics are as for New.
func NewLambda(f lambdafn.Function, models Models, metrics io.Writer) (*API, error) {
	chatsapi.WithTable(&f)
	q := sqsqueue.New(sqs.NewFromConfig(f.AWS), f.Config.QueueURL)
	f.Stores.Queue, f.Stores.Receiver = q, q
	return New(f.Config, f.Stores, models, f.Log, metrics)
}

// Routes are the memory API's routes: messages, images, view, tools,
// status, and the chat lifecycle (list, read back, delete).
func (a *API) Routes() []api.Routes {
	return []api.Routes{transcript.NewRoutes(a.Transcript, a.Images, a.Memory).Holding(a.appends.Copies(AppendCopies)), a.Memory, a.Chats}
}
