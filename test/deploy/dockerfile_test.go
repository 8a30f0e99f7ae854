package deploy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/quotaplane/quotaplane/test/deploy"
)

// instruction is one Dockerfile instruction, continuations joined.
type instruction struct {
	line int
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// stage is a FROM and the instructions after it.
type stage struct {
	base, name string
	body       []instruction
}

// parseDockerfile reads the instructions of a Dockerfile: comments and
// blank lines dropped, lines ending in a backslash joined with the next.
// It knows no more of the syntax than the invariants below need.
func parseDockerfile(t *testing.T, text string) (args map[string]string, stages []stage) {
	t.Helper()
	args = map[string]string{}
	var insts []instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, rest, _ := strings.Cut(cur.String(), " ")
		insts = append(insts, instruction{line: start, cmd: strings.ToUpper(cmd), args: strings.TrimSpace(rest)})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("the Dockerfile ends in a continued line (%d)", start)
	}
	for _, in := range insts {
		switch {
		case in.cmd == "FROM":
			fields := strings.Fields(in.args)
			var s stage
			for i := 0; i < len(fields); i++ {
				switch {
				case strings.HasPrefix(fields[i], "--"):
				case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
					s.name = fields[i+1]
					i++
				default:
					s.base = fields[i]
				}
			}
			stages = append(stages, s)
		case len(stages) == 0 && in.cmd == "ARG":
			name, value, _ := strings.Cut(in.args, "=")
			args[name] = strings.Trim(value, `"`)
		case len(stages) == 0:
			t.Errorf("line %d: %s before the first FROM", in.line, in.cmd)
		default:
			stages[len(stages)-1].body = append(stages[len(stages)-1].body, in)
		}
	}
	return args, stages
}

// TestDockerfile checks deploy/Dockerfile's invariants: a Go build stage on
// the module's Go version making a static, trimmed binary of
// ./cmd/quotaplane, and a final stage from scratch or distroless static,
// running it as a non-root user.
func TestDockerfile(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(deploy.Root, "deploy", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	args, stages := parseDockerfile(t, string(data))
	if len(stages) < 2 {
		t.Fatalf("%d stages; want a build stage and a final one", len(stages))
	}
	expand := func(s string) string {
		return os.Expand(s, func(k string) string { return args[k] })
	}

	build, final := stages[0], stages[len(stages)-1]
	if !strings.HasPrefix(expand(build.base), "golang:") {
		t.Errorf("the build stage is FROM %s; want the golang image", build.base)
	}
	mod, err := os.ReadFile(filepath.Join(deploy.Root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(string(mod))
	if goVersion == nil || !strings.HasPrefix(expand(build.base), "golang:"+goVersion[1]) {
		t.Errorf("the build stage is FROM %s; go.mod asks for Go %v", expand(build.base), goVersion)
	}
	var goBuild string
	for _, in := range build.body {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			goBuild = in.args
		}
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-ldflags", "./cmd/quotaplane"} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("the build stage's go build (%q) lacks %s", goBuild, want)
		}
	}

	base := expand(final.base)
	if base != "scratch" && !strings.HasPrefix(base, "gcr.io/distroless/static") {
		t.Errorf("the final stage is FROM %s; want scratch or gcr.io/distroless/static", base)
	}
	var user, entrypoint string
	copied := false
	for _, in := range final.body {
		switch in.cmd {
		case "USER":
			user = in.args
		case "ENTRYPOINT":
			entrypoint = in.args
		case "COPY":
			copied = copied || strings.Contains(in.args, "--from="+build.name)
		case "RUN":
			t.Errorf("line %d: RUN in the final stage (nothing runs there but the binary)", in.line)
		}
	}
	if uid, _, _ := strings.Cut(user, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("the final stage runs as %q; want a non-root user (65532)", user)
	} else if user != "65532:65532" {
		t.Errorf("the final stage runs as %q; the chart's pods run as 65532:65532", user)
	}
	if !copied {
		t.Errorf("the final stage copies nothing from the build stage %q", build.name)
	}
	var exec []string
	if err := json.Unmarshal([]byte(entrypoint), &exec); err != nil || len(exec) == 0 || !strings.HasSuffix(exec[0], "/quotaplane") {
		t.Errorf("ENTRYPOINT %s; want the exec form running the binary", entrypoint)
	}
}
