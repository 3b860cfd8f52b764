package spec

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

var unmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// checkTypes walks the document alongside the Go type it is decoded into
// and reports every value of the wrong kind with the path the author wrote,
// map keys included (spec.replicaSpecs.Worker.replicas). The JSON decoder
// would name Go types and drop the keys. Unknown fields are left to the
// strict decoder, and types that decode themselves (quantities,
// int-or-string, times) to their own decoders.
func checkTypes(value any, t reflect.Type, path *field.Path) field.ErrorList {
	if value == nil {
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) || t.Implements(unmarshalerType) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkTypes(value, t.Elem(), path)
	case reflect.Interface:
		return nil
	case reflect.Struct:
		obj, ok := value.(map[string]any)
		if !ok {
			return field.ErrorList{typeError(path, value, "must be an object")}
		}
		var errs field.ErrorList
		fields := jsonFields(t)
		for _, key := range sortedKeys(obj) {
			if ft, known := fields[key]; known {
				errs = append(errs, checkTypes(obj[key], ft, path.Child(key))...)
			}
		}
		return errs
	case reflect.Map:
		obj, ok := value.(map[string]any)
		if !ok {
			return field.ErrorList{typeError(path, value, "must be an object")}
		}
		var errs field.ErrorList
		for _, key := range sortedKeys(obj) {
			errs = append(errs, checkTypes(obj[key], t.Elem(), path.Child(key))...)
		}
		return errs
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 { // []byte: base64 text
			return expect(value, isString, path, "must be a string")
		}
		list, ok := value.([]any)
		if !ok {
			return field.ErrorList{typeError(path, value, "must be a list")}
		}
		var errs field.ErrorList
		for i, item := range list {
			errs = append(errs, checkTypes(item, t.Elem(), path.Index(i))...)
		}
		return errs
	case reflect.String:
		return expect(value, isString, path, "must be a string")
	case reflect.Bool:
		return expect(value, func(v any) bool { _, ok := v.(bool); return ok }, path, "must be true or false")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		lo, hi := int64(-1)<<(bits-1), int64(math.MaxInt64)>>(64-bits)
		return checkInteger(value, lo, hi, path)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		hi := int64(math.MaxInt64)
		if t.Bits() < 64 {
			hi = int64(1)<<t.Bits() - 1
		}
		return checkInteger(value, 0, hi, path)
	case reflect.Float32, reflect.Float64:
		return expect(value, isNumber, path, "must be a number")
	}
	return nil
}

// checkInteger accepts an integer within [lo, hi].
func checkInteger(value any, lo, hi int64, path *field.Path) field.ErrorList {
	n, ok := value.(int64)
	if !ok {
		return field.ErrorList{typeError(path, value, "must be an integer")}
	}
	if n < lo || n > hi {
		return field.ErrorList{field.Invalid(path, n, fmt.Sprintf("must be an integer from %d to %d", lo, hi))}
	}
	return nil
}

func expect(value any, ok func(any) bool, path *field.Path, msg string) field.ErrorList {
	if ok(value) {
		return nil
	}
	return field.ErrorList{typeError(path, value, msg)}
}

// typeError shows a scalar as it was written and names the kind of a list
// or an object instead of printing it whole.
func typeError(path *field.Path, value any, msg string) *field.Error {
	switch value.(type) {
	case map[string]any, []any:
		return field.Invalid(path, field.OmitValueType{}, fmt.Sprintf("%s, not %s", msg, describe(value)))
	}
	return field.Invalid(path, value, msg)
}

func isString(v any) bool { _, ok := v.(string); return ok }

func isNumber(v any) bool {
	switch v.(type) {
	case int64, float64:
		return true
	}
	return false
}

// jsonFields maps a struct's JSON field names to their types, embedded
// (inline) structs' fields included.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				for k, v := range jsonFields(ft) {
					if _, shadowed := out[k]; !shadowed {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
