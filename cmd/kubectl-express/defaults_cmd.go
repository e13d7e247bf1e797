package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/cmd/express-sequencer/app"
	"github.com/medallia/express-sequencer/sequencer"
	"github.com/medallia/express-sequencer/webhook"
)

func newDefaultsCommand(e *env) *cobra.Command {
	var file string
	cmd := &cobra.Command{
		Use:   "defaults -f FILE|-",
		Short: "Print manifests with what the admission webhook would inject, without a cluster",
		Long: `defaults reads Backend and Frontend manifests (other kinds pass through) and
prints them as the admission webhook would admit them on create: default
prerequisites injected where a list is absent, the sequencer's gate on up
nodes. It runs the webhook's own code, so chart CI can check rendered tenants
without a cluster. Warnings go to stderr; a manifest the webhook would refuse
fails the command with the webhook's message.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if file == "" {
				return errors.New("-f is required: a file, or - for standard input")
			}
			var in io.Reader = e.in
			if file != "-" {
				f, err := os.Open(file)
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			return e.defaults(in)
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "Manifests to read; - reads standard input.")
	return cmd
}

func (e *env) defaults(in io.Reader) error {
	orders, err := e.orders()
	if err != nil {
		return err
	}
	decoder := serializer.NewCodecFactory(app.Scheme()).UniversalDeserializer()
	var docs [][]byte
	var nodes []v2alpha1.Node
	reader := utilyaml.NewYAMLReader(bufioReader(in))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("reading manifests: %w", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		docs = append(docs, doc)
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err == nil && gvk.Group == v2alpha1.GroupVersion.Group {
			if n, ok := obj.(v2alpha1.Node); ok {
				nodes = append(nodes, n)
				continue
			}
		}
		nodes = append(nodes, nil) // passes through unchanged
	}
	var refused []string
	for i, n := range nodes {
		if n == nil {
			continue
		}
		orders.Apply(n)
		hash, err := rawHash(docs[i])
		if err != nil {
			return fmt.Errorf("%s %s: %w", n.NodeKind(), n.GetName(), err)
		}
		for _, w := range sequencer.Admit(n, sequencer.Admission{Hash: hash, Now: time.Now()}) {
			fmt.Fprintf(e.errOut, "Warning: %s %s: %s\n", n.NodeKind(), n.GetName(), w)
		}
		// The times are the API server's to stamp at the real admission.
		ann := n.GetAnnotations()
		delete(ann, v2alpha1.AnnotationTargetChangedAt)
		delete(ann, v2alpha1.AnnotationRolloutIDChangedAt)
		n.SetAnnotations(ann)
		var others []v2alpha1.Node
		for j, o := range nodes {
			if o != nil && j != i && o.GetNamespace() == n.GetNamespace() {
				others = append(others, o)
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
		out, err := yaml.Marshal(n)
		if err != nil {
			return err
		}
		docs[i] = out
	}
	for i, d := range docs {
		if i > 0 {
			fmt.Fprintln(e.out, "---")
		}
		fmt.Fprint(e.out, strings.TrimRight(string(d), "\n")+"\n")
	}
	if len(refused) > 0 {
		return errors.New(strings.Join(refused, "\n"))
	}
	return nil
}

func bufioReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// rawHash is the target hash the webhook would stamp on a manifest: of its
// raw spec, fields kubectl-express does not model included.
func rawHash(doc []byte) (string, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return "", fmt.Errorf("reading the manifest: %w", err)
	}
	return sequencer.TargetHashOfObject(js)
}
