// Command kube-scheduler is the upstream scheduler, built from source: it
// binds pods to the fake Nodes KWOK runs, and holds pods with scheduling
// gates.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}
