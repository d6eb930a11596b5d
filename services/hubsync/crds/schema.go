package crds

import (
	"fmt"
	"reflect"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Types the schema spells by hand: they marshal to JSON other than their Go shape.
var (
	timeType      = reflect.TypeFor[metav1.Time]()
	microTimeType = reflect.TypeFor[metav1.MicroTime]()
	durationType  = reflect.TypeFor[metav1.Duration]()
	quantityType  = reflect.TypeFor[resource.Quantity]()
	intOrString   = reflect.TypeFor[intstr.IntOrString]()
	rawExtension  = reflect.TypeFor[runtime.RawExtension]()
	objectMeta    = reflect.TypeFor[metav1.ObjectMeta]()
	typeMeta      = reflect.TypeFor[metav1.TypeMeta]()
)

// overrideSchema is an override's schema: a JSON patch's value is any JSON (a string, a
// number, an object), as upstream's apiextensions JSON is, not the object an embedded
// manifest is.
func overrideSchema[T any]() (*apiextensionsv1.JSONSchemaProps, error) {
	s, err := SchemaOf[T]()
	if err != nil {
		return nil, err
	}
	anyJSON := apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true)}
	if err := setAt(s, anyJSON, "spec", "policy", "overrideRules", "[]", "jsonPatchOverrides", "[]", "value"); err != nil {
		return nil, err
	}
	return s, nil
}

// setAt replaces the schema at path ("[]" steps into a list's items).
func setAt(s *apiextensionsv1.JSONSchemaProps, v apiextensionsv1.JSONSchemaProps, path ...string) error {
	if len(path) == 0 {
		*s = v
		return nil
	}
	if path[0] == "[]" {
		if s.Items == nil || s.Items.Schema == nil {
			return fmt.Errorf("no list at %s", strings.Join(path, "."))
		}
		return setAt(s.Items.Schema, v, path[1:]...)
	}
	child, ok := s.Properties[path[0]]
	if !ok {
		return fmt.Errorf("no field %s", strings.Join(path, "."))
	}
	if err := setAt(&child, v, path[1:]...); err != nil {
		return err
	}
	s.Properties[path[0]] = child
	return nil
}

// maxDepth guards against a recursive type, which a structural schema cannot express.
const maxDepth = 32

// SchemaOf is the OpenAPI v3 schema of a top-level API object of type T, as the JSON
// encoding of T writes it: apiVersion, kind, metadata, and the object's own fields.
// Enumerations are left open (no enum): Flotilla reads them case-insensitively, as a
// seed's "partialComparison" shows, and the admission webhook judges them with fleetctl's
// words. Pointers, lists, maps and times are nullable, as their JSON may be null.
func SchemaOf[T any]() (*apiextensionsv1.JSONSchemaProps, error) {
	s, err := schemaOf(reflect.TypeFor[T](), 0)
	if err != nil {
		return nil, err
	}
	s.Properties["metadata"] = apiextensionsv1.JSONSchemaProps{Type: "object"}
	return s, nil
}

func schemaOf(t reflect.Type, depth int) (*apiextensionsv1.JSONSchemaProps, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("%s: nested too deep (a recursive type?)", t)
	}
	switch t {
	case timeType, microTimeType:
		return &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "date-time", Nullable: true}, nil
	case durationType:
		return &apiextensionsv1.JSONSchemaProps{Type: "string"}, nil
	case quantityType, intOrString:
		return &apiextensionsv1.JSONSchemaProps{XIntOrString: true, AnyOf: []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}}, nil
	case rawExtension:
		// An embedded manifest, kept as it is (an envelope's entries).
		return &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr(true)}, nil
	case objectMeta:
		return &apiextensionsv1.JSONSchemaProps{Type: "object"}, nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		s, err := schemaOf(t.Elem(), depth+1)
		if err != nil {
			return nil, err
		}
		s.Nullable = true
		return s, nil
	case reflect.Struct:
		return structSchema(t, depth)
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return &apiextensionsv1.JSONSchemaProps{Type: "string", Format: "byte", Nullable: true}, nil
		}
		items, err := schemaOf(t.Elem(), depth+1)
		if err != nil {
			return nil, err
		}
		items.Nullable = false // a list entry is never null
		return &apiextensionsv1.JSONSchemaProps{Type: "array", Nullable: true, Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: items}}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("%s: map keys must be strings", t)
		}
		values, err := schemaOf(t.Elem(), depth+1)
		if err != nil {
			return nil, err
		}
		return &apiextensionsv1.JSONSchemaProps{Type: "object", Nullable: true,
			AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: values}}, nil
	case reflect.String:
		return &apiextensionsv1.JSONSchemaProps{Type: "string"}, nil
	case reflect.Bool:
		return &apiextensionsv1.JSONSchemaProps{Type: "boolean"}, nil
	case reflect.Int32, reflect.Uint32, reflect.Int16, reflect.Uint16, reflect.Int8, reflect.Uint8:
		return &apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int32"}, nil
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		return &apiextensionsv1.JSONSchemaProps{Type: "integer", Format: "int64"}, nil
	case reflect.Float32, reflect.Float64:
		return &apiextensionsv1.JSONSchemaProps{Type: "number"}, nil
	case reflect.Interface:
		return &apiextensionsv1.JSONSchemaProps{XPreserveUnknownFields: ptr(true)}, nil
	}
	return nil, fmt.Errorf("%s: no schema for kind %s", t, t.Kind())
}

// structSchema is an object with a property per JSON field; embedded structs without a
// name (and TypeMeta) add their fields to it, as encoding/json does.
func structSchema(t reflect.Type, depth int) (*apiextensionsv1.JSONSchemaProps, error) {
	s := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{}}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, inline := jsonName(f)
		if name == "-" {
			continue
		}
		if inline {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft == typeMeta {
				s.Properties["apiVersion"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
				s.Properties["kind"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
				continue
			}
			inner, err := schemaOf(ft, depth+1)
			if err != nil {
				return nil, err
			}
			for k, v := range inner.Properties {
				s.Properties[k] = v
			}
			continue
		}
		fs, err := schemaOf(f.Type, depth+1)
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", t.Name(), f.Name, err)
		}
		s.Properties[name] = *fs
	}
	return s, nil
}

// jsonName is the field's JSON name, "-" when it is never written, and whether it is
// inlined (an embedded struct without a name, or ",inline").
func jsonName(f reflect.StructField) (string, bool) {
	tag := f.Tag.Get("json")
	name, opts, _ := strings.Cut(tag, ",")
	if tag == "-" {
		return "-", false
	}
	if strings.Contains(","+opts+",", ",inline,") || (name == "" && f.Anonymous) {
		return "", true
	}
	if name == "" {
		name = f.Name
	}
	return name, false
}

func ptr[T any](v T) *T { return &v }
