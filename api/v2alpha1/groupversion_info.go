// Package v2alpha1 holds the Express node API (Backend and Frontend) as far as
// express-sequencer reads and writes it, and the constants of its contract.
//
// +kubebuilder:object:generate=true
// +kubebuilder:ac:generate=true
// +kubebuilder:ac:output:package="../../internal/applyconfiguration"
// +groupName=express.medallia.com
package v2alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of the Express node API.
	GroupVersion = schema.GroupVersion{Group: "express.medallia.com", Version: "v2alpha1"}

	// SchemeGroupVersion is GroupVersion under the name k8s.io/api's
	// packages and generated code use.
	SchemeGroupVersion = GroupVersion

	// SchemeBuilder registers Backend and Frontend with a scheme, as
	// k8s.io/api's packages do: apimachinery only.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the Express node types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Backend{}, &BackendList{}, &Frontend{}, &FrontendList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
