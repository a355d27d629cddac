package imagefacts

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/durachat/durachat/shared/store"
)

// TableNodes reads built node lines from the chat's partition of the
// table. The memory package has no call that returns one node's line (its
// view and zoom show only what an agent sees), so this reads its rows
// directly: sort key "n/<level, 2 digits>/<index, 12 digits>", and a JSON
// body whose "t" is the line. A change to that layout makes every line
// read as missing, which fails the evaluation loudly instead of grading
// empty text.
type TableNodes struct {
	Table store.Table
}

// nodeRow is the part of a memory node row the evaluation reads.
type nodeRow struct {
	Text string `json:"t"`
}

// Line returns the line of node (level, index) of a chat, and whether it
// is built.
func (n TableNodes) Line(ctx context.Context, tenant, chat string, level int, index int64) (string, bool, error) {
	it, err := n.Table.Get(ctx, store.Key{PK: store.ChatPK(tenant, chat), SK: fmt.Sprintf("n/%02d/%012d", level, index)})
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return "", false, nil
		}
		return "", false, fmt.Errorf("reading node (%d, %d) of %s: %w", level, index, chat, err)
	}
	var r nodeRow
	if err := json.Unmarshal(it.Body, &r); err != nil {
		return "", false, fmt.Errorf("node (%d, %d) of %s: %w", level, index, chat, err)
	}
	if r.Text == "" {
		return "", false, fmt.Errorf("node (%d, %d) of %s has no line in its \"t\" field", level, index, chat)
	}
	return r.Text, true, nil
}
