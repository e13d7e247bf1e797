package app

// The permissions express-sequencer uses, generated into config/rbac. Nothing
// more: reading nodes and pods, patching the gate, the release record, the
// date a node left its tenant (on the nodes that stay) and the one
// condition, events, and the CA bundle of its own webhook configurations.

// +kubebuilder:rbac:groups=express.medallia.com,resources=backends;frontends,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=express.medallia.com,resources=backends/status;frontends/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=mutatingwebhookconfigurations;validatingwebhookconfigurations,verbs=get;list;watch;update

// The metrics endpoint authenticates and authorizes its callers through the
// API server.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create
