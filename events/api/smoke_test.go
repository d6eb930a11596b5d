package api

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestSmoke(t *testing.T) {
	files, _ := filepath.Glob("testdata/seeds/*.yaml")
	for _, f := range files {
		data, _ := os.ReadFile(f)
		docs, err := DecodeAll(bytesReader(data))
		fmt.Printf("=== %s: %d docs, err=%v\n", f, len(docs), err)
		for _, d := range docs {
			fmt.Printf("  doc %d item %d line %d %T warnings=%q\n", d.Index, d.Item, d.Line, d.Object, d.Warnings)
			Default(d.Object)
			for _, e := range Validate(d.Object) {
				fmt.Printf("    ! %s\n", e)
			}
		}
	}
}
