package main

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// kindResolver reads kinds as kubectl does, from the server's discovery.
type kindResolver struct {
	mapper meta.RESTMapper
}

func newKindResolver(d discovery.DiscoveryInterface) *kindResolver {
	cached := memory.NewMemCacheClient(d)
	return &kindResolver{mapper: restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(cached), cached, nil)}
}

// resolve returns the Kind that arg names: a Kind (Secret), a resource
// (secrets, secret), a short name, or any of them with a group
// (machines.compute.example.com). A Kind the server does not serve (any
// more) is taken as written, since the history may still name it.
func (k *kindResolver) resolve(arg string) (string, error) {
	gvr, gr := schema.ParseResourceArg(strings.ToLower(arg))
	candidates := []schema.GroupVersionResource{gr.WithVersion("")}
	if gvr != nil {
		candidates = append([]schema.GroupVersionResource{*gvr}, candidates...)
	}
	for _, c := range candidates {
		if gvk, err := k.mapper.KindFor(c); err == nil {
			return gvk.Kind, nil
		}
	}
	if first := arg[0]; first >= 'A' && first <= 'Z' && !strings.Contains(arg, ".") {
		return arg, nil
	}
	return "", fmt.Errorf("the server serves no kind or resource named %q (kubectl api-resources lists them)", arg)
}
