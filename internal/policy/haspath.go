package policy

import (
	"strings"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/google/cel-go/common/types/traits"
)

// hasPathFunction is the reference implementation's member function
// <object>.has("a.b.c"): whether the object has the field at that dotted
// path, every step but the last being a map. trigger.has("spec.tier") is
// has(trigger.spec.tier) that does not fail when spec is missing.
var hasPathFunction = cel.Function("has",
	cel.MemberOverload("quotaplane_has_path", []*cel.Type{cel.DynType, cel.StringType}, cel.BoolType,
		cel.BinaryBinding(hasPath)))

func hasPath(obj, path ref.Val) ref.Val {
	p, ok := path.(types.String)
	if !ok {
		return types.MaybeNoSuchOverloadErr(path)
	}
	cur := obj
	for _, part := range strings.Split(string(p), ".") {
		m, ok := cur.(traits.Mapper)
		if !ok {
			return types.False
		}
		v, found := m.Find(types.String(part))
		if !found {
			return types.False
		}
		cur = v
	}
	return types.True
}
