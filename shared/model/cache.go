package model

import "strings"

// Prompt cache blocks. A provider caches a prompt's prefix up to a mark
// and, for Claude, finds a cached prefix also at the block boundaries up to
// about 20 blocks before a mark. The cacheable prefix (the compaction view)
// only grows at its end, so it is cut into blocks of CacheBlockLines lines,
// and the last whole block is marked, and the blocks CacheMarkStride and
// 2*CacheMarkStride before it: the next call, whose view has grown, still
// finds the prefix an earlier call cached.
const (
	CacheBlockLines = 4
	CacheMarkStride = 20
)

// CacheBlocks cuts text into blocks of CacheBlockLines lines, byte for
// byte: joined, the blocks are text again.
func CacheBlocks(text string) []string { return chunkLines(text, CacheBlockLines) }

// CacheMarks returns the blocks to mark, nearest the end first: the last
// whole block and the blocks CacheMarkStride and 2*CacheMarkStride before
// it, at most max of them, each only when keep (nil: always) accepts it
// given the block marked after it (-1 for none). A shorter last block, or
// one without a final newline (the closing "</chat>"), changes as the view
// grows, so it is never marked.
func CacheMarks(blocks []string, max int, keep func(block, next int) bool) []int {
	last := -1
	for i := len(blocks) - 1; i >= 0; i-- {
		if whole(blocks[i]) {
			last = i
			break
		}
	}
	if last < 0 {
		return nil
	}
	var marks []int
	next := -1
	for k := 0; k < 3 && last-k*CacheMarkStride >= 0 && len(marks) < max; k++ {
		b := last - k*CacheMarkStride
		if keep == nil || keep(b, next) {
			marks = append(marks, b)
			next = b
		}
	}
	return marks
}

// chunkLines splits text after every n-th newline.
func chunkLines(text string, n int) []string {
	var chunks []string
	for text != "" {
		end, count := 0, 0
		for end < len(text) && count < n {
			i := strings.IndexByte(text[end:], '\n')
			if i < 0 {
				end = len(text)
				break
			}
			end += i + 1
			count++
		}
		chunks = append(chunks, text[:end])
		text = text[end:]
	}
	return chunks
}

// whole: a block of CacheBlockLines complete lines.
func whole(chunk string) bool {
	return strings.Count(chunk, "\n") == CacheBlockLines && strings.HasSuffix(chunk, "\n")
}
