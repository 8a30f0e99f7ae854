package whatif

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
)

// Exit statuses.
const (
	// ExitFits: every object would be admitted.
	ExitFits = 0
	// ExitRefused: at least one object would be refused.
	ExitRefused = 1
	// ExitError: the review could not be made (bad input, no server).
	ExitError = 2
)

// Source is where an object was read: a file (or "-") and its place in it.
type Source struct {
	File     string
	Document int
}

func (s Source) String() string { return fmt.Sprintf("%s#%d", s.File, s.Document) }

// Read reads the objects of paths, in order: a file's documents in order,
// a directory's files (.yaml, .yml, .json, recursively) in lexical order, as
// kubectl apply -f reads them; "-" is stdin. Lists are expanded.
func Read(paths []string, stdin io.Reader) ([]*unstructured.Unstructured, []Source, error) {
	var objs []*unstructured.Unstructured
	var srcs []Source
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			return nil, nil, err
		}
		for _, f := range files {
			var r io.Reader
			if f == "-" {
				r = stdin
			} else {
				data, err := os.ReadFile(f)
				if err != nil {
					return nil, nil, err
				}
				r = bytes.NewReader(data)
			}
			o, s, err := decode(f, r)
			if err != nil {
				return nil, nil, err
			}
			objs, srcs = append(objs, o...), append(srcs, s...)
		}
	}
	if len(objs) == 0 {
		return nil, nil, errors.New("no objects found in " + strings.Join(paths, ", "))
	}
	return objs, srcs, nil
}

func expand(p string) ([]string, error) {
	if p == "-" {
		return []string{"-"}, nil
	}
	info, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{p}, nil
	}
	var out []string
	err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		switch strings.ToLower(filepath.Ext(path)) {
		case ".yaml", ".yml", ".json":
			if !d.IsDir() {
				out = append(out, path)
			}
		}
		return nil
	})
	sort.Strings(out)
	return out, err
}

func decode(file string, r io.Reader) ([]*unstructured.Unstructured, []Source, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReader(r), 4096)
	var objs []*unstructured.Unstructured
	var srcs []Source
	for doc := 1; ; doc++ {
		m := map[string]any{}
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, srcs, nil
			}
			return nil, nil, fmt.Errorf("%s, document %d: %w", file, doc, err)
		}
		if len(m) == 0 {
			continue // an empty document
		}
		u := &unstructured.Unstructured{Object: m}
		if u.IsList() {
			l, err := u.ToList()
			if err != nil {
				return nil, nil, fmt.Errorf("%s, document %d: %w", file, doc, err)
			}
			for i := range l.Items {
				objs, srcs = append(objs, &l.Items[i]), append(srcs, Source{File: file, Document: doc})
			}
			continue
		}
		objs, srcs = append(objs, u), append(srcs, Source{File: file, Document: doc})
	}
}

// Options are a review's other settings.
type Options struct {
	// Namespace is the namespace of objects that name none.
	Namespace string
	// User and Groups review as another user (spec.user).
	User   string
	Groups []string
}

// Review asks the server.
func Review(ctx context.Context, c versioned.Interface, objs []*unstructured.Unstructured, o Options) (*quotav1alpha1.QuotaReview, error) {
	if n := len(objs); n > quotav1alpha1.MaxReviewObjects {
		return nil, fmt.Errorf("%d objects: a review holds at most %d; review them in parts (each part then does not see the others)", n, quotav1alpha1.MaxReviewObjects)
	}
	r := &quotav1alpha1.QuotaReview{Spec: quotav1alpha1.QuotaReviewSpec{Namespace: o.Namespace, User: o.User, Groups: o.Groups}}
	for _, u := range objs {
		raw, err := u.MarshalJSON()
		if err != nil {
			return nil, err
		}
		r.Spec.Objects = append(r.Spec.Objects, runtime.RawExtension{Raw: raw})
	}
	got, err := c.QuotaV1alpha1().QuotaReviews().Create(ctx, r, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("reviewing %d objects: %w", len(objs), err)
	}
	return got, nil
}

// ExitCode is the exit status of an answered review.
func ExitCode(r *quotav1alpha1.QuotaReview) int {
	if r.Status.Fits {
		return ExitFits
	}
	return ExitRefused
}

// PrintJSON writes the review's status.
func PrintJSON(w io.Writer, r *quotav1alpha1.QuotaReview) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r.Status)
}

// PrintTable writes, for people, each object's answer, then each level's
// numbers, then the verdict; amounts are written as refusals write them
// (Units).
func PrintTable(w io.Writer, r *quotav1alpha1.QuotaReview, srcs []Source, units Units) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tSOURCE\tKIND\tNAMESPACE\tNAME\tOP\tRESULT\tCHARGES\tREASON")
	for _, o := range r.Status.Objects {
		src := ""
		if int(o.Index) < len(srcs) {
			src = srcs[o.Index].String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", o.Index, src, o.Kind, dash(o.Namespace), o.Name, o.Operation, o.Result, charges(o.Charges, units), dash(o.Reason))
	}
	if len(r.Status.Buckets) > 0 {
		fmt.Fprintln(tw, "")
		fmt.Fprintln(tw, "CONSUMER\tRESOURCE TYPE\tLIMIT\tALLOCATED\tTAKE\tAFTER\tREFUSED")
		for _, b := range r.Status.Buckets {
			rt := b.ResourceType
			limit := units.Amount(rt, b.Limit)
			if b.Unlimited {
				limit = "none"
			}
			refused := "-"
			if b.Refused != 0 {
				refused = units.Amount(rt, b.Refused)
			}
			fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\t%s\t%s\n", b.ConsumerRef.Kind, b.ConsumerRef.Name, rt, limit,
				units.Amount(rt, b.Allocated), units.Change(rt, b.Take), units.Amount(rt, b.AllocatedAfter), refused)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, o := range r.Status.Objects {
		if o.Result == quotav1alpha1.ReviewRefused {
			fmt.Fprintf(w, "objects[%d] %s %s: %s\n", o.Index, o.Kind, o.Name, o.Message)
		}
	}
	for _, n := range r.Status.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if r.Status.Fits {
		fmt.Fprintf(w, "FITS: %s\n", r.Status.Message)
	} else {
		fmt.Fprintf(w, "DOES NOT FIT: %d of %d objects would be refused\n", r.Status.Refused, len(r.Status.Objects))
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// charges writes what an object would be charged: "600 millicores of
// core/requests.cpu for Namespace/team-a", and for an update what it holds
// first: "2 cores → 5 cores of …".
func charges(cs []quotav1alpha1.QuotaReviewCharge, units Units) string {
	if len(cs) == 0 {
		return "-"
	}
	var parts []string
	for _, c := range cs {
		amount := units.Amount(c.ResourceType, c.Amount)
		if c.Held != 0 {
			amount = units.Amount(c.ResourceType, c.Held) + " → " + amount
		}
		parts = append(parts, fmt.Sprintf("%s of %s for %s/%s", amount, c.ResourceType, c.ConsumerRef.Kind, c.ConsumerRef.Name))
	}
	return strings.Join(parts, ", ")
}
