// Command kube-controller-manager is the upstream controller manager (the
// StatefulSet controller, the garbage collector, node lifecycle), built from
// source so that tests and the demo run Kubernetes' own control loops.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}
