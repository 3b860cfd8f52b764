package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

// duplicateKey is one key written twice in the same map.
type duplicateKey struct {
	path        string // the key's field path, spec.tfReplicaSpecs.Worker.replicas
	first, then int    // the lines of both occurrences, 1-based
}

func (d duplicateKey) String() string {
	return fmt.Sprintf("%s: duplicate field, at lines %d and %d (one map holds each key once)", d.path, d.first, d.then)
}

// duplicateKeys lists every key written twice in one map of data, YAML or
// JSON. It reads data itself because sigs.k8s.io/yaml turns a document
// into a map before the strict decoder sees it, so the later value would
// silently win. It reports nothing for input it cannot parse: the parser
// that reads the job reports that.
func duplicateKeys(data []byte) []duplicateKey {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		if dups, err := jsonDuplicateKeys(data); err == nil {
			return dups
		}
	}
	return yamlDuplicateKeys(data)
}

// yamlDuplicateKeys walks the node tree of every document in data; the
// nodes keep each key's line, which a decoded map has lost.
func yamlDuplicateKeys(data []byte) []duplicateKey {
	var dups []duplicateKey
	decoder := yamlv3.NewDecoder(bytes.NewReader(data))
	for {
		var doc yamlv3.Node
		if err := decoder.Decode(&doc); err != nil {
			return dups // io.EOF, or a syntax error reported by the reader of the job
		}
		dups = walkYAML(&doc, "", dups)
	}
}

func walkYAML(n *yamlv3.Node, path string, dups []duplicateKey) []duplicateKey {
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			dups = walkYAML(c, path, dups)
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			dups = walkYAML(c, fmt.Sprintf("%s[%d]", path, i), dups)
		}
	case yamlv3.MappingNode:
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			key, value := n.Content[i], n.Content[i+1]
			child := joinPath(path, key.Value)
			if key.Kind == yamlv3.ScalarNode && key.Tag != "!!merge" {
				if line, ok := seen[key.Value]; ok {
					dups = append(dups, duplicateKey{path: child, first: line, then: key.Line})
				} else {
					seen[key.Value] = key.Line
				}
			}
			dups = walkYAML(value, child, dups)
		}
	}
	return dups
}

// jsonDuplicateKeys walks the tokens of a JSON document, counting lines
// by the decoder's offset.
func jsonDuplicateKeys(data []byte) ([]duplicateKey, error) {
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	lineAt := func() int { return bytes.Count(data[:decoder.InputOffset()], []byte("\n")) + 1 }
	var dups []duplicateKey
	var walk func(path string) error
	walk = func(path string) error {
		tok, err := decoder.Token()
		if err != nil {
			return err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]int{}
			for decoder.More() {
				keyTok, err := decoder.Token()
				if err != nil {
					return err
				}
				key, _ := keyTok.(string)
				child := joinPath(path, key)
				if line, ok := seen[key]; ok {
					dups = append(dups, duplicateKey{path: child, first: line, then: lineAt()})
				} else {
					seen[key] = lineAt()
				}
				if err := walk(child); err != nil {
					return err
				}
			}
			_, err = decoder.Token() // '}'
			return err
		case json.Delim('['):
			for i := 0; decoder.More(); i++ {
				if err := walk(fmt.Sprintf("%s[%d]", path, i)); err != nil {
					return err
				}
			}
			_, err = decoder.Token() // ']'
			return err
		}
		return nil
	}
	if err := walk(""); err != nil {
		return nil, err
	}
	if _, err := decoder.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value") // let YAML's reader judge the rest
	}
	return dups, nil
}

// joinPath appends key to a dotted field path, quoting a key that a dot
// would make ambiguous.
func joinPath(path, key string) string {
	if strings.ContainsAny(key, ".[]") || key == "" {
		key = strconv.Quote(key)
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// checkDuplicateKeys is an error listing every duplicate key of data, or,
// when lenient, a warning for each.
func checkDuplicateKeys(data []byte, lenient bool) ([]string, error) {
	dups := duplicateKeys(data)
	if len(dups) == 0 {
		return nil, nil
	}
	lines := make([]string, len(dups))
	for i, d := range dups {
		lines[i] = d.String()
	}
	if lenient {
		for i := range lines {
			lines[i] += " (the later value is used: --lenient)"
		}
		return lines, nil
	}
	return nil, errors.New(strings.Join(lines, "\n"))
}
