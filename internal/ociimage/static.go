package ociimage

import (
	"bytes"
	"debug/elf"
)

// isStatic reports whether an ELF binary asks for no dynamic loader (no
// PT_INTERP program header): it then runs on an empty base.
func isStatic(bin []byte) bool {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return false
		}
	}
	return true
}
