// Package scheme builds the runtime scheme express-sequencer and
// kubectl-express use: Kubernetes' built-in types and the Express nodes.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// New returns a scheme with Kubernetes' built-in types and Backend and
// Frontend registered.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s) // registering built-in types cannot fail
	_ = v2alpha1.AddToScheme(s)
	return s
}
