package policy

import (
	"reflect"
	"strings"
	"testing"
)

// TestTemplateGrammar is the reference implementation's template grammar,
// case by case, with its outcomes: which text is literal, which is an
// expression, and what is an error.
func TestTemplateGrammar(t *testing.T) {
	lit := func(s string) segment { return segment{text: s} }
	ex := func(s string) segment { return segment{text: s, expr: true} }
	for _, tc := range []struct {
		name, in string
		want     []segment
		wantErr  string
	}{
		{"empty", "", []segment{lit("")}, ""},
		{"literal", "literal-text", []segment{lit("literal-text")}, ""},
		{"expression", "{{trigger.metadata.name}}", []segment{ex("trigger.metadata.name")}, ""},
		{"mixed", "project-{{trigger.metadata.namespace}}-{{user.name}}-claim",
			[]segment{lit("project-"), ex("trigger.metadata.namespace"), lit("-"), ex("user.name"), lit("-claim")}, ""},
		{"consecutive", "{{a}}{{b}}", []segment{ex("a"), ex("b")}, ""},
		{"empty expression", "{{}}", []segment{lit("")}, ""},
		{"whitespace-only expression", "{{   }}", []segment{lit("")}, ""},
		{"several empty expressions", "{{}}{{ }}", []segment{lit("")}, ""},
		{"empty expression between literals", "start{{}}end", []segment{lit("startend")}, ""},
		{"spaces trimmed", "{{  trigger.metadata.name  }}", []segment{ex("trigger.metadata.name")}, ""},
		{"quoted closing braces", `{{ "a}}b" }}`, []segment{ex(`"a}}b"`)}, ""},
		{"quoted single brace", `{{"value with } brace"}}`, []segment{ex(`"value with } brace"`)}, ""},
		{"quoted opening braces", `{{"{{literal}}"}}`, []segment{ex(`"{{literal}}"`)}, ""},
		{"escaped quote", `{{"say \"}}\" twice"}}`, []segment{ex(`"say \"}}\" twice"`)}, ""},
		{"single quotes", "{{trigger.metadata.labels['env']}}", []segment{ex("trigger.metadata.labels['env']")}, ""},
		{"single brace", "{not an expression}", []segment{lit("{not an expression}")}, ""},
		{"triple braces", "{{{x}}}", []segment{lit("{{{x}}}")}, ""},
		{"triple braces then expression", "{{{invalid}}}{{valid}}", []segment{lit("{{{invalid}}}"), ex("valid")}, ""},
		{"four braces", "{{{{", []segment{lit("{{{{")}, ""},
		{"five braces", "{{{{{", []segment{lit("{{{{{")}, ""},
		{"stray closing braces", "a}}b", []segment{lit("a}}b")}, ""},
		{"nested", "{{ {{x}} }}", []segment{ex("{{x"), lit(" }}")}, ""},
		{"unclosed", "{{incomplete", nil, `"{{" at offset 0 is not closed`},
		{"closed with one brace", "{{expr}", nil, `"{{" at offset 0 is not closed`},
		{"unclosed string", `{{"unclosed string}}`, nil, "is not closed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := splitTemplate(tc.in)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("splitTemplate(%q) = %v, %v; want an error containing %q", tc.in, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("splitTemplate(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			}
		})
	}
}

// TestTemplateResults: a segment must yield a string, judged when the policy
// is compiled where the type is known and when it renders otherwise; has
// tests a dotted path; requestInfo has the reference's fields.
func TestTemplateResults(t *testing.T) {
	c := newCompiler(Options{}, "Widget", false)
	vars := map[string]any{
		"trigger":     map[string]any{"metadata": map[string]any{"name": "w1"}, "spec": map[string]any{"replicas": int64(3), "tier": map[string]any{"name": "gold"}}},
		"user":        map[string]any{"name": "alice"},
		"requestInfo": map[string]any{"isResourceRequest": true, "path": "/apis/example.com/v1/widgets", "parts": []string{"widgets"}},
	}
	for _, tc := range []struct {
		name, in, want, compileErr, renderErr string
	}{
		{"string", "w-{{ trigger.metadata.name }}", "w-w1", "", ""},
		{"int literal refused when compiled", "{{ 1 }}", "", "returns int", ""},
		{"bool refused when compiled", "{{ true }}", "", "returns bool", ""},
		{"dynamic int refused when rendered", "{{ trigger.spec.replicas }}", "", "", "must return a string"},
		{"converted int", "r{{ string(trigger.spec.replicas) }}", "r3", "", ""},
		{"has a path", `{{ trigger.has("spec.tier.name") ? "yes" : "no" }}`, "yes", "", ""},
		{"has not a path", `{{ trigger.has("spec.size.name") ? "yes" : "no" }}`, "no", "", ""},
		{"has through a scalar", `{{ trigger.has("spec.replicas.x") ? "yes" : "no" }}`, "no", "", ""},
		{"requestInfo fields", `{{ requestInfo.isResourceRequest ? requestInfo.path + "/" + requestInfo.parts[0] : "" }}`, "/apis/example.com/v1/widgets/widgets", "", ""},
		{"user", "by-{{ user.name }}", "by-alice", "", ""},
		// No expression: the text as written, braces included (the
		// reference's contains-check finds none); with one, empty ones are
		// dropped and the literals around them kept.
		{"empty expression", "{{}}", "{{}}", "", ""},
		{"whitespace-only expression", "{{   }}", "{{   }}", "", ""},
		{"empty expression between literals", "a-{{ }}-b", "a-{{ }}-b", "", ""},
		{"several empty expressions", "{{}}{{}}", "{{}}{{}}", "", ""},
		{"empty and real expressions", "a-{{}}-{{ trigger.metadata.name }}", "a--w1", "", ""},
		{"empty expression first", "{{}}{{ trigger.metadata.name }}", "w1", "", ""},
		{"empty text", "", "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tp, err := c.template("metadata.annotations[x]", tc.in)
			if tc.compileErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.compileErr) {
					t.Fatalf("compiling %q: %v, want an error containing %q", tc.in, err, tc.compileErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("compiling %q: %v", tc.in, err)
			}
			got, err := tp.render(vars)
			if tc.renderErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.renderErr) {
					t.Fatalf("rendering %q = %q, %v; want an error containing %q", tc.in, got, err, tc.renderErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("rendering %q = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}
