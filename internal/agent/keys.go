package agent

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// checkShape walks the decoded JSON of an agent file beside the type it
// decodes into and returns the first field whose key is not one of the
// type's (compared exactly: encoding/json matches keys case-insensitively,
// so "NAME" or "System_Prompt" would otherwise pass unnoticed) or whose
// value has the wrong kind, with its path as the loader's messages write
// it ("tools[1].timeout_seconds"). Free-form values (json.RawMessage,
// interfaces, types that decode themselves) are not looked into.
func checkShape(v any, t reflect.Type, path string) *FieldError {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil || freeForm(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return kindError(v, t, path)
		}
		fields := jsonFields(t)
		for key, val := range m {
			ft, ok := fields[key]
			if !ok {
				return &FieldError{Field: fieldPath(path, key), Problem: "unknown field"}
			}
			if err := checkShape(val, ft, fieldPath(path, key)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		list, ok := v.([]any)
		if !ok {
			return kindError(v, t, path)
		}
		for i, item := range list {
			if err := checkShape(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return kindError(v, t, path)
		}
		for key, val := range m {
			if err := checkShape(val, t.Elem(), fieldPath(path, key)); err != nil {
				return err
			}
		}
	case reflect.String:
		if _, ok := v.(string); !ok {
			return kindError(v, t, path)
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return kindError(v, t, path)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		if _, ok := v.(json.Number); !ok {
			return kindError(v, t, path)
		}
	}
	return nil
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// freeForm reports a type whose JSON the walk does not look into.
func freeForm(t reflect.Type) bool {
	if t == rawMessageType || t.Kind() == reflect.Interface {
		return true
	}
	p := reflect.PointerTo(t)
	return t.Implements(unmarshalerType) || p.Implements(unmarshalerType) ||
		t.Implements(textUnmarshaler) || p.Implements(textUnmarshaler)
}

// jsonFields maps the JSON keys of struct type t to their field types, as
// encoding/json names them: the tag's name or the field name, with the
// fields of embedded structs without a name promoted.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		ft := f.Type
		if f.Anonymous && name == "" {
			for ft.Kind() == reflect.Pointer {
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
		if name == "" {
			name = f.Name
		}
		out[name] = ft
	}
	return out
}

// kindError is a value of the wrong kind, in the words describeDecodeError
// uses.
func kindError(v any, t reflect.Type, path string) *FieldError {
	if path == "" {
		path = "(top level)"
	}
	got := "null"
	switch v.(type) {
	case string:
		got = "string"
	case bool:
		got = "boolean"
	case json.Number:
		got = "number"
	case []any:
		got = "list"
	case map[string]any:
		got = "mapping"
	}
	want := jsonKind(t)
	problem := fmt.Sprintf("got %s, want %s", got, want)
	switch {
	case got == "boolean" && want == "string":
		problem += booleanHint
	case got == "number" && want == "string":
		problem += " (quote the value)"
	}
	return &FieldError{Field: path, Problem: problem}
}

// booleanHint follows "got boolean, want string".
const booleanHint = " (YAML reads unquoted true and false as booleans; quote the value)"

// fieldPath appends key to path.
func fieldPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
