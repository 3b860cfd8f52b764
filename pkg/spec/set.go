package spec

import (
	"fmt"
	"strconv"
	"strings"

	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// pathStep is one step of a --set path: a map key or a list index.
type pathStep struct {
	key     string
	index   int
	isIndex bool
}

func (s pathStep) String() string {
	if s.isIndex {
		return "[" + strconv.Itoa(s.index) + "]"
	}
	return s.key
}

// joinSteps renders a path prefix as the user wrote it (a.b[0].c).
func joinSteps(steps []pathStep) string {
	var b strings.Builder
	for i, s := range steps {
		if i > 0 && !s.isIndex {
			b.WriteByte('.')
		}
		b.WriteString(strings.ReplaceAll(s.String(), ".", `\.`))
	}
	return b.String()
}

// applySet applies one PATH=VALUE override to the document tree.
func applySet(doc map[string]any, set string) error {
	rawPath, rawValue, ok := strings.Cut(set, "=")
	if !ok {
		return fmt.Errorf("--set %q: want PATH=VALUE", set)
	}
	steps, err := parsePath(rawPath)
	if err != nil {
		return fmt.Errorf("--set %s: %w", rawPath, err)
	}
	value, err := parseValue(rawValue)
	if err != nil {
		return fmt.Errorf("--set %s: value %q is not valid YAML: %w", rawPath, rawValue, err)
	}
	if err := setAt(doc, steps, value); err != nil {
		return fmt.Errorf("--set %s: %w", rawPath, err)
	}
	return nil
}

// parsePath splits a.b\.c[0].d into steps; "\." is a dot inside a key.
func parsePath(path string) ([]pathStep, error) {
	if path == "" {
		return nil, fmt.Errorf("empty path")
	}
	var steps []pathStep
	var key strings.Builder
	afterIndex := false // a "]" was just closed: only "." or "[" may follow
	flushKey := func() error {
		if key.Len() == 0 {
			if afterIndex {
				return nil
			}
			return fmt.Errorf("empty segment in path %q", path)
		}
		steps = append(steps, pathStep{key: key.String()})
		key.Reset()
		return nil
	}
	for i := 0; i < len(path); i++ {
		switch c := path[i]; c {
		case '\\':
			if i+1 == len(path) {
				return nil, fmt.Errorf("path %q ends with a backslash", path)
			}
			i++
			key.WriteByte(path[i])
			afterIndex = false
		case '.':
			if err := flushKey(); err != nil {
				return nil, err
			}
			afterIndex = false
		case '[':
			if key.Len() > 0 {
				steps = append(steps, pathStep{key: key.String()})
				key.Reset()
			} else if !afterIndex {
				return nil, fmt.Errorf("list index without a field name in path %q", path)
			}
			end := strings.IndexByte(path[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed [ in path %q", path)
			}
			index, err := strconv.Atoi(path[i+1 : i+end])
			if err != nil || index < 0 {
				return nil, fmt.Errorf("list index %q in path %q is not a non-negative number", path[i+1:i+end], path)
			}
			steps = append(steps, pathStep{index: index, isIndex: true})
			i += end
			afterIndex = true
		default:
			if afterIndex {
				return nil, fmt.Errorf("missing . after ] in path %q", path)
			}
			key.WriteByte(c)
		}
	}
	if key.Len() > 0 || !afterIndex {
		if err := flushKey(); err != nil {
			return nil, err
		}
	}
	return steps, nil
}

// parseValue reads a --set value as YAML; the empty value is "".
func parseValue(raw string) (any, error) {
	if raw == "" {
		return "", nil
	}
	data, err := yaml.YAMLToJSON([]byte(raw))
	if err != nil {
		return nil, err
	}
	var value any
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &value); err != nil {
		return nil, err
	}
	return value, nil
}

// setAt walks the tree along steps and sets the last one to value. A
// missing or null map on the way is created; a missing list is not,
// because its length would be a guess.
func setAt(doc map[string]any, steps []pathStep, value any) error {
	var cur any = doc
	for i, step := range steps {
		last := i == len(steps)-1
		here := joinSteps(steps[:i])
		if step.isIndex {
			list, ok := cur.([]any)
			if !ok {
				return fmt.Errorf("%s is %s, not a list", here, describe(cur))
			}
			if step.index >= len(list) {
				return fmt.Errorf("index %d out of range: %s has %d items", step.index, here, len(list))
			}
			if last {
				list[step.index] = value
				return nil
			}
			cur = list[step.index]
			continue
		}
		m, ok := cur.(map[string]any)
		if !ok {
			where := here
			if where == "" {
				where = "the document"
			}
			return fmt.Errorf("%s is %s, not a map with field %q", where, describe(cur), step.key)
		}
		if last {
			m[step.key] = value
			return nil
		}
		next, exists := m[step.key]
		if !exists || next == nil {
			if steps[i+1].isIndex {
				return fmt.Errorf("%s does not exist, so it has no item %s", joinSteps(steps[:i+1]), steps[i+1])
			}
			next = map[string]any{}
			m[step.key] = next
		}
		cur = next
	}
	return nil
}

// describe names a JSON value's type for error messages.
func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("a %T", v)
}
