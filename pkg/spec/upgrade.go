package spec

import (
	"encoding/json"
	"fmt"

	"github.com/trainstep/trainstep/pkg/kubeflow"
	"github.com/trainstep/trainstep/pkg/result"
)

// Upgrade rewrites a manifest of a kind trainstep does not run as it is
// (Training Operator's MPIJob v1) as the kind that runs the same job, with
// opts.Sets applied to it first, and lists what changes. ok is false for a
// manifest that needs no rewriting. The result is checked as Load checks a
// job (defaulted and validated, the other overrides applied), so what it
// returns runs. Any error is a *result.Error with phase Invalid.
func Upgrade(data []byte, opts Options) (manifest map[string]any, changes []string, ok bool, err error) {
	up, changes, ok, err := upgrade(data, opts)
	if err != nil {
		return nil, nil, ok, result.Invalid(result.ReasonInvalidSpec, err)
	}
	return up, changes, ok, nil
}

func upgrade(data []byte, opts Options) (map[string]any, []string, bool, error) {
	if len(data) > MaxManifestBytes {
		return nil, nil, false, TooLarge(int64(len(data)))
	}
	opts = withoutEmptyOverrides(opts)
	doc, err := singleDocument(data)
	if err != nil {
		return nil, nil, false, err
	}
	apiVersion, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	if apiVersion == "" || kind == "" || manifestTerms(doc).replicaSpecs == trainJobReplicaSpecs {
		return nil, nil, false, nil
	}
	for _, set := range opts.Sets {
		if err := applySet(doc, set); err != nil {
			return nil, nil, true, err
		}
	}
	obj, _, err := DecodeKubeflow(doc, opts.Lenient)
	if err != nil {
		return nil, nil, false, nil // not one to upgrade: Load says what is wrong with it
	}
	upgrader, ok := obj.(kubeflow.Upgrader)
	if !ok {
		return nil, nil, false, nil
	}
	upgraded, changes, err := upgrader.Upgrade()
	if err != nil {
		return nil, nil, true, err
	}
	out, err := plainManifest(upgraded)
	if err != nil {
		return nil, nil, true, err
	}
	encoded, err := json.Marshal(out)
	if err != nil {
		return nil, nil, true, fmt.Errorf("encoding the upgraded manifest: %w", err)
	}
	rest := opts
	rest.Sets = nil
	if _, _, err := load(encoded, rest); err != nil {
		return nil, nil, true, fmt.Errorf("the manifest written as %s %s does not run: %w", out["apiVersion"], out["kind"], err)
	}
	return out, changes, true, nil
}

// plainManifest is v as a manifest's tree: what encoding it gives, without
// the nulls a typed object adds (creationTimestamp: null).
func plainManifest(v any) (map[string]any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding the upgraded manifest: %w", err)
	}
	var tree map[string]any
	if err := json.Unmarshal(data, &tree); err != nil {
		return nil, fmt.Errorf("encoding the upgraded manifest: %w", err)
	}
	prune(tree)
	return tree, nil
}

// prune drops the nulls (an empty object, emptyDir: {}, may mean something).
func prune(m map[string]any) {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case map[string]any:
			prune(x)
		case []any:
			for _, item := range x {
				if child, ok := item.(map[string]any); ok {
					prune(child)
				}
			}
		}
	}
}
