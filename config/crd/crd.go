package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var bases embed.FS

// All returns the quota CRDs, sorted by name.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(files))
	for _, f := range files {
		data, err := bases.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", f, err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// YAML returns the CRDs as one multi-document YAML stream, ready for
// kubectl apply -f -.
func YAML() ([]byte, error) {
	files, err := fs.Glob(bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []byte
	for _, f := range files {
		data, err := bases.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, data...)
	}
	return out, nil
}

// StorageVersion is the version in which the API server stores objects of
// the quota kind, as its CRD declares: anything that writes those objects
// to storage itself (admission's journal) encodes them in this version, so
// that the two never disagree.
func StorageVersion(kind string) (string, error) {
	crds, err := All()
	if err != nil {
		return "", err
	}
	for _, c := range crds {
		if c.Spec.Names.Kind != kind {
			continue
		}
		for _, v := range c.Spec.Versions {
			if v.Storage {
				return c.Spec.Group + "/" + v.Name, nil
			}
		}
		return "", fmt.Errorf("CRD %s has no storage version", c.Name)
	}
	return "", fmt.Errorf("no quota CRD has kind %s", kind)
}

// NeverStored is the file controller-gen writes for QuotaReview, a kind
// answered by serve and never stored: no cluster gets its CRD, and
// hack/update-generated.sh moves it from bases/ to review/, where serve
// reads the kind's schema (Review).
const NeverStored = "quota.miloapis.com_quotareviews.yaml"

//go:embed review/quota.miloapis.com_quotareviews.yaml
var review embed.FS

// Review is QuotaReview's definition: its schema, never installed.
func Review() (*apiextensionsv1.CustomResourceDefinition, error) {
	data, err := review.ReadFile("review/" + NeverStored)
	if err != nil {
		return nil, err
	}
	c := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, c); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", NeverStored, err)
	}
	return c, nil
}
