package imagefacts

import "context"

// NodeLines reads the line of one built node of a chat: memory's
// (*memory.Memory).NodeLine. Grading reads every node through it, so the
// evaluation never depends on how memory lays out its rows.
type NodeLines interface {
	NodeLine(ctx context.Context, tenant, chat string, l int, i int64) (line string, built bool, err error)
}
