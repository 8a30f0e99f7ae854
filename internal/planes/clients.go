package planes

import (
	"strings"
	"sync"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// Clients make clients of planes from a client of the root: the same
// credentials, the plane's URL. Safe for concurrent use; clients are made
// once per plane and kept.
type Clients struct {
	root *rest.Config

	mu       sync.Mutex
	metadata map[string]metadata.Interface
	dynamic  map[string]*dynamic.DynamicClient
}

// NewClients makes clients of planes with root's credentials.
func NewClients(root *rest.Config) *Clients {
	return &Clients{root: rest.CopyConfig(root), metadata: map[string]metadata.Interface{}, dynamic: map[string]*dynamic.DynamicClient{}}
}

// Config is a client configuration of plane p.
func (c *Clients) Config(p Plane) *rest.Config {
	return ConfigFor(c.root, p)
}

// ConfigFor is root's configuration with plane p's URL.
func ConfigFor(root *rest.Config, p Plane) *rest.Config {
	cfg := rest.CopyConfig(root)
	cfg.Host = strings.TrimSuffix(cfg.Host, "/") + p.Path()
	return cfg
}

// Metadata is a metadata client of plane p.
func (c *Clients) Metadata(p Plane) (metadata.Interface, error) {
	k := p.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.metadata[k]; ok {
		return m, nil
	}
	m, err := metadata.NewForConfig(c.Config(p))
	if err != nil {
		return nil, err
	}
	c.metadata[k] = m
	return m, nil
}

// Dynamic is a dynamic client of plane p.
func (c *Clients) Dynamic(p Plane) (*dynamic.DynamicClient, error) {
	k := p.String()
	c.mu.Lock()
	defer c.mu.Unlock()
	if d, ok := c.dynamic[k]; ok {
		return d, nil
	}
	d, err := dynamic.NewForConfig(c.Config(p))
	if err != nil {
		return nil, err
	}
	c.dynamic[k] = d
	return d, nil
}
