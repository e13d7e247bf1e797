// Package v2alpha1 holds the Express node API (Backend and Frontend) as far as
// express-sequencer reads and writes it, and the constants of its contract.
//
// +kubebuilder:object:generate=true
// +groupName=express.medallia.com
package v2alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of the Express node API.
	GroupVersion = schema.GroupVersion{Group: "express.medallia.com", Version: "v2alpha1"}

	// SchemeBuilder registers Backend and Frontend with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the Express node types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
