package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/durachat/durachat/shared/api"
	"github.com/durachat/durachat/shared/compactor"
	"github.com/durachat/durachat/shared/config"
	"github.com/durachat/durachat/shared/images"
	"github.com/durachat/durachat/shared/memory"
	"github.com/durachat/durachat/shared/transcript"
)

// Compressor is the compressor cfg names: a host's own (over HTTP or as a
// Lambda function) when configured, else the compactor over cfg's model.
func Compressor(ctx context.Context, cfg config.Config) (memory.Compressor, error) {
	switch {
	case cfg.CompressorURL != "":
		return &compactor.HTTPCompressor{URL: cfg.CompressorURL}, nil
	case cfg.CompressorFunction != "":
		ac, err := awsconfig.LoadDefaultConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("loading AWS configuration for %s: %w", config.EnvCompressorFunction, err)
		}
		return &compactor.LambdaCompressor{
			Function: cfg.CompressorFunction,
			Invoker:  &compactor.LambdaInvoker{Client: lambda.NewFromConfig(ac)},
		}, nil
	}
	m, err := compactor.OpenModel(ctx, cfg.Model.String(), cfg.ModelURL, cfg.ModelKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.EnvModel, err)
	}
	return compactor.New(m, compactor.Options{}), nil
}

// Memory is the transcript and the summary memory over one program's
// stores, and the routes that serve them.
type Memory struct {
	Images     *images.Store
	Transcript *transcript.Log
	Memory     *memory.Memory
}

// NewMemory wires the transcript and memory over stores. compressor may be
// nil for a program that serves and schedules but does not build; metrics,
// when set, receives Embedded Metric Format lines.
func NewMemory(cfg config.Config, stores Stores, compressor memory.Compressor, log *slog.Logger, metrics io.Writer) (*Memory, error) {
	imgs := images.New(stores.Blobs)
	tl := transcript.New(stores.Table, stores.Blobs, imgs)
	m, err := memory.New(memory.Config{
		Table:      stores.Table,
		Log:        tl,
		Images:     imgs,
		Queue:      stores.Queue,
		Retrier:    stores.Receiver,
		Compressor: compressor,
		Search:     cfg.Search,
		Logger:     log,
		Metrics:    metrics,
		// Lambda sets the function's name; the alarms watch it.
		MetricsFunction: os.Getenv("AWS_LAMBDA_FUNCTION_NAME"),
	})
	if err != nil {
		return nil, err
	}
	return &Memory{Images: imgs, Transcript: tl, Memory: m}, nil
}

// Routes are the memory API's routes: messages, images, view, tools, status.
func (m *Memory) Routes() []api.Routes {
	return []api.Routes{transcript.NewRoutes(m.Transcript, m.Images, m.Memory), m.Memory}
}
