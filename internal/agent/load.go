package agent

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
)

// MaxFileBytes bounds the size of one agent file.
const MaxFileBytes = 1 << 20

// LoadOptions are what loading checks beyond the files themselves. The
// zero value checks nothing more.
type LoadOptions struct {
	// LookupEnv reports whether an environment variable is set, as
	// os.LookupEnv does. When non-nil, a file whose model.api_key_env
	// names a variable that is unset or empty is refused (CheckKeys); the
	// value is never kept or shown. Nil skips the check, for a process that
	// never calls models (`hxd serve --engine temporal`).
	LookupEnv func(string) (string, bool)
	// Taken maps the refs of agents defined elsewhere to where (such as
	// "--demo"): LoadDirWith refuses a file defining one of them, naming
	// both.
	Taken map[Ref]string
}

// Load reads one agent file (YAML 1.2, so JSON works too, yaml.go),
// refusing unknown and repeated keys, and returns the validated definition
// with defaults applied. name (usually the file path) prefixes every
// problem, e.g.
// `agents/x.yaml: tools[0].kind: unknown kind "webhok"`; problems are
// joined by errors.Join and wrap ErrInvalidDefinition. Load does not check
// API key variables: LoadWith with LoadOptions.LookupEnv does.
func Load(r io.Reader, name string) (*Definition, error) {
	return LoadWith(r, name, LoadOptions{})
}

// LoadWith is Load with the checks of opts: with opts.LookupEnv, an
// api_key_env naming an unset variable is one more problem, e.g.
// `agents/claude.yaml: model.api_key_env: environment variable
// ANTHROPIC_API_KEY is not set or empty`.
func LoadWith(r io.Reader, name string, opts LoadOptions) (*Definition, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", name, err)
	}
	if len(data) > MaxFileBytes {
		return nil, fileError(name, &FieldError{Problem: fmt.Sprintf("file exceeds %d bytes", MaxFileBytes)})
	}
	d, err := decode(data)
	if err != nil {
		return nil, fileError(name, err)
	}
	problems := splitJoined(d.Validate())
	if opts.LookupEnv != nil {
		problems = append(problems, splitJoined(d.CheckKeys(opts.LookupEnv))...)
	}
	if err := errors.Join(problems...); err != nil {
		return nil, fileError(name, err)
	}
	return d.WithDefaults(), nil
}

// LoadDir loads every *.yaml, *.yml and *.json file of dir (not
// recursing, skipping hidden files), one agent per file, in file name
// order. Problems of all files are joined; each names its file. Two files
// defining the same name@version are refused. API key variables are not
// checked: LoadDirWith with LoadOptions.LookupEnv does.
func LoadDir(dir string) ([]*Definition, error) {
	return LoadDirWith(dir, LoadOptions{})
}

// LoadDirWith is LoadDir with the checks of opts (LoadWith), beside the
// agents of opts.Taken.
func LoadDirWith(dir string, opts LoadOptions) ([]*Definition, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("agent directory: %w", err)
	}
	var (
		defs  []*Definition
		errs  []error
		taken = opts.Taken
		seen  = maps.Clone(taken)
	)
	if seen == nil {
		seen = map[Ref]string{}
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || !isAgentFile(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		d, err := loadFile(path, opts)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if first, ok := seen[d.Ref()]; ok {
			where := "in " + first
			if _, ok := taken[d.Ref()]; ok {
				where = "by " + first
			}
			errs = append(errs, fileError(path, &FieldError{Problem: fmt.Sprintf("agent %s is already defined %s", d.Ref(), where)}))
			continue
		}
		seen[d.Ref()] = path
		defs = append(defs, d)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return defs, nil
}

// isAgentFile reports whether name has an agent file extension.
func isAgentFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// loadFile loads the agent file at path.
func loadFile(path string, opts LoadOptions) (_ *Definition, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err // *PathError names the file
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	return LoadWith(f, path, opts)
}

// decode converts the YAML 1.2 document to JSON (yamlToJSON: one
// document, no key twice in a mapping) and decodes it strictly: every key
// exactly one of the format's (checkShape) and every value of its kind.
func decode(data []byte) (*Definition, error) {
	js, err := yamlToJSON(data)
	if err != nil {
		return nil, err
	}
	var shape any
	sdec := json.NewDecoder(bytes.NewReader(js))
	sdec.UseNumber()
	if err := sdec.Decode(&shape); err != nil {
		return nil, describeDecodeError(err)
	}
	if ferr := checkShape(shape, reflect.TypeFor[Definition](), ""); ferr != nil {
		return nil, ferr
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var d Definition
	if err := dec.Decode(&d); err != nil {
		return nil, describeDecodeError(err)
	}
	return &d, nil
}

// describeDecodeError turns a JSON decoding error into a *FieldError
// without Go type names.
func describeDecodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "(top level)"
		}
		got, want := yamlKind(te.Value), jsonKind(te.Type)
		problem := fmt.Sprintf("got %s, want %s", got, want)
		if got == "boolean" && want == "string" {
			problem += booleanHint
		} else if strings.HasPrefix(got, "number") && want == "string" {
			problem += " (quote the value)"
		}
		return &FieldError{Field: field, Problem: problem, Cause: err}
	}
	msg := strings.TrimPrefix(err.Error(), "json: ")
	return &FieldError{Problem: msg, Cause: err}
}

// yamlKind renames encoding/json's value descriptions ("bool", "array",
// "object") to the words jsonKind uses.
func yamlKind(v string) string {
	switch v {
	case "bool":
		return "boolean"
	case "array":
		return "list"
	case "object":
		return "mapping"
	}
	return v
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "list"
	case reflect.Struct, reflect.Map:
		return "mapping"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return t.Kind().String()
}

// fileError prefixes every joined problem of err with the file name.
func fileError(name string, err error) error {
	parts := splitJoined(err)
	out := make([]error, len(parts))
	for i, e := range parts {
		out[i] = fmt.Errorf("%s: %w", name, e)
	}
	return errors.Join(out...)
}
