package docs

import (
	"fmt"
	"regexp"
	"strings"
)

// Mode says what the test does with a block.
type Mode string

const (
	// Unmarked is a block with no marker: an error for a command block.
	Unmarked Mode = ""
	// Run runs the block and waits for it to end.
	Run Mode = "run"
	// Background starts the block and goes on once its output holds the
	// marker's ready text; it is stopped when its document ends.
	Background Mode = "background"
	// Skip does not run the block.
	Skip Mode = "skip"
)

// commandLanguages are the info strings of blocks a reader runs.
var commandLanguages = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}

// Block is one fenced block of a document.
type Block struct {
	// Line is the line of its opening fence, from 1.
	Line int
	// Lang is the first word of its info string.
	Lang string
	// Body is what it holds, without the fence's indentation.
	Body string
	// Mode, Reason (skip) and Ready (background) are its marker's.
	Mode   Mode
	Reason string
	Ready  string
}

// Command reports whether the block holds commands a reader runs.
func (b Block) Command() bool { return commandLanguages[b.Lang] }

// Script is what bash runs for the block: its body, or a console block's
// "$ " lines.
func (b Block) Script() string {
	if b.Lang != "console" {
		return b.Body
	}
	var s strings.Builder
	for _, l := range strings.Split(b.Body, "\n") {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			s.WriteString(c + "\n")
		}
	}
	return s.String()
}

var (
	fence  = regexp.MustCompile("^( *)(```+)(.*)$")
	marker = regexp.MustCompile(`^\s*<!--\s*(run|skip)\b(.*?)-->\s*$`)
	ready  = regexp.MustCompile(`^:\s*background,\s*ready:\s*(\S.*?)\s*$`)
)

// Parse reads the fenced blocks of a Markdown document and their markers.
// It returns every problem it finds with its line: a fence without an info
// string, a command block without a marker, a malformed marker, a marker
// that is not on the line before a command block's fence, and an unclosed
// fence.
func Parse(text string) ([]Block, []error) {
	var (
		blocks  []Block
		errs    []error
		pending *Block // the marker read on the line before, if any
		open    *Block
		indent  int
		ticks   string
		body    []string
	)
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		n := i + 1
		if open != nil {
			if m := fence.FindStringSubmatch(l); m != nil && strings.TrimSpace(m[3]) == "" && len(m[2]) >= len(ticks) {
				open.Body = strings.Join(body, "\n")
				if len(body) > 0 {
					open.Body += "\n"
				}
				blocks = append(blocks, *open)
				open = nil
				continue
			}
			body = append(body, strings.TrimPrefix(l, strings.Repeat(" ", min(indent, len(l)-len(strings.TrimLeft(l, " "))))))
			continue
		}
		if m := marker.FindStringSubmatch(l); m != nil {
			b, err := parseMarker(strings.TrimSpace(l), m[1], m[2])
			if err != nil {
				errs = append(errs, fmt.Errorf("line %d: %w", n, err))
			}
			b.Line = n
			pending = &b
			continue
		}
		m := fence.FindStringSubmatch(l)
		if m == nil {
			if pending != nil {
				errs = append(errs, fmt.Errorf("line %d: the marker is not on the line before a fence", pending.Line))
				pending = nil
			}
			continue
		}
		open = &Block{Line: n}
		indent, ticks, body = len(m[1]), m[2], nil
		if f := strings.Fields(m[3]); len(f) > 0 {
			open.Lang = f[0]
		}
		switch {
		case open.Lang == "":
			errs = append(errs, fmt.Errorf("line %d: a fence without an info string: say what it holds (sh or console for commands, with a marker; text, yaml, …)", n))
		case open.Command() && pending == nil:
			errs = append(errs, fmt.Errorf("line %d: a ```%s block without a marker: put <!-- run --> or <!-- skip: <reason> --> on the line before it", n, open.Lang))
		case !open.Command() && pending != nil:
			errs = append(errs, fmt.Errorf("line %d: a marker before a ```%s block, which does not run: only sh, bash, shell and console blocks take one", pending.Line, open.Lang))
		}
		if pending != nil {
			open.Mode, open.Reason, open.Ready = pending.Mode, pending.Reason, pending.Ready
			pending = nil
		}
	}
	if open != nil {
		errs = append(errs, fmt.Errorf("line %d: the fence is never closed", open.Line))
	}
	if pending != nil {
		errs = append(errs, fmt.Errorf("line %d: the marker is not on the line before a fence", pending.Line))
	}
	return blocks, errs
}

// parseMarker reads "run", "run: background, ready: TEXT" and
// "skip: REASON".
func parseMarker(line, word, rest string) (Block, error) {
	rest = strings.TrimSpace(rest)
	switch {
	case word == "run" && rest == "":
		return Block{Mode: Run}, nil
	case word == "run":
		if m := ready.FindStringSubmatch(rest); m != nil {
			return Block{Mode: Background, Ready: m[1]}, nil
		}
		return Block{}, fmt.Errorf("marker %s: want <!-- run --> or <!-- run: background, ready: <text its output holds once ready> -->", line)
	default:
		reason, ok := strings.CutPrefix(rest, ":")
		if reason = strings.TrimSpace(reason); !ok || reason == "" {
			return Block{}, fmt.Errorf("marker %s: want <!-- skip: <why this block does not run> -->", line)
		}
		return Block{Mode: Skip, Reason: reason}, nil
	}
}
