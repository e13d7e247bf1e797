package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func newPauseCommand(e *env, pause bool) *cobra.Command {
	use, short := "resume NODE|TYPE/NODE", "Let a paused node go on"
	if pause {
		use, short = "pause NODE|TYPE/NODE", "Hold a node, and so everything that waits for it"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Long: short + ` (the ` + v2alpha1.AnnotationPauseRollout + ` annotation).
A paused node is not released; a node already released finishes its rollout.`,
		Example: "  kubectl express " + strings.Fields(use)[0] + " acme-fe2 -n tenant-123634-prod\n  kubectl express " + strings.Fields(use)[0] + " frontend/acme-fe2 -n tenant-123634-prod",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := e.client()
			if err != nil {
				return err
			}
			n, err := getNode(cmd, c, ns, args[0])
			if err != nil {
				return err
			}
			value := "null"
			if pause {
				value = `"true"`
			}
			patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%s}}}`, v2alpha1.AnnotationPauseRollout, value))
			if err := c.Patch(contextOf(cmd), n, client.RawPatch("application/merge-patch+json", patch)); err != nil {
				return fmt.Errorf("annotating %s %s: %w", n.NodeKind(), n.GetName(), err)
			}
			verb := "resumed"
			if pause {
				verb = "paused"
			}
			fmt.Fprintf(e.out, "%s/%s %s\n", n.NodeKind(), n.GetName(), verb)
			return nil
		},
	}
}

// getNode finds a Backend or Frontend by name, or by TYPE/NAME as kubectl
// takes it (frontend/acme-fe2, backends/acme-be, fe/acme-fe2, be/acme-be,
// frontend.express.medallia.com/acme-fe2).
func getNode(cmd *cobra.Command, c client.Client, ns, name string) (v2alpha1.Node, error) {
	kinds := []string{v2alpha1.KindFrontend, v2alpha1.KindBackend}
	if typ, n, ok := strings.Cut(name, "/"); ok {
		kind, known := nodeKinds[strings.ToLower(strings.TrimSuffix(typ, "."+v2alpha1.GroupVersion.Group))]
		if !known {
			return nil, fmt.Errorf("%q: the type must be backend or frontend (be, fe), not %q", name, typ)
		}
		kinds, name = []string{kind}, n
	}
	for _, kind := range kinds {
		n := v2alpha1.NewNode(kind)
		err := c.Get(contextOf(cmd), client.ObjectKey{Namespace: ns, Name: name}, n)
		if err == nil {
			return n, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	if len(kinds) == 1 {
		return nil, fmt.Errorf("no %s %q in namespace %q", kinds[0], name, ns)
	}
	return nil, fmt.Errorf("no Backend or Frontend %q in namespace %q", name, ns)
}

// nodeKinds maps what kubectl accepts as a type to the node kinds.
var nodeKinds = map[string]string{
	"backend": v2alpha1.KindBackend, "backends": v2alpha1.KindBackend, "be": v2alpha1.KindBackend,
	"frontend": v2alpha1.KindFrontend, "frontends": v2alpha1.KindFrontend, "fe": v2alpha1.KindFrontend,
}
