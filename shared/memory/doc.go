// Package memory is the OptChat summary tree over a chat's log: one leaf per
// entry, binary merges above them, a bounded view the agent reads each turn,
// a coarser compaction view the compactor reads as context, and the tools
// (zoom, date, search) that reach back to the originals.
//
// Nothing here runs for long. A small per-chat state item, updated with
// optimistic locking, holds everything the scheduler needs; builds are
// queue messages carrying ids only, so a function that dies mid-build, a
// lost message or a redelivered one can stall or duplicate nothing.
//
// Everything memory keeps of a chat is of one incarnation of its id
// (chatid): its state item, node rows and view snapshot (store.StateSK,
// store.NodeSK, store.ViewSK) live in the incarnation's partition, its
// build messages name the incarnation ("n"), and the in-process line cache
// is keyed by the partition. A request reads the current incarnation
// once; a build message of another is dropped unbuilt, and a state, node
// row or snapshot is created only while its incarnation is current, so a
// chat deleted and created again never sees, nor is written by, what
// memory kept of the one before.
package memory
