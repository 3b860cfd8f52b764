package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/trainstep/trainstep/pkg/replicapolicy"
	"github.com/trainstep/trainstep/pkg/result"
)

// policyFlags are the template author's settings: the flags of each
// setting and --policy-file, which names the same settings as the
// trainstep-policy ConfigMap holds them. Both are merged: lists add up,
// a switch is on if either turns it on, a flag's level or size wins.
type policyFlags struct {
	file         string
	flags        replicapolicy.Policy
	podSecurity  string
	maxSize      string
	ingressPorts []string
}

// maxPolicyFileBytes bounds the policy file (a ConfigMap holds at most 1 MiB).
const maxPolicyFileBytes = 1 << 20

func (f *policyFlags) register(fl *pflag.FlagSet) {
	p := &f.flags
	fl.StringVar(&f.file, "policy-file", "", "the template author's settings: a directory holding one file per setting (the "+replicapolicy.ConfigMapName+
		" ConfigMap mounted) or a YAML file of them (that ConfigMap's manifest, or its data); flags add to them (see docs/security.md)")
	fl.BoolVar(&p.AllowPrivileged, "allow-privileged", false, "let replicas be privileged, use the host's network, PID or IPC namespace, hostPath volumes, host ports, capabilities beyond NET_BIND_SERVICE, "+
		"allowPrivilegeEscalation, nodeName and control-plane tolerations: such a replica can take over its node (for device or RDMA setups that need it; see docs/security.md)")
	fl.StringSliceVar(&p.ServiceAccounts, "allowed-service-accounts", nil, "ServiceAccounts a replica may name in serviceAccountName besides the namespace's default (comma-separated, repeatable); set by the template author")
	lists := []struct {
		into *[]string
		s    replicapolicy.Setting
		what string
	}{
		{&p.Secrets, replicapolicy.SettingSecrets, "Secrets a replica may mount, read (envFrom, secretKeyRef) or pull images with, besides its job's own"},
		{&p.ConfigMaps, replicapolicy.SettingConfigMaps, "ConfigMaps a replica may mount or read besides its job's own and kube-root-ca.crt"},
		{&p.PVCs, replicapolicy.SettingPVCs, "PersistentVolumeClaims a replica may mount, and ephemeral volumes' data sources (another kind than a claim as Kind/name)"},
		{&p.CSIDrivers, replicapolicy.SettingCSIDrivers, "CSI drivers a replica's inline csi volumes may use"},
		{&p.VolumeTypes, replicapolicy.SettingVolumeTypes, "volume kinds besides emptyDir, configMap, secret, downwardAPI, projected, persistentVolumeClaim, ephemeral (e.g. nfs)"},
		{&p.PriorityClasses, replicapolicy.SettingPriorityClasses, "priority classes of priorityClassName and schedulingPolicy.priorityClass (system-* only by exact name)"},
		{&p.RuntimeClasses, replicapolicy.SettingRuntimeClasses, "runtime classes a replica's runtimeClassName may name"},
		{&p.Schedulers, replicapolicy.SettingSchedulers, "schedulers a replica's schedulerName may name besides default-scheduler and its gang's"},
		{&p.NetworkPolicy.Ingress.Namespaces, replicapolicy.SettingIngressNamespaces, "namespaces whose pods the job's NetworkPolicy admits to the replicas (e.g. monitoring)"},
	}
	for _, l := range lists {
		fl.StringSliceVar(l.into, strings.TrimPrefix(l.s.Flag, "--"), nil, l.what+"; names or patterns with * (comma-separated, repeatable); set by the template author")
	}
	fl.StringSliceVar(&f.ingressPorts, strings.TrimPrefix(replicapolicy.SettingIngressPorts.Flag, "--"), nil,
		"ports (number or container port name) of the replicas those namespaces are admitted to; default every port")
	fl.StringVar(&f.podSecurity, strings.TrimPrefix(replicapolicy.SettingPodSecurity.Flag, "--"), "", "PodSecurity level every rendered replica pod must pass: baseline or restricted (default baseline)")
	fl.StringVar(&f.maxSize, strings.TrimPrefix(replicapolicy.SettingMaxRenderedSize.Flag, "--"), "",
		"bound on the job's rendered objects as JSON, a quantity (default 64Mi: 4096 pods of 16 KiB)")
}

// resolve reads --policy-file and merges the flags into it.
func (f *policyFlags) resolve() (replicapolicy.Policy, []string, error) {
	invalid := func(err error) error { return result.Invalid(result.ReasonInvalidArguments, err) }
	flags := f.flags
	var err error
	if flags.PodSecurity, err = parseFlagLevel(f.podSecurity); err != nil {
		return replicapolicy.Policy{}, nil, invalid(err)
	}
	if flags.MaxRenderedBytes, err = replicapolicy.ParseSize(f.maxSize); err != nil {
		return replicapolicy.Policy{}, nil, invalid(fmt.Errorf("%s: %w", replicapolicy.SettingMaxRenderedSize.Flag, err))
	}
	if flags.NetworkPolicy.Ingress.Ports, err = replicapolicy.ParsePorts(f.ingressPorts); err != nil {
		return replicapolicy.Policy{}, nil, invalid(fmt.Errorf("%s: %w", replicapolicy.SettingIngressPorts.Flag, err))
	}
	var file replicapolicy.Policy
	var warnings []string
	if f.file != "" {
		data, err := readPolicyFile(f.file)
		if err != nil {
			return replicapolicy.Policy{}, nil, invalid(fmt.Errorf("--policy-file: %w", err))
		}
		if file, warnings, err = replicapolicy.ParseSettings(data, "--policy-file "+f.file); err != nil {
			return replicapolicy.Policy{}, warnings, invalid(err)
		}
	}
	merged := file.Merge(flags)
	if err := merged.Validate(); err != nil {
		return replicapolicy.Policy{}, warnings, invalid(err)
	}
	return merged, warnings, nil
}

func parseFlagLevel(value string) (replicapolicy.Level, error) {
	if value == "" {
		return "", nil
	}
	level, err := replicapolicy.ParseLevel(value)
	if err != nil {
		return "", fmt.Errorf("%s: %w", replicapolicy.SettingPodSecurity.Flag, err)
	}
	return level, nil
}

// readPolicyFile reads the settings at path: a directory of one file per
// key, as the kubelet mounts a ConfigMap (its ..data entries skipped; an
// optional ConfigMap that does not exist mounts as an empty directory, the
// strictest settings), or a YAML file holding the ConfigMap or its data.
func readPolicyFile(path string) (map[string]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return readPolicyYAML(path, info.Size())
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	data := map[string]string{}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		file := filepath.Join(path, e.Name())
		if st, err := os.Stat(file); err != nil || st.IsDir() || st.Size() > maxPolicyFileBytes {
			return nil, fmt.Errorf("%s is not a setting's file", file)
		}
		value, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		data[e.Name()] = string(value)
	}
	return data, nil
}

// readPolicyYAML reads a ConfigMap manifest's data, or a map of settings;
// a list value is one entry per item, a scalar is its text.
func readPolicyYAML(path string, size int64) (map[string]string, error) {
	if size > maxPolicyFileBytes {
		return nil, fmt.Errorf("%s is %d bytes, larger than a ConfigMap may be", path, size)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if kind, _ := doc["kind"].(string); kind == "ConfigMap" {
		inner, _ := doc["data"].(map[string]any)
		doc = inner
	}
	data := map[string]string{}
	keys := make([]string, 0, len(doc))
	for k := range doc {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch v := doc[k].(type) {
		case nil:
			data[k] = ""
		case []any:
			items := make([]string, len(v))
			for i, item := range v {
				items[i] = fmt.Sprint(item)
			}
			data[k] = strings.Join(items, ",")
		case float64:
			data[k] = strconv.FormatFloat(v, 'f', -1, 64)
		case map[string]any:
			return nil, errors.New(path + ": " + k + " is an object, not a setting's value")
		default:
			data[k] = fmt.Sprint(v)
		}
	}
	return data, nil
}
