package storm

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/goccy/go-yaml/lexer"
	"github.com/goccy/go-yaml/token"

	"github.com/herdguard/herdguard/internal/fileline"
)

// A storm file is read within limits, since the YAML library pays for some
// input without bound: its decoder expands every alias where it is used
// (ten aliases of ten, nine deep, are a billion nodes from 755 bytes), and
// its parser keeps each node's whole path, which costs the square of the
// nesting, and a key's length for every node below it. A storm file needs
// none of that: the File type nests four deep (fleet, a group, its
// labels), its own keys are words, and the longest timeline a plan takes
// (1,001 disruptions) is under 100 KiB written out.
const (
	// MaxFileBytes bounds a storm file, its ${NAME}s filled in.
	MaxFileBytes = 128 << 10
	maxDepth     = 6
	maxKeyBytes  = 128
)

// ReadFile reads the storm file at path as Read does: what devicesim
// run -f, plan -f and merge -f read.
func ReadFile(path string, getenv func(string) string) (*File, error) {
	b, err := Load(path)
	if err != nil {
		return nil, err
	}
	return Read(bytes.NewReader(b), getenv)
}

// Load is the storm file at path as written, undecoded (devicesim deploy
// ships it so). A file over MaxFileBytes is an error wrapping ErrInvalid,
// and no more of it than that is read.
func Load(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readBounded(f)
}

func readBounded(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, fmt.Errorf("%w: over %d KiB; a storm file is a page or two", ErrInvalid, MaxFileBytes>>10)
	}
	return b, nil
}

// plain refuses, from the tokens and before the parser builds anything,
// what a storm file never needs and the YAML library pays for without
// bound: anchors, aliases, merge keys and explicit keys, nesting deeper
// than maxDepth and keys longer than maxKeyBytes. Its errors name the line.
func plain(b []byte) error {
	tokens := lexer.Tokenize(string(b))
	var block []opened // the keys and entries of block collections the token is inside
	flow := 0          // the flow collections it is inside
	for i, tk := range tokens {
		switch tk.Type {
		case token.AnchorType, token.AliasType, token.MergeKeyType, token.MappingKeyType:
			what := tk.Value
			if (tk.Type == token.AnchorType || tk.Type == token.AliasType) && i+1 < len(tokens) {
				what += tokens[i+1].Value // its name
			}
			return at(tk, "%s: a storm file takes no anchors (&), aliases (*), merge keys (<<) or explicit keys (?): "+
				"write each value out where it is used", what)
		case token.SequenceStartType, token.MappingStartType:
			flow++
		case token.SequenceEndType, token.MappingEndType:
			flow = max(flow-1, 0)
		case token.DocumentHeaderType:
			block, flow = block[:0], 0
		case token.SequenceEntryType:
			if flow == 0 {
				block = nest(block, opened{tk.Position.Column, true})
			}
		case token.MappingValueType:
			if i == 0 {
				break
			}
			key := tokens[i-1]
			if len(key.Value) > maxKeyBytes {
				return at(key, "a key of %d bytes: a storm file's are at most %d (its own are words, a label's name is short)",
					len(key.Value), maxKeyBytes)
			}
			if flow == 0 {
				block = nest(block, opened{key.Position.Column, false})
			}
		}
		if len(block)+flow > maxDepth {
			return at(tk, "nested over %d deep: a storm file nests 4 deep at most (fleet, a group, its labels)", maxDepth)
		}
	}
	return nil
}

// opened is a key or a sequence entry of a block collection, at its column.
type opened struct {
	column int
	entry  bool
}

// nest is block with o in it, inside what o's column leaves open. A
// sequence may sit at its key's column; any other child is further in.
func nest(block []opened, o opened) []opened {
	for len(block) > 0 {
		top := block[len(block)-1]
		if top.column < o.column || top.column == o.column && !top.entry && o.entry {
			break
		}
		block = block[:len(block)-1]
	}
	return append(block, o)
}

func at(tk *token.Token, format string, args ...any) error {
	return &fileline.Error{Line: tk.Position.Line, Column: tk.Position.Column, Err: fmt.Errorf(format, args...)}
}
