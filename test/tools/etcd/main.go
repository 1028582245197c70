// Command etcd is etcd's own server main, built from the pinned module so the
// test control plane needs no prebuilt binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
