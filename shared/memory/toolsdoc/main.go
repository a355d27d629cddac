// Command toolsdoc writes the memory tools' part of the OpenAPI document
// (memory.OpenAPITools) into the document at the path it is given.
package main

import (
	"fmt"
	"os"

	"github.com/durachat/durachat/shared/memory"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: toolsdoc OPENAPI.json")
		os.Exit(2)
	}
	doc, err := os.ReadFile(os.Args[1])
	if err == nil {
		doc, err = memory.OpenAPITools(doc)
	}
	if err == nil {
		err = os.WriteFile(os.Args[1], doc, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "toolsdoc:", err)
		os.Exit(1)
	}
}
