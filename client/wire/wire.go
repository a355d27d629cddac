// Package wire holds the JSON bodies of durachat's answers that the
// server writes and the Go client reads: a chat's memory view, status and
// tree, the chat list, a deletion's progress, an import's result, a
// retention setting, what before-request restored, and the memory tools'
// results (ToolResult, of pi-ai content Blocks) with the arguments a
// client calls them with. The server's
// module imports this package, so the two cannot drift apart; like the
// rest of the client's module it needs nothing but the standard library.
package wire
