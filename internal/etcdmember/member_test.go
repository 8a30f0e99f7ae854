package etcdmember

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestBadFlagsAreNamed: a bad setting is refused naming its flag and what
// to give instead.
func TestBadFlagsAreNamed(t *testing.T) {
	for _, tc := range []struct {
		edit func(*Options)
		want string
	}{
		{func(o *Options) { o.DataDir = "" }, "--data-dir is required"},
		{func(o *Options) { o.InitialClusterState = "joining" }, `--initial-cluster-state "joining": want new`},
		{func(o *Options) { o.ListenClientURLs = []string{"127.0.0.1:2379"} }, `--listen-client-urls "127.0.0.1:2379": want http:// or https://`},
	} {
		o := NewOptions()
		o.DataDir = t.TempDir()
		tc.edit(o)
		if _, err := o.Config(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want an error saying %q", err, tc.want)
		}
	}
}

// TestAMemberServes: one member started from its flags serves a write and
// stops when its context ends.
func TestAMemberServes(t *testing.T) {
	o := NewOptions()
	o.Name, o.DataDir, o.UnsafeNoFsync = "m0", t.TempDir(), true
	o.ListenClientURLs = []string{fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
	o.ListenPeerURLs = []string{fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
	o.LogLevel = "error"
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o) }()
	c, err := clientv3.New(clientv3.Config{Endpoints: o.ListenClientURLs, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	if _, err := c.Put(wctx, "k", "v"); err != nil {
		t.Fatalf("writing to the member: %v", err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the member did not stop within 30s of its context ending")
	}
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
