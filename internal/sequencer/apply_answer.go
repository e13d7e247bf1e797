package sequencer

import (
	"bytes"
	"encoding/json"

	"k8s.io/apimachinery/pkg/runtime"
)

// nodeApplyConfiguration is a Backend's or Frontend's typed apply
// configuration, as the client sends it.
type nodeApplyConfiguration interface {
	runtime.ApplyConfiguration
	GetName() *string
	GetNamespace() *string
	GetKind() *string
	GetAPIVersion() *string
}

// withAnswer sends an apply configuration and keeps the API server's answer
// (the whole object as stored) as it came, to be decoded into the node's own
// type. Decoded into the apply configuration's types and back, an explicit
// empty prerequisite list — "no prerequisites" — would come out absent —
// "the default order" — as those types omit empty lists.
type withAnswer struct {
	nodeApplyConfiguration
	answer []byte
}

func (a *withAnswer) MarshalJSON() ([]byte, error) { return json.Marshal(a.nodeApplyConfiguration) }

func (a *withAnswer) UnmarshalJSON(answer []byte) error {
	a.answer = bytes.Clone(answer)
	return nil
}
