package audit

import v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"

// TargetKey is what a pod (or a pod template) with these labels was made
// for: its target-hash label, or, on the contract's fallback, its version
// and revision labels.
func TargetKey(labels map[string]string) string {
	if h := labels[v2alpha1.LabelTargetHash]; h != "" {
		return h
	}
	return "version=" + labels[v2alpha1.LabelExpressVersion] + ",revision=" + labels[v2alpha1.LabelDeploymentRevision]
}
