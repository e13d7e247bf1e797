// Command kube-apiserver is the upstream Kubernetes API server, built from
// source so that tests and the demo need no downloaded binaries.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
