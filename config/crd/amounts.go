package crd

import (
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// AmountPaths are the amount fields that accept a quantity where serve's
// admission converts it (package amounts), per kind: property names from
// the version's root, "[]" for a list's items.
var AmountPaths = map[string][][]string{
	"ResourceGrant":       {{"spec", "allowances", "[]", "buckets", "[]", "amount"}},
	"ResourceClaim":       {{"spec", "requests", "[]", "amount"}},
	"GrantCreationPolicy": {{"spec", "target", "resourceGrantTemplate", "spec", "allowances", "[]", "buckets", "[]", "amount"}},
}

// ForServe returns the CRDs serve installs: All, with the amounts of grants,
// claims and grant templates accepting a quantity ("16Gi") as well as an
// integer. Serve's admission converts a quantity to the integer in base
// units before the object is validated and stored, so what is stored, and
// what clients read, is always the integer. The CRDs printed for another
// cluster (All) keep integers only: there, nothing converts.
func ForServe() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	crds, err := All()
	if err != nil {
		return nil, err
	}
	for _, c := range crds {
		for _, path := range AmountPaths[c.Spec.Names.Kind] {
			for i := range c.Spec.Versions {
				v := &c.Spec.Versions[i]
				if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
					continue
				}
				if err := quantityAmount(v.Schema.OpenAPIV3Schema, path); err != nil {
					return nil, fmt.Errorf("CRD %s version %s: %w", c.Name, v.Name, err)
				}
			}
		}
	}
	return crds, nil
}

// quantityAmount turns the integer at path into an int-or-string.
func quantityAmount(s *apiextensionsv1.JSONSchemaProps, path []string) error {
	for i, p := range path {
		if p == "[]" {
			if s.Items == nil || s.Items.Schema == nil {
				return fmt.Errorf("%v: not a list", path[:i+1])
			}
			s = s.Items.Schema
			continue
		}
		next, ok := s.Properties[p]
		if !ok {
			return fmt.Errorf("%v: no such property", path[:i+1])
		}
		if i == len(path)-1 {
			if next.Type != "integer" {
				return fmt.Errorf("%v: type %q, want integer", path, next.Type)
			}
			next.Type, next.Format, next.Minimum, next.ExclusiveMinimum = "", "", nil, false
			next.XIntOrString = true
			next.Description += " Always stored and read as an integer in base units; written as that integer, or as a quantity (16Gi) that is a whole number of base units of a registration declaring baseUnitQuantity, which is converted."
			s.Properties[p] = next
			return nil
		}
		// Properties holds values: change the copy, then put it back.
		if err := quantityAmount(&next, path[i+1:]); err != nil {
			return err
		}
		s.Properties[p] = next
		return nil
	}
	return nil
}
