package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/scheme"
)

// manifest is one YAML document of the input: a Backend or Frontend (node
// set) or anything else, passed through.
type manifest struct {
	doc  []byte
	node v2alpha1.Node
}

// readManifests reads every document of the files, in order: files,
// directories (-R: and their subdirectories) and URLs through kubectl's own
// resource builder; "-" is the standard input.
func (e *env) readManifests(files []string, recursive bool) ([]manifest, error) {
	if len(files) == 0 {
		return nil, errors.New("-f is required: a file, a directory, or - for standard input")
	}
	decoder := serializer.NewCodecFactory(scheme.New()).UniversalDeserializer()
	var out []manifest
	add := func(doc []byte) error {
		// One form whatever the source: YAML, keys sorted.
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return fmt.Errorf("reading a manifest: %w", err)
		}
		if doc, err = yaml.JSONToYAML(js); err != nil {
			return err
		}
		m := manifest{doc: doc}
		obj, gvk, err := decoder.Decode(doc, nil, nil)
		if err == nil && gvk.Group == v2alpha1.GroupVersion.Group {
			if n, ok := obj.(v2alpha1.Node); ok {
				m.node = n
			}
		}
		out = append(out, m)
		return nil
	}
	for _, file := range files {
		if file != "-" {
			infos, err := resource.NewLocalBuilder().Unstructured().ContinueOnError().
				FilenameParam(false, &resource.FilenameOptions{Filenames: []string{file}, Recursive: recursive}).
				Flatten().Do().Infos()
			if err != nil {
				return nil, fmt.Errorf("reading manifests from %s: %w", file, err)
			}
			for _, info := range infos {
				doc, err := json.Marshal(info.Object)
				if err != nil {
					return nil, err
				}
				if err := add(doc); err != nil {
					return nil, err
				}
			}
			continue
		}
		reader := utilyaml.NewYAMLReader(bufioReader(e.in))
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
			if err := add(doc); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}
