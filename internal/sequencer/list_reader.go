package sequencer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsjson "sigs.k8s.io/json"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// FleetReader reads as r does, except that Backends and Frontends are
// listed by decoding each item as its bytes arrive. kube-apiserver serves a
// custom resource only as JSON, encoding a list item by item, and a list of
// every tenant's Frontends is tens of megabytes: decoded as it streams, the
// decoding runs while kube-apiserver is still encoding the rest, instead
// of after the whole body has arrived, and the body's kind is not found by
// a decode of its own first. Each list is still one consistent LIST, as
// r's would be. The fleet view reads with it.
func FleetReader(cfg *rest.Config, r client.Reader) (client.Reader, error) {
	return newListReader(cfg, r, true)
}

// FreshReader reads as r does, except that Backends and Frontends are
// listed with one decode of the response. r (controller-runtime's client)
// parses a list twice: once for its kind, then into the list; a list of a
// tenant's nodes is small, so decoding it as it streams would gain nothing,
// but the first parse is a third of what the sequencer's and the webhooks'
// fresh reads cost in decoding. Each list is the same consistent LIST.
func FreshReader(cfg *rest.Config, r client.Reader) (client.Reader, error) {
	return newListReader(cfg, r, false)
}

func newListReader(cfg *rest.Config, r client.Reader, streamed bool) (client.Reader, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath = "/apis"
	c.GroupVersion = &v2alpha1.GroupVersion
	// Errors come as a metav1.Status, which client-go's codecs decode.
	c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	c.ContentType, c.AcceptContentTypes = runtime.ContentTypeJSON, runtime.ContentTypeJSON
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("a REST client for %s: %w", v2alpha1.GroupVersion, err)
	}
	return &listReader{Reader: r, rest: rc, streamed: streamed}, nil
}

// listReader lists Backends and Frontends with a REST client of its own
// and leaves every other read to the reader it wraps.
type listReader struct {
	client.Reader
	rest rest.Interface
	// streamed decodes items as they arrive; without, the whole response
	// is read, then decoded once.
	streamed bool
}

// List lists Backends and Frontends itself and leaves other kinds to the
// reader it wraps.
func (f *listReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch l := list.(type) {
	case *v2alpha1.BackendList:
		return f.list(ctx, v2alpha1.KindBackend, opts, func(body io.Reader) error {
			return decodeList(body, v2alpha1.KindBackend+"List", &l.ListMeta, &l.Items)
		}, func(body []byte) error {
			return decodeWhole(body, v2alpha1.KindBackend+"List", l, &l.TypeMeta)
		})
	case *v2alpha1.FrontendList:
		return f.list(ctx, v2alpha1.KindFrontend, opts, func(body io.Reader) error {
			return decodeList(body, v2alpha1.KindFrontend+"List", &l.ListMeta, &l.Items)
		}, func(body []byte) error {
			return decodeWhole(body, v2alpha1.KindFrontend+"List", l, &l.TypeMeta)
		})
	}
	return f.Reader.List(ctx, list, opts...)
}

// readAttempts bounds how often a list whose connection broke is read
// again, readAgainAfter apart, as client-go's own requests are retried.
const readAttempts = 5

var readAgainAfter = time.Second // a variable for the tests

// list lists kind with opts, one consistent LIST, and decodes the response:
// as its body streams in (streamed) or once it has all arrived (whole). A
// connection that breaks — before the response or in the middle of its
// body: kube-apiserver restarting, a load balancer dropping it — is tried
// again after a second, reading the whole list again.
func (f *listReader) list(ctx context.Context, kind string, opts []client.ListOption, streamed func(io.Reader) error, whole func([]byte) error) error {
	o := (&client.ListOptions{}).ApplyOptions(opts)
	resource, _ := meta.UnsafeGuessKindToResource(v2alpha1.GroupVersion.WithKind(kind))
	request := func() *rest.Request {
		// No retries of client-go's own: readAttempts is the one bound.
		return f.rest.Get().NamespaceIfScoped(o.Namespace, o.Namespace != "").Resource(resource.Resource).
			VersionedParams(o.AsListOptions(), metav1.ParameterCodec).MaxRetries(0)
	}
	return retried(ctx, func() error {
		if f.streamed {
			body, err := request().Stream(ctx)
			if err != nil {
				return err
			}
			defer body.Close()
			return streamed(body)
		}
		res := request().Do(ctx)
		if err := res.Error(); err != nil {
			return err // the API server's Status, when it answered with one
		}
		body, _ := res.Raw()
		return whole(body)
	})
}

// retried calls read until it succeeds, fails with something other than a
// broken connection, or has been tried readAttempts times.
func retried(ctx context.Context, read func() error) error {
	for attempt := 1; ; attempt++ {
		err := read()
		var answer apierrors.APIStatus
		if err == nil || errors.As(err, &answer) || !brokenConnection(err) || attempt == readAttempts {
			return err // done, or the API server's answer, whatever its message says
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w, and no time is left to read again: %w", err, ctx.Err())
		case <-time.After(readAgainAfter):
		}
	}
}

// decodeWhole decodes a list of kind into list in one pass, its field
// names matched exactly as client-go matches them, and leaves the list's
// own kind and apiVersion (typeMeta, list's own) empty, as client-go does
// for a typed list.
func decodeWhole[L any](body []byte, kind string, list *L, typeMeta *metav1.TypeMeta) error {
	var empty L
	*list = empty // a list read into before holds only what this read finds
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, list); err != nil {
		return fmt.Errorf("decoding the list: %w", err)
	}
	if typeMeta.Kind == "Status" {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(body, &fields); err == nil {
			if err := failureIn(fields); err != nil {
				return err
			}
		}
	}
	if typeMeta.Kind != kind {
		return fmt.Errorf("decoding the list: the response is a %q, not a %s", typeMeta.Kind, kind)
	}
	*typeMeta = metav1.TypeMeta{}
	return nil
}

// failureIn returns the API server's error when fields, a response's
// top-level fields, are a Status of a failure answered with success: the
// error it says, as client-go reports it.
func failureIn(fields map[string]json.RawMessage) error {
	data, err := json.Marshal(fields)
	if err != nil {
		return nil
	}
	var status metav1.Status
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &status); err != nil || status.Status != metav1.StatusFailure {
		return nil
	}
	return &apierrors.StatusError{ErrStatus: status}
}

// brokenConnection reports whether err is a connection that broke, not an
// answer: what client-go tries again.
func brokenConnection(err error) bool {
	return utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) || utilnet.IsHTTP2ConnectionLost(err) ||
		errors.Is(err, io.ErrUnexpectedEOF)
}

// decodeList decodes a list of kind as it streams: its metadata, and each
// item appended as soon as it has arrived. Each item is decoded as
// client-go decodes objects, its field names matched exactly
// (sigs.k8s.io/json).
func decodeList[T any](r io.Reader, kind string, listMeta *metav1.ListMeta, items *[]T) error {
	*listMeta, *items = metav1.ListMeta{}, nil // a list read into before holds only what this read finds
	dec := json.NewDecoder(r)
	if err := expect(dec, json.Delim('{')); err != nil {
		return err
	}
	var found string
	rest := map[string]json.RawMessage{} // what a Status answers with, if it is one
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("decoding the list: %w", err)
		}
		switch tok {
		case "kind":
			if err := dec.Decode(&found); err != nil {
				return fmt.Errorf("decoding the list's kind: %w", err)
			}
		case "metadata":
			if err := decodeValue(dec, listMeta); err != nil {
				return fmt.Errorf("decoding the list's metadata: %w", err)
			}
		case "items":
			if err := decodeItems(dec, items); err != nil {
				return err
			}
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("decoding the list's %v: %w", tok, err)
			}
			rest[fmt.Sprint(tok)] = skip
		}
	}
	if err := expect(dec, json.Delim('}')); err != nil {
		return err
	}
	if found == "Status" {
		if err := failureIn(rest); err != nil {
			return err
		}
	}
	if found != kind {
		return fmt.Errorf("decoding the list: the response is a %q, not a %s", found, kind)
	}
	return nil
}

// decodeValue decodes the next value into v with exact field names.
func decodeValue(dec *json.Decoder, v any) error {
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return err
	}
	return sigsjson.UnmarshalCaseSensitivePreserveInts(raw, v)
}

func decodeItems[T any](dec *json.Decoder, items *[]T) error {
	tok, err := dec.Token()
	switch {
	case err != nil:
		return fmt.Errorf("decoding the list's items: %w", err)
	case tok == nil: // "items": null
		return nil
	case tok != json.Delim('['):
		return fmt.Errorf("decoding the list: found %v where the items belong", tok)
	}
	for dec.More() {
		var item T
		if err := decodeValue(dec, &item); err != nil {
			return fmt.Errorf("decoding item %d of the list: %w", len(*items), err)
		}
		*items = append(*items, item)
	}
	return expect(dec, json.Delim(']'))
}

func expect(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("decoding the list: it ends before %q", want)
		}
		return fmt.Errorf("decoding the list: %w", err)
	}
	if tok != want {
		return fmt.Errorf("decoding the list: found %v where %q belongs", strings.TrimSpace(fmt.Sprint(tok)), want)
	}
	return nil
}
