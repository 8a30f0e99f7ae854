package docs

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParse: the marker check fails on an unmarked command block and on a
// bare fence, naming the line, and reads each marker it accepts.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		doc    string
		blocks []Block
		errs   []string
	}{{
		name:   "an unmarked command block",
		doc:    "Text.\n\n```sh\nkubectl get pods\n```\n",
		blocks: []Block{{Line: 3, Lang: "sh", Body: "kubectl get pods\n"}},
		errs:   []string{"line 3: a ```sh block without a marker: put <!-- run --> or <!-- skip: <reason> --> on the line before it"},
	}, {
		name:   "a marker a blank line away is no marker",
		doc:    "<!-- run -->\n\n```console\n$ kubectl get pods\n```\n",
		blocks: []Block{{Line: 3, Lang: "console", Body: "$ kubectl get pods\n"}},
		errs: []string{"line 1: the marker is not on the line before a fence",
			"line 3: a ```console block without a marker: put <!-- run --> or <!-- skip: <reason> --> on the line before it"},
	}, {
		name:   "a bare fence",
		doc:    "```\nquotaplane serve\n```\n",
		blocks: []Block{{Line: 1, Body: "quotaplane serve\n"}},
		errs:   []string{"line 1: a fence without an info string: say what it holds (sh or console for commands, with a marker; text, yaml, …)"},
	}, {
		name: "every marker",
		doc: "<!-- run: background, ready: is serving at -->\n```sh\nquotaplane serve\n```\n" +
			"<!-- run -->\n```bash\nkubectl get ns\n```\n" +
			"<!--skip: Helm-->\n```shell\nhelm install x\n```\n" +
			"```yaml\nkind: Namespace\n```\n" +
			"1. Indented:\n   <!-- run -->\n   ```sh\n   echo a\n     echo b\n   ```\n",
		blocks: []Block{
			{Line: 2, Lang: "sh", Body: "quotaplane serve\n", Mode: Background, Ready: "is serving at"},
			{Line: 6, Lang: "bash", Body: "kubectl get ns\n", Mode: Run},
			{Line: 10, Lang: "shell", Body: "helm install x\n", Mode: Skip, Reason: "Helm"},
			{Line: 13, Lang: "yaml", Body: "kind: Namespace\n"},
			{Line: 18, Lang: "sh", Body: "echo a\n  echo b\n", Mode: Run},
		},
	}, {
		name:   "a skip without a reason",
		doc:    "<!-- skip -->\n```sh\nhelm install x\n```\n",
		blocks: []Block{{Line: 2, Lang: "sh", Body: "helm install x\n"}},
		errs:   []string{"line 1: marker <!-- skip -->: want <!-- skip: <why this block does not run> -->"},
	}, {
		name:   "a background block without its ready text",
		doc:    "<!-- run: background -->\n```sh\nquotaplane serve\n```\n",
		blocks: []Block{{Line: 2, Lang: "sh", Body: "quotaplane serve\n"}},
		errs:   []string{"line 1: marker <!-- run: background -->: want <!-- run --> or <!-- run: background, ready: <text its output holds once ready> -->"},
	}, {
		name:   "a marker on a block that does not run",
		doc:    "<!-- run -->\n```yaml\nkind: Namespace\n```\n",
		blocks: []Block{{Line: 2, Lang: "yaml", Body: "kind: Namespace\n", Mode: Run}},
		errs:   []string{"line 1: a marker before a ```yaml block, which does not run: only sh, bash, shell and console blocks take one"},
	}, {
		name:   "an unclosed fence",
		doc:    "<!-- run -->\n```sh\nkubectl get ns\n",
		blocks: nil,
		errs:   []string{"line 2: the fence is never closed"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			blocks, errs := Parse(tc.doc)
			if diff := cmp.Diff(tc.blocks, blocks); diff != "" {
				t.Errorf("blocks (-want +got):\n%s", diff)
			}
			var got []string
			for _, e := range errs {
				got = append(got, e.Error())
			}
			if diff := cmp.Diff(tc.errs, got); diff != "" {
				t.Errorf("errors (-want +got):\n%s", diff)
			}
		})
	}
}

// TestConsoleScript: a console block runs its "$ " lines, not the output
// shown under them.
func TestConsoleScript(t *testing.T) {
	b := Block{Lang: "console", Body: "$ kubectl get ns\nNAME STATUS\ndefault Active\n$ kubectl get pods\n"}
	if got, want := b.Script(), "kubectl get ns\nkubectl get pods\n"; got != want {
		t.Errorf("Script() = %q, want %q", got, want)
	}
	if s := (Block{Lang: "sh", Body: "echo $ x\n"}).Script(); s != "echo $ x\n" {
		t.Errorf("an sh block's script: %q", s)
	}
}

// TestListenPorts: the ports checked free before a background block starts.
func TestListenPorts(t *testing.T) {
	for _, tc := range []struct {
		body string
		want []string
	}{
		{"quotaplane serve\n", []string{"6443"}},
		{"quotaplane serve --data-dir r1 --secure-port 16443 --peer-port=16444 2>&1 | tee r1.log\n", []string{"16443", "16444"}},
		{"quotaplane etcd --name e1 \\\n  --listen-client-urls https://127.0.0.1:12379,https://127.0.0.1:12479 --advertise-client-urls https://127.0.0.1:12379 \\\n  --listen-peer-urls=https://127.0.0.1:12380\n",
			[]string{"12379", "12479", "12380"}},
		{"quotaplane webhook --kubeconfig east/admin.kubeconfig --cluster-name east \\\n  --bind-address 127.0.0.1 --secure-port 26443 --cert-dir webhook-certs\n", []string{"26443"}},
		{"owning-service --kubeconfig x\n", nil},
	} {
		if diff := cmp.Diff(tc.want, listenPorts(tc.body)); diff != "" {
			t.Errorf("listenPorts(%q): (-want +got)\n%s", tc.body, diff)
		}
	}
}
