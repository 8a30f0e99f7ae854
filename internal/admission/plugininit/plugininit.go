package plugininit

import (
	"fmt"

	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/dynamic"
)

// DynamicClient, embedded in a plugin, receives the server's dynamic client.
type DynamicClient struct {
	plugin string
	client dynamic.Interface
}

// DynamicAndAuthorizer, embedded in a plugin, receives the server's dynamic
// client and its authorizer.
type DynamicAndAuthorizer struct {
	DynamicClient
	authorizer authorizer.Authorizer
}

var (
	_ initializer.WantsDynamicClient    = &DynamicClient{}
	_ admission.InitializationValidator = &DynamicClient{}
	_ initializer.WantsDynamicClient    = &DynamicAndAuthorizer{}
	_ initializer.WantsAuthorizer       = &DynamicAndAuthorizer{}
	_ admission.InitializationValidator = &DynamicAndAuthorizer{}
)

// NewDynamicClient is what the plugin named plugin needs: a dynamic client.
func NewDynamicClient(plugin string) DynamicClient {
	return DynamicClient{plugin: plugin}
}

// NewDynamicAndAuthorizer is what the plugin named plugin needs: a dynamic
// client and an authorizer.
func NewDynamicAndAuthorizer(plugin string) DynamicAndAuthorizer {
	return DynamicAndAuthorizer{DynamicClient: NewDynamicClient(plugin)}
}

// SetDynamicClient implements initializer.WantsDynamicClient.
func (d *DynamicClient) SetDynamicClient(c dynamic.Interface) { d.client = c }

// Client is the dynamic client the plugin was given.
func (d *DynamicClient) Client() dynamic.Interface { return d.client }

// ValidateInitialization implements admission.InitializationValidator.
func (d *DynamicClient) ValidateInitialization() error {
	if d.client == nil {
		return fmt.Errorf("%s needs a dynamic client", d.plugin)
	}
	return nil
}

// SetAuthorizer implements initializer.WantsAuthorizer.
func (d *DynamicAndAuthorizer) SetAuthorizer(a authorizer.Authorizer) { d.authorizer = a }

// Authorizer is the authorizer the plugin was given.
func (d *DynamicAndAuthorizer) Authorizer() authorizer.Authorizer { return d.authorizer }

// ValidateInitialization implements admission.InitializationValidator.
func (d *DynamicAndAuthorizer) ValidateInitialization() error {
	if d.client == nil || d.authorizer == nil {
		return fmt.Errorf("%s needs a dynamic client and an authorizer", d.plugin)
	}
	return nil
}
