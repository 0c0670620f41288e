package filestream_test

import (
	"context"
	"fmt"
	"os"

	"github.com/accelkit/accelkit/progcache"
	"github.com/accelkit/accelkit/progcache/filestream"
)

func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "progcache")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	c, err := filestream.Open(dir, filestream.Options{MaxBytes: 1 << 30})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	var k progcache.Key
	c.Put(ctx, k, progcache.Object{Kind: "ptx", Name: "k.cu", Code: []byte(".version 8.0")})
	obj, ok, _ := c.Get(ctx, k)
	fmt.Println(ok, obj.Name, string(obj.Code))
	// Output: true k.cu .version 8.0
}
