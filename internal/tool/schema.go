package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// schemaURL is the location input schemas are compiled under; nothing is
// ever fetched from it.
const schemaURL = "mem://hxd/tool/input_schema.json"

// maxSchemaProblems bounds how many problems a validation error lists.
const maxSchemaProblems = 5

// printer renders jsonschema error kinds.
var printer = message.NewPrinter(language.English)

// inputSchema is a compiled input schema. It is safe for concurrent use.
type inputSchema struct {
	schema *jsonschema.Schema
}

// noLoader refuses to load any external schema: an input schema must be
// self-contained (no file or network $ref).
type noLoader struct{}

// Load implements jsonschema.URLLoader.
func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("external reference %q not allowed", u)
}

// compileSchema compiles a JSON schema (draft 2020-12 unless $schema says
// otherwise). The schema must be a JSON object whose type, if given, is
// "object".
func compileSchema(raw json.RawMessage) (*inputSchema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, errors.New("not valid JSON")
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return nil, errors.New("must be a JSON object")
	}
	if t, ok := obj["type"]; ok && t != "object" {
		return nil, errors.New(`type must be "object"`)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, fmt.Errorf("invalid schema: %w", err)
	}
	sch, err := c.Compile(schemaURL)
	if err != nil {
		return nil, errors.New("invalid schema: " + describeCompileError(err))
	}
	return &inputSchema{schema: sch}, nil
}

// describeCompileError renders a schema compilation error without the
// internal schema URL where possible.
func describeCompileError(err error) string {
	var sv *jsonschema.SchemaValidationError
	if errors.As(err, &sv) {
		var ve *jsonschema.ValidationError
		if errors.As(sv.Err, &ve) {
			return describeValidation(ve)
		}
	}
	return strings.ReplaceAll(err.Error(), schemaURL, "input_schema")
}

// validate checks input (empty or null means {}) against the schema. The
// error text is short and meant for the model.
func (s *inputSchema) validate(input json.RawMessage) error {
	if len(bytes.TrimSpace(input)) == 0 || string(bytes.TrimSpace(input)) == "null" {
		input = json.RawMessage(`{}`)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(input))
	if err != nil {
		return errors.New("input is not valid JSON")
	}
	if err := s.schema.Validate(doc); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return errors.New("input does not match schema: " + describeValidation(ve))
		}
		return errors.New("input does not match schema")
	}
	return nil
}

// describeValidation lists the leaf problems of a validation error, e.g.
// `missing property "account"; at /limit: got string, want number`.
func describeValidation(ve *jsonschema.ValidationError) string {
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			leaves = append(leaves, describeLeaf(e))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(leaves) > maxSchemaProblems {
		leaves = append(leaves[:maxSchemaProblems], fmt.Sprintf("and %d more", len(leaves)-maxSchemaProblems))
	}
	return strings.Join(leaves, "; ")
}

// describeLeaf renders one problem, prefixed by its JSON pointer unless it
// is about the top-level value.
func describeLeaf(e *jsonschema.ValidationError) string {
	var msg string
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		if len(k.Missing) == 1 {
			msg = "missing property " + strconv.Quote(k.Missing[0])
		} else {
			msg = "missing properties " + quoteAll(k.Missing)
		}
	case *kind.AdditionalProperties:
		msg = "unexpected properties " + quoteAll(k.Properties)
	default:
		msg = e.ErrorKind.LocalizedString(printer)
	}
	if len(e.InstanceLocation) == 0 {
		return msg
	}
	return "at /" + strings.Join(e.InstanceLocation, "/") + ": " + msg
}

// quoteAll returns the Go-quoted names joined by ", ".
func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = strconv.Quote(n)
	}
	return strings.Join(q, ", ")
}
