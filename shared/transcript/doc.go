// Package transcript is a chat's durable log: pi messages in, entries out.
// Rows hold refs, never base64; every row is size-checked before it is
// written. The log is memory's only source of truth.
//
// # Layout
//
// All rows of a chat live in the partition of its current incarnation
// (chatid.Chat.PK: store.ChatPK(tenant, chat+"~"+incarnation), or
// store.ChatPK(tenant, chat) for a chat written before incarnations):
//
//	e/<id, 16 digits>  one entry; the zero padding makes sort order id order
//	r/<hash>           one append's receipt record, keyed by a hash of the receipt
//
// An append writes to the incarnation Chats.Hold opens (after it
// found the chat not being deleted); reads take the incarnation to read,
// so one read never mixes two. A receipt names an append of one
// incarnation: the same receipt after the chat was deleted and created
// again is a new append.
//
// The entry where a message starts also keeps the message whole (Record):
// its JSON as the host sent it, image blocks without their data, which is
// what the chat reads back and exports; the message's later entries say
// they continue it. Rows written before records were kept have neither,
// and read back from their text.
//
// An entry whose text would not fit ItemBudget keeps it in a blob under
// the incarnation's text prefix (chatid.Chat.TextPrefix:
// "text/<escaped tenant>/<chat>~<incarnation>/<sha256>") and names that
// key instead, as do a message's Record and an append's receipt record
// too big for their items; readers fetch it transparently. Blobs and
// images are always written before the
// rows that name them, so a crash leaves an orphan object, never a row
// pointing at nothing.
//
// # Appending without transactions
//
// An append turns its messages into n entries that must get n
// contiguous ids, exactly once, even when the caller crashes halfway and
// retries, or two copies of one request race. The steps:
//
//  0. Check the messages and digest them as received: their JSON, keys
//     sorted and compact, each large value hashed in place.
//  1. Get r/<receipt>. When it exists, its request digest must equal ours,
//     else the receipt names another request: ErrReceiptConflict, before
//     anything is written. When its first id also holds our claim row, the
//     append happened (maybe partly): finish it from the record and return
//     its ids, writing nothing else and converting nothing again.
//  2. Store the images and any oversized text (S3 first).
//  3. Find the log's end: read the newest entry (one query, newest
//     first); every row says where its append ends, and the newest row is
//     in the last append.
//  4. Create r/<receipt> (conditional): the receipt, the id it means to
//     claim, a date, the request digest, a digest of the entries and the
//     entries after the first one ("rest"; in a blob when large). It is the
//     intent that lets anyone complete the append later. When it exists
//     already, a twin of this request got there first: adopt its record
//     (either digest differing is ErrReceiptConflict).
//  5. Claim: create e/<first> (conditional) holding entry 0, the receipt,
//     its position 0 and the append's size n. This single write reserves the
//     whole range [first, first+n): probes jump over it. If another append
//     took that id, probe on, move the record's first id with a versioned
//     update, and try again (bounded). A twin that finds our claim row
//     joins it. The first id changes only while no claim row names it, so
//     an append is claimed at most once.
//  6. Create e/<first+1> ... e/<first+n-1> from the record; a row already
//     there must be ours (same receipt and position).
//  7. Return the ids.
//
// No entry is ever half-visible: a reader that finds a claim row whose
// sibling rows are missing (a crash between 5 and 6) completes the append
// from its record before answering, so every reader sees all of an append
// or none of it. A failure before step 5 leaves nothing visible; after it,
// the append is durable and any reader or a retry with the same receipt
// finishes it with exactly the same ids and content.
//
// A receipt names one request. The same messages under it again, in any
// state, are a retry; other messages under it are ErrReceiptConflict (a
// 409), whether or not its append completed. Records written before the
// request digest was kept carry none: once claimed, they answer their ids
// to any messages; before that, only the entry digest is compared.
//
// Store outages are returned wrapping store.ErrUnavailable; bad input is a
// bad-request *fault.Error naming the field, found before any row is
// written.
package transcript
