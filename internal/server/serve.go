package server

import (
	"context"
	"io"

	utilerrors "k8s.io/apimachinery/pkg/util/errors"
)

// Serve runs the whole chain — Complete, Validate, NewConfig, Complete, New,
// Run — until ctx is done. banner receives one line once the server is ready.
func Serve(ctx context.Context, o *Options, components []Component, banner io.Writer) error {
	completed, err := o.Complete()
	if err != nil {
		return err
	}
	if errs := completed.Validate(); len(errs) > 0 {
		return utilerrors.NewAggregate(errs)
	}
	cfg, err := NewConfig(ctx, completed)
	if err != nil {
		return err
	}
	cfg.Components = components
	s, err := cfg.Complete().New(ctx)
	if err != nil {
		return err
	}
	return s.Run(ctx, banner)
}
