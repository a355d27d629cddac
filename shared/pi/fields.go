package pi

import "slices"

// IsBlockField reports whether a block's field is one Block names; every
// other field of a block is kept in its Extra.
func IsBlockField(name string) bool { return slices.Contains(blockFields, name) }
