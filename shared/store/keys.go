package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// The key layout: every partition and sort key of the Table and every key
// of the Blobs, in one place. Tenants are path-escaped, so they hold no
// '/'; chat ids and image names cannot hold one either. Partitions:
//
//	chat/<tenant>/<chat>              a chat id's home partition: its identity item (and the chat's state)
//	chat/<tenant>/<chat>~<inc>        one incarnation's rows (package chatid)
//	chats/<tenant>                    the tenant's chat index (written once per chat) and settings
//	imgrefs/<tenant>/<image>          the chats that name one image, and its deletion lease
//	retention                         the tenants that set a retention
//	sweep                             the retention sweep's cursor and lease (SK retention)
//	healthz                           the item health checks read (never written)
//
// Sort keys of a chat incarnation's partition:
//
//	id                  the identity item: incarnation, activity, deletion (home partition only)
//	meta                the transcript's head
//	e/<16-digit id>     a transcript entry
//	r/<hash>            an append's receipt
//	i/<image>           an image the chat names
//	state               the memory tree's state
//	n/<level>/<index>   a memory node
//	view                the chat view's snapshot: its built lines, in one item
//	x/<id>              an erasure's receipt and progress
//
// Blob keys:
//
//	images/<tenant>/<image>               an image
//	images/<tenant>/<image>.description   its description
//	text/<tenant>/<chat or incarnation>/<hash>   a text too big for its row
//	uploads/<tenant>/<image>              an upload not yet checked (S3 expires the prefix)
//	images/healthz/0000000000000000       the blob health checks read (never written)
//	images/origin/0000000000000000        the key a link is signed for to learn the links' origin (never written)

// ChatPK is the partition key of one chat of one tenant. Chat ids cannot
// contain '/', so the last '/' separates an escaped tenant from the chat.
// Of a chat id it is the home partition; each incarnation of the id keeps
// its rows in a partition of its own (package chatid).
func ChatPK(tenant, chat string) string {
	return "chat/" + url.PathEscape(tenant) + "/" + chat
}

// IdentitySK is the sort key of a chat id's identity item, in its home
// partition.
const IdentitySK = "id"

// EntryPrefix begins the sort key of every transcript entry.
const EntryPrefix = "e/"

// entryDigits zero-pads entry ids so their keys sort in id order.
const entryDigits = 16

// EntrySK is the sort key of transcript entry id.
func EntrySK(id int64) string {
	return fmt.Sprintf("%s%0*d", EntryPrefix, entryDigits, id)
}

// ParseEntrySK returns the id of an EntrySK.
func ParseEntrySK(sk string) (int64, error) {
	s, ok := strings.CutPrefix(sk, EntryPrefix)
	if !ok || len(s) != entryDigits {
		return 0, fmt.Errorf("store: %q is not an entry key", sk)
	}
	return strconv.ParseInt(s, 10, 64)
}

// ReceiptPrefix begins the sort key of every append's receipt.
const ReceiptPrefix = "r/"

// ReceiptSK is the sort key of an append's record: a hash, so any receipt
// text makes a short, safe key.
func ReceiptSK(receipt string) string {
	sum := sha256.Sum256([]byte(receipt))
	return ReceiptPrefix + hex.EncodeToString(sum[:16])
}

// ChatImagePrefix begins the sort key of each image a chat names, in the
// chat's partition.
const ChatImagePrefix = "i/"

// ChatImageSK is the sort key recording that a chat names image name.
func ChatImageSK(name string) string { return ChatImagePrefix + name }

// ErasurePrefix begins the sort key of each erasure of a chat.
const ErasurePrefix = "x/"

// ErasureSK is the sort key of erasure id, in the chat's partition.
func ErasureSK(id string) string { return ErasurePrefix + id }

// StateSK is the sort key of a chat's memory state.
const StateSK = "state"

// ViewSK is the sort key of a chat view's snapshot: the lines of its built
// nodes as a view last read them, so that a process with no line cached
// reads one item, not a row per line.
const ViewSK = "view"

// NodePrefix begins the sort key of every memory node.
const NodePrefix = "n/"

// SearchPrefix begins the sort keys of a chat's search index, kept in the
// incarnation's partition so the chat's deletion removes it.
const SearchPrefix = "s/"

// NodeSK is the sort key of the memory node at level, index; zero-padded
// so rows sort by level, then index.
func NodeSK(level int, index int64) string {
	return fmt.Sprintf("%s%02d/%012d", NodePrefix, level, index)
}

// IndexPK is the partition of a tenant's chat index.
func IndexPK(tenant string) string { return "chats/" + url.PathEscape(tenant) }

// IndexChatPrefix begins the sort key of each chat in IndexPK.
const IndexChatPrefix = "c/"

// IndexChatSK is the sort key of chat in its tenant's index.
func IndexChatSK(chat string) string { return IndexChatPrefix + chat }

// SettingsSK is the sort key of a tenant's settings, in IndexPK.
const SettingsSK = "settings"

// RefPK is the partition of the references to one image of a tenant.
func RefPK(tenant, name string) string { return "imgrefs/" + url.PathEscape(tenant) + "/" + name }

// RefChatPrefix begins the sort key of each chat naming the image, in
// RefPK.
const RefChatPrefix = "c/"

// RefChatSK is the sort key recording, in RefPK, that chat names the image.
func RefChatSK(chat string) string { return RefChatPrefix + chat }

// LockSK is the sort key of an image's deletion lease, in RefPK.
const LockSK = "lock"

// RetentionPK lists the tenants that set a retention anywhere.
const RetentionPK = "retention"

// RetentionSK is the sort key of tenant in RetentionPK.
func RetentionSK(tenant string) string { return url.PathEscape(tenant) }

// SweepKey is the retention sweep's item: its cursor and its lease.
func SweepKey() Key { return Key{PK: "sweep", SK: "retention"} }

// HealthKey is the item health checks read; nothing is ever stored under
// it.
func HealthKey() Key { return Key{PK: "healthz", SK: "healthz"} }

// HealthBlobKey is the blob health checks read; nothing is ever stored
// under it. It is under images/, where every function may read.
func HealthBlobKey() string { return ImageKey("healthz", "0000000000000000") }

// LinkOriginKey is the key a link is signed for only to read the origin
// of the links a Linker makes (ui.LinkOrigin); nothing is stored under it.
func LinkOriginKey() string { return ImageKey("origin", "0000000000000000") }

// TextPrefix is where a chat's texts too big for their rows are kept: under
// the chat, so its deletion can delete them without asking whether another
// chat still needs one.
func TextPrefix(tenant, chat string) string {
	return "text/" + url.PathEscape(tenant) + "/" + chat + "/"
}

// TextKey is the blob key of a text moved out of its row, under a chat's
// TextPrefix: content addressed, so a retried put is a no-op.
func TextKey(prefix string, data []byte) string {
	sum := sha256.Sum256(data)
	return prefix + hex.EncodeToString(sum[:])
}

// ImageKey is the blob key of a tenant's image.
func ImageKey(tenant, name string) string {
	return "images/" + url.PathEscape(tenant) + "/" + name
}

// descriptionSuffix ends the key of an image's description, stored beside
// the image. No image key ends so (names are hex), and the key stays under
// the images prefix every function may read.
const descriptionSuffix = ".description"

// DescriptionKey is the blob key of the description of a tenant's image.
func DescriptionKey(tenant, name string) string {
	return ImageKey(tenant, name) + descriptionSuffix
}

// UploadPrefix is the staging prefix of every UploadKey.
const UploadPrefix = "uploads/"

// UploadKey is the staging key an upload of a tenant's image lands under
// before it is checked (S3 expires the prefix; see template.yaml).
func UploadKey(tenant, name string) string {
	return UploadPrefix + url.PathEscape(tenant) + "/" + name
}

// ParseUploadKey returns the tenant and name of an UploadKey, or ok false.
func ParseUploadKey(key string) (tenant, name string, ok bool) {
	rest, found := strings.CutPrefix(key, UploadPrefix)
	if !found {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '/')
	if i <= 0 {
		return "", "", false
	}
	tenant, err := url.PathUnescape(rest[:i])
	if err != nil || tenant == "" {
		return "", "", false
	}
	return tenant, rest[i+1:], true
}
