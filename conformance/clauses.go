package conformance

// clauses are the contract's rules the kit checks, in the order of
// docs/express-operator-contract.md.
var clauses = []clause{
	{id: "crd-fields", section: "§0 Carry these fields in your CRDs",
		description: "the CRDs carry rolloutGates (a list map by name), deploymentDependencies, status.conditions (a list map by type) and the status subresource, and keep an unknown spec field as written",
		check:       checkCRDFields},
	{id: "gates-hold", section: "§1 Honour the rollout gates",
		description: "a node that carries a gate (of another name than the sequencer's) gets no new, replaced or restarted pod, and no new pod template, for a version change, a revision change (held, then put back), a config-only change and a change to a field the operator does not act on; nor is a gated node (re)provisioned: brought back up, or created, with a gate",
		check:       checkGatesHold},
	{id: "gate-only-hold", section: "§1 Honour the rollout gates",
		description:    "the gate is the only hold: a Backend and a Frontend whose lists wait for each other on the new version (the old chart's pinned loop) are both rolled out as the sequencer releases them, the Backend first, however the lists read",
		needsSequencer: true, check: checkGateIsTheOnlyHold},
	{id: "rolls-labelled", section: "§2 Label the pods with the target hash",
		description: "once no gate holds it, a node rolls out a version change; its pods and its StatefulSet's template carry the node, target-hash, express-version and deployment-revision labels of the target",
		check:       checkRollsLabelled},
	{id: "rolls-any-field", section: "§2 Label the pods with the target hash",
		description: "a config-only change, and a change to a field the operator does not act on, still move every pod to the new target hash (rolled or relabelled)",
		check:       checkRollsAnyField},
	{id: "statefulset", section: "§2 Label the pods with the target hash",
		description: "one StatefulSet per node, named after it and controlled by it, controlling every pod of the node, rolled with RollingUpdate and no partition; after a rollout the same StatefulSet's currentRevision equals its updateRevision on the new template",
		check:       checkStatefulSet},
	{id: "up-false", section: "§1 Honour the rollout gates",
		description: "up: false scales the node to zero and keeps its StatefulSet and template (no rollout), and they stay so while it is down; up: true provisions it again",
		check:       checkUpFalse},
	{id: "conditions", section: "§3 Own the rest of status, never PrerequisitesReady",
		description: "the operator's status writes leave a condition written by another field manager as it was, every field of it",
		check:       checkConditions},
	{id: "recreate-promptly", section: "§4 Recovery needs nothing from you",
		description: "a deleted pod of a node no gate holds comes back and is Ready promptly once it is gone, waiting for nothing but the sequencer's scheduling gate",
		check:       checkRecreatePromptly},
	{id: "failing-pods", section: "§2 Label the pods with the target hash",
		description: "a pod that cannot start is reported as the kubelet reports it (phase Failed, or a container waiting in CrashLoopBackOff, ImagePullBackOff and the like), not deleted or hidden",
		skip: func(cfg Config) string {
			if cfg.FailingVersion == "" {
				return "no version whose containers cannot start was given (Config.FailingVersion, --failing-version)"
			}
			return ""
		},
		check: checkFailingPods},
	{id: "sequencer-release", section: "§5 What you can rely on",
		description:    "with express-sequencer, a change is gated by it, released, and recorded complete (PrerequisitesReady RolloutComplete) once the operator has rolled it out",
		needsSequencer: true, check: checkSequencerRelease},
}
