// Command etcd is the upstream etcd server, built from source so that tests
// and the demo need no downloaded binaries.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
