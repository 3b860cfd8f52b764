package argo_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	wfv1 "github.com/argoproj/argo-workflows/v3/pkg/apis/workflow/v1alpha1"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/replicapolicy"
	"github.com/trainstep/trainstep/pkg/spec"
)

// manifestDirs are the directories whose YAML users apply or submit.
var manifestDirs = []string{"templates", "workflows", "deploy"}

// kustomization is the part of a kustomization.yaml trainstep uses.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Resources  []string `json:"resources"`
}

// catalog holds every manifest of the repository, decoded by kind; paths
// are relative to the repository root.
type catalog struct {
	workflows       map[string]*wfv1.Workflow
	templates       map[string]*wfv1.WorkflowTemplate
	clusterTemplate map[string]*wfv1.ClusterWorkflowTemplate
	cronWorkflows   map[string]*wfv1.CronWorkflow
	serviceAccounts map[string]*corev1.ServiceAccount
	roles           map[string]*rbacv1.Role
	roleBindings    map[string]*rbacv1.RoleBinding
	clusterRoles    map[string]*rbacv1.ClusterRole
	kustomizations  map[string]*kustomization
	// admission holds the ValidatingAdmissionPolicies and their bindings.
	admission map[string][]any
	// policies are the trainstep-policy ConfigMaps, as settings.
	policies map[string]replicapolicy.Policy
	jobs     map[string][]byte // job manifests (TrainJob, Kubeflow kinds), raw
}

func newCatalog() *catalog {
	return &catalog{
		workflows:       map[string]*wfv1.Workflow{},
		templates:       map[string]*wfv1.WorkflowTemplate{},
		clusterTemplate: map[string]*wfv1.ClusterWorkflowTemplate{},
		cronWorkflows:   map[string]*wfv1.CronWorkflow{},
		serviceAccounts: map[string]*corev1.ServiceAccount{},
		roles:           map[string]*rbacv1.Role{},
		roleBindings:    map[string]*rbacv1.RoleBinding{},
		clusterRoles:    map[string]*rbacv1.ClusterRole{},
		kustomizations:  map[string]*kustomization{},
		admission:       map[string][]any{},
		policies:        map[string]replicapolicy.Policy{},
		jobs:            map[string][]byte{},
	}
}

// repoRoot is the repository's top directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("locating the test's source file")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// yamlFiles lists the YAML files under dirs, relative to root, sorted.
func yamlFiles(root string, dirs ...string) ([]string, error) {
	var files []string
	for _, dir := range dirs {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if ext := filepath.Ext(p); ext == ".yaml" || ext == ".yml" {
				rel, err := filepath.Rel(root, p)
				files = append(files, filepath.ToSlash(rel))
				return err
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.Strings(files)
	return files, nil
}

// documents splits a YAML stream into its non-empty documents.
func documents(data []byte) ([][]byte, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(stripComments(doc))) > 0 {
			docs = append(docs, doc)
		}
	}
}

// stripComments drops whole-line comments, to tell empty documents apart.
func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(line), []byte("#")) {
			out = append(out, line)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// add decodes one document strictly by its kind: an unknown field, a value
// of the wrong type or a kind nothing here knows is an error.
func (c *catalog) add(path string, doc []byte) error {
	var meta struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := yaml.Unmarshal(doc, &meta); err != nil {
		return fmt.Errorf("parsing: %w", err)
	}
	strict := func(into any) error {
		if err := yaml.UnmarshalStrict(doc, into); err != nil {
			return fmt.Errorf("decoding %s %s: %w", meta.APIVersion, meta.Kind, err)
		}
		return nil
	}
	switch {
	case meta.APIVersion == "argoproj.io/v1alpha1" && meta.Kind == "Workflow":
		return decodeInto(c.workflows, path, strict)
	case meta.APIVersion == "argoproj.io/v1alpha1" && meta.Kind == "WorkflowTemplate":
		return decodeInto(c.templates, path, strict)
	case meta.APIVersion == "argoproj.io/v1alpha1" && meta.Kind == "ClusterWorkflowTemplate":
		return decodeInto(c.clusterTemplate, path, strict)
	case meta.APIVersion == "argoproj.io/v1alpha1" && meta.Kind == "CronWorkflow":
		return decodeInto(c.cronWorkflows, path, strict)
	case meta.APIVersion == "v1" && meta.Kind == "ServiceAccount":
		return decodeInto(c.serviceAccounts, path, strict)
	case meta.APIVersion == "rbac.authorization.k8s.io/v1" && meta.Kind == "Role":
		return decodeInto(c.roles, path, strict)
	case meta.APIVersion == "rbac.authorization.k8s.io/v1" && meta.Kind == "RoleBinding":
		return decodeInto(c.roleBindings, path, strict)
	case meta.APIVersion == "rbac.authorization.k8s.io/v1" && meta.Kind == "ClusterRole":
		return decodeInto(c.clusterRoles, path, strict)
	case meta.APIVersion == "kustomize.config.k8s.io/v1beta1" && meta.Kind == "Kustomization":
		return decodeInto(c.kustomizations, path, strict)
	case meta.APIVersion == "admissionregistration.k8s.io/v1" && meta.Kind == "ValidatingAdmissionPolicy":
		policy := &admissionv1.ValidatingAdmissionPolicy{}
		if err := strict(policy); err != nil {
			return err
		}
		c.admission[path] = append(c.admission[path], policy)
		return nil
	case meta.APIVersion == "admissionregistration.k8s.io/v1" && meta.Kind == "ValidatingAdmissionPolicyBinding":
		binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
		if err := strict(binding); err != nil {
			return err
		}
		c.admission[path] = append(c.admission[path], binding)
		return nil
	case meta.APIVersion == "v1" && meta.Kind == "ConfigMap":
		return c.addPolicy(path, strict)
	case meta.APIVersion == "trainstep.dev/v1alpha1" || strings.HasPrefix(meta.APIVersion, "kubeflow.org/"):
		// spec.Load decodes strictly and validates, as `trainstep validate
		// --policy-file workflows/policy.yaml` does.
		if _, _, err := spec.Load(doc, spec.Options{Policy: examplesPolicy}); err != nil {
			return fmt.Errorf("loading the job: %w", err)
		}
		c.jobs[path] = doc
		return nil
	}
	return fmt.Errorf("unknown kind %q of apiVersion %q: teach this test what to check in it", meta.Kind, meta.APIVersion)
}

// examplesPolicyFile holds the settings the shipped examples run with.
const examplesPolicyFile = "workflows/policy.yaml"

// examplesPolicy is examplesPolicyFile's settings: the jobs of the shipped
// files are loaded with them, as a namespace that applied it runs them.
var examplesPolicy = func() replicapolicy.Policy {
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", examplesPolicyFile))
	if err != nil {
		panic(err)
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict(data, &cm); err != nil {
		panic(err)
	}
	p, _, err := replicapolicy.ParseSettings(cm.Data, examplesPolicyFile)
	if err != nil {
		panic(err)
	}
	return p
}()

// addPolicy reads a trainstep-policy ConfigMap: every key a setting
// trainstep knows (none ignored with a warning), every value one it takes.
func (c *catalog) addPolicy(path string, strict func(any) error) error {
	cm := &corev1.ConfigMap{}
	if err := strict(cm); err != nil {
		return err
	}
	if cm.Name != replicapolicy.ConfigMapName {
		return fmt.Errorf("ConfigMap %q: the only ConfigMap shipped is %s", cm.Name, replicapolicy.ConfigMapName)
	}
	p, warnings, err := replicapolicy.ParseSettings(cm.Data, path)
	if err != nil {
		return err
	}
	if len(warnings) > 0 {
		return errors.New(strings.Join(warnings, "\n"))
	}
	c.policies[path] = p
	return nil
}

func decodeInto[T any](into map[string]*T, path string, strict func(any) error) error {
	if _, dup := into[path]; dup {
		return fmt.Errorf("a second %T in one file", *new(T))
	}
	obj := new(T)
	if err := strict(obj); err != nil {
		return err
	}
	into[path] = obj
	return nil
}

// loadFile adds every document of one file to the catalog.
func (c *catalog) loadFile(root, path string) error {
	data, err := os.ReadFile(filepath.Join(root, path))
	if err != nil {
		return err
	}
	docs, err := documents(data)
	if err != nil {
		return fmt.Errorf("%s: splitting YAML documents: %w", path, err)
	}
	if len(docs) == 0 {
		return fmt.Errorf("%s: no YAML document", path)
	}
	for i, doc := range docs {
		if err := c.add(path, doc); err != nil {
			return fmt.Errorf("%s (document %d): %w", path, i+1, err)
		}
	}
	return nil
}

var (
	loadOnce   sync.Once
	loaded     *catalog
	loadErrors []error
)

// manifests loads the repository's manifests once for all tests; a file
// that does not parse fails the test that asks.
func manifests(t testing.TB) *catalog {
	t.Helper()
	loadOnce.Do(func() {
		root := repoRoot(t)
		loaded = newCatalog()
		files, err := yamlFiles(root, manifestDirs...)
		if err != nil {
			loadErrors = append(loadErrors, err)
			return
		}
		for _, f := range files {
			if err := loaded.loadFile(root, f); err != nil {
				loadErrors = append(loadErrors, err)
			}
		}
	})
	if len(loadErrors) > 0 {
		t.Fatalf("manifests that do not parse:\n%v", errors.Join(loadErrors...))
	}
	return loaded
}

func TestEveryManifestParses(t *testing.T) {
	c := manifests(t)
	counts := map[string]int{
		"Workflow": len(c.workflows), "WorkflowTemplate": len(c.templates),
		"ClusterWorkflowTemplate": len(c.clusterTemplate), "CronWorkflow": len(c.cronWorkflows),
		"ServiceAccount": len(c.serviceAccounts), "Role": len(c.roles), "RoleBinding": len(c.roleBindings),
		"ClusterRole":   len(c.clusterRoles),
		"Kustomization": len(c.kustomizations), "job manifest": len(c.jobs),
	}
	for kind, n := range counts {
		if n == 0 {
			t.Errorf("no %s found under %v", kind, manifestDirs)
		}
	}
	t.Logf("parsed: %v", counts)
}

// The one cluster-wide grant the project ships, deploy/nodes/, lets the step
// read nodes and nothing else: no write, no other resource, no aggregation.
func TestTheOnlyClusterRoleReadsNodes(t *testing.T) {
	c := manifests(t)
	if len(c.clusterRoles) != 1 {
		t.Fatalf("ClusterRoles shipped: %d, want deploy/nodes/'s alone", len(c.clusterRoles))
	}
	for path, role := range c.clusterRoles {
		if role.AggregationRule != nil {
			t.Errorf("%s aggregates other roles", path)
		}
		for _, rule := range role.Rules {
			if len(rule.NonResourceURLs) > 0 || len(rule.ResourceNames) > 0 ||
				!slices.Equal(rule.APIGroups, []string{""}) || !slices.Equal(rule.Resources, []string{"nodes"}) {
				t.Errorf("%s: rule %+v reaches more than nodes", path, rule)
			}
			for _, verb := range rule.Verbs {
				if verb != "get" && verb != "list" && verb != "watch" {
					t.Errorf("%s: verb %q on nodes, want only get, list and watch", path, verb)
				}
			}
		}
	}
}

// The checks above must catch a broken file; these are the kinds of
// mistakes they exist for.
func TestManifestCheckRejectsBrokenFiles(t *testing.T) {
	cases := []struct{ name, doc, want string }{
		{"bad YAML", "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nspec:\n  entrypoint: [a\n", "parsing"},
		{"misspelled Workflow field", "apiVersion: argoproj.io/v1alpha1\nkind: Workflow\nspec:\n  entrypont: main\n", `unknown field "entrypont"`},
		{"wrong type in a Role", "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nrules: {verbs: get}\n", "decoding"},
		{"invalid TrainJob", "apiVersion: trainstep.dev/v1alpha1\nkind: TrainJob\nmetadata: {name: x}\nspec: {framework: caffe}\n", "loading the job"},
		{"unknown kind", "apiVersion: v1\nkind: Secret\n", "unknown kind"},
		{"misspelled setting", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: trainstep-policy}\ndata: {allowedSecret: x}\n", `unknown setting "allowedSecret"`},
		{"bad setting", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: trainstep-policy}\ndata: {podSecurity: privileged}\n", "podSecurity"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := newCatalog().add("broken.yaml", []byte(tc.doc))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want one containing %q", err, tc.want)
			}
		})
	}
}
