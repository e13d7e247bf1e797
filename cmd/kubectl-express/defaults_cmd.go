package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/webhook"
)

func newDefaultsCommand(e *env) *cobra.Command {
	var files []string
	var recursive bool
	cmd := &cobra.Command{
		Use:   "defaults -f FILE|- [-f FILE]...",
		Short: "Print manifests with what the admission webhook would inject, without a cluster",
		Long: `defaults reads Backend and Frontend manifests (other kinds pass through) and
prints them as the admission webhook would admit them on create: default
prerequisites injected where a list is absent, the sequencer's gate on up
nodes. It runs the webhook's own code, so chart CI can check rendered tenants
without a cluster. Warnings go to stderr; a manifest the webhook would refuse
fails the command with the webhook's message.`,
		Example: `  helm template charts/express-tenant | kubectl express defaults -f -`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := e.readManifests(files, recursive)
			if err != nil {
				return err
			}
			return e.defaults(ms)
		},
	}
	cmd.Flags().StringArrayVarP(&files, "filename", "f", nil, "Manifests to read: files, directories or URLs (repeatable); - reads standard input.")
	cmd.Flags().BoolVarP(&recursive, "recursive", "R", false, "Read the directories given with -f recursively.")
	return cmd
}

func (e *env) defaults(ms []manifest) error {
	orders, err := e.orders()
	if err != nil {
		return err
	}
	admitted, refused, err := e.admitLocally(ms, orders, nil)
	if err != nil {
		return err
	}
	for i, m := range ms {
		if i > 0 {
			fmt.Fprintln(e.out, "---")
		}
		doc := m.doc
		if n := admitted[i]; n != nil {
			if doc, err = yaml.Marshal(n); err != nil {
				return err
			}
		}
		fmt.Fprint(e.out, strings.TrimRight(string(doc), "\n")+"\n")
	}
	if len(refused) > 0 {
		return errors.New(strings.Join(refused, "\n"))
	}
	return nil
}

// admitLocally runs the webhooks' own code on the manifests' nodes, as the
// API server would admit them — as updates of current where it has a node
// of that name, as creates otherwise — and returns the admitted nodes (nil
// for other kinds), the refusals, and prints the warnings to stderr.
func (e *env) admitLocally(ms []manifest, orders defaults.Orders, current map[string]currentNode) ([]v2alpha1.Node, []string, error) {
	admitted := make([]v2alpha1.Node, len(ms))
	var refused []string
	for i, m := range ms {
		if m.node == nil {
			continue
		}
		n := m.node.DeepCopyObject().(v2alpha1.Node)
		var stored v2alpha1.Node
		if cur, ok := current[n.GetName()]; ok {
			stored = cur.node
		}
		defaults.RestoreRecord(n, stored)
		orders.Apply(n)
		hash, err := rawHash(m.doc)
		if err != nil {
			return nil, nil, fmt.Errorf("%s %s: %w", n.NodeKind(), n.GetName(), err)
		}
		a := rollout.Admission{Hash: hash, Now: time.Now()}
		if cur, ok := current[n.GetName()]; ok {
			a.Old, a.OldHash = cur.node, cur.hash
			// As kubectl apply patches: what the manifest does not name stays.
			ann := n.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			for k, v := range cur.node.GetAnnotations() {
				if _, ok := ann[k]; !ok {
					ann[k] = v
				}
			}
			n.SetAnnotations(ann)
		}
		for _, w := range rollout.Admit(n, a) {
			fmt.Fprintf(e.errOut, "Warning: %s %s: %s\n", n.NodeKind(), n.GetName(), w)
		}
		// The times are the API server's to stamp at the real admission.
		ann := n.GetAnnotations()
		delete(ann, v2alpha1.AnnotationTargetChangedAt)
		delete(ann, v2alpha1.AnnotationOrderChangedAt)
		delete(ann, v2alpha1.AnnotationTargetChangesBeganAt)
		delete(ann, v2alpha1.AnnotationRolloutIDChangedAt)
		delete(ann, v2alpha1.AnnotationRolloutHistory)
		n.SetAnnotations(ann)
		var others []v2alpha1.Node
		for j, o := range ms {
			if o.node != nil && j != i && o.node.GetNamespace() == n.GetNamespace() {
				others = append(others, o.node)
			}
		}
		warnings, errs := webhook.Check(n, others, orders)
		for _, w := range warnings {
			fmt.Fprintf(e.errOut, "Warning: %s %s: %s\n", n.NodeKind(), n.GetName(), w)
		}
		if len(errs) > 0 {
			refused = append(refused, fmt.Sprintf("%s %q would be refused: %s", n.NodeKind(), n.GetName(), errs.ToAggregate()))
		}
		n.GetObjectKind().SetGroupVersionKind(v2alpha1.GroupVersion.WithKind(n.NodeKind()))
		admitted[i] = n
	}
	return admitted, refused, nil
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// rawHash is the target hash the webhook would stamp on a manifest: of its
// raw spec, fields kubectl-express does not model included.
func rawHash(doc []byte) (string, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return "", fmt.Errorf("reading the manifest: %w", err)
	}
	return rollout.TargetHashOfObject(js)
}
