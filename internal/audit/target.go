package audit

import v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"

// TargetKey is what a pod (or a pod template) with these labels was made
// for: its target-hash label, or, on the contract's fallback, its version
// and revision labels.
func TargetKey(labels map[string]string) string {
	if h := labels[v2alpha1.LabelTargetHash]; h != "" {
		return h
	}
	return SpecKey(labels[v2alpha1.LabelExpressVersion], labels[v2alpha1.LabelDeploymentRevision])
}

// SpecKey is the fallback key (TargetKey's, without target-hash) of a node
// whose spec asks for version and revision: what its pods carry on the
// contract's fallback.
func SpecKey(version, revision string) string {
	return "version=" + version + ",revision=" + revision
}
