package sequencer

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func TestAStreamedListIsDecodedItemByItem(t *testing.T) {
	for name, c := range map[string]struct {
		body     string
		items    []string
		version  string
		errorHas string
	}{
		"a list's items and metadata are read, other fields skipped": {
			body:  `{"apiVersion":"express.medallia.com/v2alpha1","kind":"FrontendList","metadata":{"resourceVersion":"42","continue":""},"items":[{"metadata":{"name":"acme-fe1"}},{"metadata":{"name":"acme-fe2"},"spec":{"expressVersion":"v1"}}]}`,
			items: []string{"acme-fe1", "acme-fe2"}, version: "42",
		},
		"metadata after the items is read too": {
			body:  `{"items":[{"metadata":{"name":"acme-fe1"}}],"metadata":{"resourceVersion":"7"}}`,
			items: []string{"acme-fe1"}, version: "7",
		},
		"an empty list has no items": {
			body: `{"metadata":{"resourceVersion":"9"},"items":[]}`, version: "9",
		},
		"null items are no items": {
			body: `{"metadata":{"resourceVersion":"9"},"items":null}`, version: "9",
		},
		"a body cut off in an item is an error naming the item": {
			body: `{"metadata":{},"items":[{"metadata":{"name":"acme-fe1"}},{"metadata":{"na`, errorHas: "item 1 of the list",
		},
		"a body cut off after the items is an error": {
			body: `{"metadata":{},"items":[]`, errorHas: "decoding the list",
		},
		"a body that is not an object is an error": {
			body: `[1,2]`, errorHas: `where "{" belongs`,
		},
		"items that are not an array are an error": {
			body: `{"items":{"a":1}}`, errorHas: "where the items belong",
		},
		"an item of the wrong shape is an error": {
			body: `{"items":[{"metadata":"acme-fe1"}]}`, errorHas: "item 0 of the list",
		},
	} {
		t.Run(name, func(t *testing.T) {
			meta := metav1.ListMeta{Continue: "left from before"}
			items := []v2alpha1.Frontend{{ObjectMeta: metav1.ObjectMeta{Name: "left from before"}}}
			err := decodeList(strings.NewReader(c.body), &meta, &items)
			if c.errorHas != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.errorHas)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, n := range items {
				names = append(names, n.Name)
			}
			assert.Equal(t, c.items, names)
			assert.Equal(t, c.version, meta.ResourceVersion)
			assert.Empty(t, meta.Continue, "nothing is kept from a list read before")
		})
	}
}
