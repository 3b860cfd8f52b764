// Command etcd is the etcd server, built from go.etcd.io/etcd/server/v3 at the version
// pinned in versions.env so the test cluster needs no downloaded release binary.
// It adds nothing to etcd's own entry point.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
