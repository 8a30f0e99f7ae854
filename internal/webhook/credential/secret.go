package credential

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/retry"
)

// saved is the token the Secret's kubeconfig holds; nil when it holds none
// that parses. A Secret that is missing or cannot be read is an error: the
// webhook cannot keep its credential, and says so at start.
func (c *Credential) saved(ctx context.Context) (*Token, error) {
	s, err := c.member.CoreV1().Secrets(c.opts.Secret.Namespace).Get(ctx, c.opts.Secret.Name, metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("--quota-kubeconfig-secret %s: there is no such Secret in this cluster; create it with the key %q holding --quota-kubeconfig's file (docs/clusters.md)", c.opts.Secret, SecretKey)
		}
		return nil, fmt.Errorf("--quota-kubeconfig-secret %s: reading it (the webhook needs get and update on it): %w", c.opts.Secret, err)
	}
	cfg, err := clientcmd.Load(s.Data[SecretKey])
	if err != nil {
		return nil, nil
	}
	auth, err := currentAuth(cfg)
	if err != nil {
		return nil, nil
	}
	tok, err := Parse(trimToken(auth.Token))
	if err != nil {
		return nil, nil
	}
	return &tok, nil
}

// save writes tok into the Secret's kubeconfig, unless the Secret already
// holds a token that expires later (another replica's).
func (c *Credential) save(ctx context.Context, tok Token) error {
	secrets := c.member.CoreV1().Secrets(c.opts.Secret.Namespace)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(ctx, c.opts.Secret.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cfg, err := clientcmd.Load(s.Data[SecretKey])
		if err != nil {
			return fmt.Errorf("its key %q is not a kubeconfig: %w", SecretKey, err)
		}
		auth, err := currentAuth(cfg)
		if err != nil {
			return err
		}
		if held, err := Parse(trimToken(auth.Token)); err == nil && held.Namespace == tok.Namespace && held.Name == tok.Name && !held.Expires.Before(tok.Expires) {
			return nil
		}
		auth.Token, auth.TokenFile = tok.Raw, ""
		data, err := clientcmd.Write(*cfg)
		if err != nil {
			return err
		}
		s.Data[SecretKey] = data
		_, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("saving the new token in Secret %s of this cluster: %w", c.opts.Secret, err)
	}
	return nil
}

// currentAuth is the user of the kubeconfig's current context.
func currentAuth(cfg *clientcmdapi.Config) (*clientcmdapi.AuthInfo, error) {
	ctx, ok := cfg.Contexts[cfg.CurrentContext]
	if !ok {
		return nil, errors.New("the kubeconfig has no current context")
	}
	auth, ok := cfg.AuthInfos[ctx.AuthInfo]
	if !ok {
		return nil, fmt.Errorf("the kubeconfig has no user %q", ctx.AuthInfo)
	}
	return auth, nil
}

func trimToken(s string) string { return strings.TrimSpace(s) }
