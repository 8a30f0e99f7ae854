package planeserve

import (
	"context"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/types"

	"github.com/quotaplane/quotaplane/internal/planes"
)

// PlanesWithData calls f with each plane holding a key in etcd (under
// prefix, the API server's --etcd-prefix), one keys-only read of one key
// per plane, until f returns false. A plane never used holds no key.
func PlanesWithData(ctx context.Context, etcd *clientv3.Client, prefix string, f func(planes.Kind, types.UID) bool) error {
	for _, kind := range []planes.Kind{planes.Projects, planes.Organizations} {
		root := strings.TrimSuffix(prefix, "/") + planes.KeyRoot + string(kind) + "/"
		key := root
		for {
			res, err := etcd.Get(ctx, key, clientv3.WithRange(clientv3.GetPrefixRangeEnd(root)), clientv3.WithKeysOnly(), clientv3.WithLimit(1))
			if err != nil {
				return fmt.Errorf("listing the control planes that hold data: %w", err)
			}
			if len(res.Kvs) == 0 {
				break
			}
			uid, _, _ := strings.Cut(strings.TrimPrefix(string(res.Kvs[0].Key), root), "/")
			if !f(kind, types.UID(uid)) {
				return nil
			}
			// The next plane: the first key after this UID's prefix.
			key = clientv3.GetPrefixRangeEnd(root + uid + "/")
		}
	}
	return nil
}
