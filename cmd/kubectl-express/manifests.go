package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/cmd/express-sequencer/app"
)

// manifest is one YAML document of the input: a Backend or Frontend (node
// set) or anything else, passed through.
type manifest struct {
	doc  []byte
	node v2alpha1.Node
}

// readManifests reads every document of the files, in order; "-" is the
// standard input.
func (e *env) readManifests(files []string) ([]manifest, error) {
	if len(files) == 0 {
		return nil, errors.New("-f is required: a file, or - for standard input")
	}
	decoder := serializer.NewCodecFactory(app.Scheme()).UniversalDeserializer()
	var out []manifest
	for _, file := range files {
		var in io.Reader = e.in
		if file != "-" {
			f, err := os.Open(file)
			if err != nil {
				return nil, err
			}
			defer f.Close()
			in = f
		}
		reader := utilyaml.NewYAMLReader(bufioReader(in))
		for {
			doc, err := reader.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("reading manifests from %s: %w", file, err)
			}
			if len(bytes.TrimSpace(doc)) == 0 {
				continue
			}
			m := manifest{doc: doc}
			obj, gvk, err := decoder.Decode(doc, nil, nil)
			if err == nil && gvk.Group == v2alpha1.GroupVersion.Group {
				if n, ok := obj.(v2alpha1.Node); ok {
					m.node = n
				}
			}
			out = append(out, m)
		}
	}
	return out, nil
}
