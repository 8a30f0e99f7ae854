package plugininit

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/dynamic"
)

// plugin is how a plugin embeds what it needs.
type plugin struct {
	DynamicAndAuthorizer
}

type dynamicOnly struct {
	DynamicClient
}

func TestValidateInitialization(t *testing.T) {
	client := dynamic.New(nil) // never called
	allow := authorizer.AuthorizerFunc(func(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
		return authorizer.DecisionAllow, "", nil
	})
	cases := map[string]struct {
		plugin         admission.InitializationValidator
		dynamic        dynamic.Interface
		authorizer     authorizer.Authorizer
		wantErr        string
		wantClient     bool
		wantAuthorizer bool
	}{
		"dynamic only: given": {
			plugin:     &dynamicOnly{NewDynamicClient("Only")},
			dynamic:    client,
			wantClient: true,
		},
		"dynamic only: missing": {
			plugin:  &dynamicOnly{NewDynamicClient("Only")},
			wantErr: "Only needs a dynamic client",
		},
		"both: given": {
			plugin:         &plugin{NewDynamicAndAuthorizer("Both")},
			dynamic:        client,
			authorizer:     allow,
			wantClient:     true,
			wantAuthorizer: true,
		},
		"both: no authorizer": {
			plugin:     &plugin{NewDynamicAndAuthorizer("Both")},
			dynamic:    client,
			wantErr:    "Both needs a dynamic client and an authorizer",
			wantClient: true,
		},
		"both: no dynamic client": {
			plugin:         &plugin{NewDynamicAndAuthorizer("Both")},
			authorizer:     allow,
			wantErr:        "Both needs a dynamic client and an authorizer",
			wantAuthorizer: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			// As the server's plugin initializer does: only what a plugin wants.
			if w, ok := tc.plugin.(initializer.WantsDynamicClient); ok && tc.dynamic != nil {
				w.SetDynamicClient(tc.dynamic)
			}
			if w, ok := tc.plugin.(initializer.WantsAuthorizer); ok && tc.authorizer != nil {
				w.SetAuthorizer(tc.authorizer)
			}
			gotErr := ""
			if err := tc.plugin.ValidateInitialization(); err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("ValidateInitialization (-want +got):\n%s", diff)
			}
			var gotClient, gotAuthorizer bool
			switch p := tc.plugin.(type) {
			case *plugin:
				gotClient, gotAuthorizer = p.Client() == tc.dynamic && tc.dynamic != nil, p.Authorizer() != nil
			case *dynamicOnly:
				gotClient = p.Client() == tc.dynamic && tc.dynamic != nil
			}
			if gotClient != tc.wantClient || gotAuthorizer != tc.wantAuthorizer {
				t.Errorf("holds the client: %v, the authorizer: %v; want %v, %v", gotClient, gotAuthorizer, tc.wantClient, tc.wantAuthorizer)
			}
		})
	}
}

func TestDynamicOnlyDoesNotWantAnAuthorizer(t *testing.T) {
	if _, ok := any(&dynamicOnly{}).(initializer.WantsAuthorizer); ok {
		t.Error("a plugin that embeds DynamicClient asks for an authorizer it does not use")
	}
}
