package replicapolicy

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ConfigMapName is the ConfigMap that holds a namespace's settings: the
// templates mount it into the step (--policy-file) and the shipped
// ValidatingAdmissionPolicy reads it as its parameter, so that the step and
// the API server hold replicas to the same lists.
const ConfigMapName = "trainstep-policy"

// Setting is one template-author setting: a command-line flag of `run`,
// `validate` and `render`, and the key of the trainstep-policy ConfigMap
// that sets the same.
type Setting struct {
	Flag, Key string
}

// how names the setting in an error: the flag and the ConfigMap key.
func (s Setting) how() string {
	return s.Flag + " (" + s.Key + " in the " + ConfigMapName + " ConfigMap)"
}

// The settings. Lists are comma- or newline-separated.
var (
	SettingAllowPrivileged   = Setting{"--allow-privileged", "allowPrivileged"}
	SettingServiceAccounts   = Setting{"--allowed-service-accounts", "allowedServiceAccounts"}
	SettingSecrets           = Setting{"--allowed-secrets", "allowedSecrets"}
	SettingConfigMaps        = Setting{"--allowed-configmaps", "allowedConfigMaps"}
	SettingPVCs              = Setting{"--allowed-pvcs", "allowedPVCs"}
	SettingCSIDrivers        = Setting{"--allowed-csi-drivers", "allowedCSIDrivers"}
	SettingVolumeTypes       = Setting{"--allowed-volume-types", "allowedVolumeTypes"}
	SettingPriorityClasses   = Setting{"--allowed-priority-classes", "allowedPriorityClasses"}
	SettingRuntimeClasses    = Setting{"--allowed-runtime-classes", "allowedRuntimeClasses"}
	SettingSchedulers        = Setting{"--allowed-schedulers", "allowedSchedulers"}
	SettingPodSecurity       = Setting{"--pod-security", "podSecurity"}
	SettingMaxRenderedSize   = Setting{"--max-rendered-size", "maxRenderedSize"}
	SettingNetworkPolicy     = Setting{"--network-policy", "networkPolicy"}
	SettingIngressNamespaces = Setting{"--network-policy-ingress-namespaces", "networkPolicyIngressNamespaces"}
	SettingIngressPorts      = Setting{"--network-policy-ingress-ports", "networkPolicyIngressPorts"}
)

// Level is a PodSecurity level.
type Level string

// The PodSecurity levels a job's pods may be held to.
const (
	LevelBaseline   Level = "baseline"
	LevelRestricted Level = "restricted"
)

// DefaultMaxRenderedBytes bounds a job's rendered objects unless the
// template author says otherwise: 4096 pods of 16 KiB as stored. A pod of
// the examples takes about 1 KiB.
const DefaultMaxRenderedBytes int64 = 64 << 20

// listSettings are the list settings and the Policy field each fills.
func listSettings(p *Policy) map[Setting]*[]string {
	return map[Setting]*[]string{
		SettingServiceAccounts:   &p.ServiceAccounts,
		SettingSecrets:           &p.Secrets,
		SettingConfigMaps:        &p.ConfigMaps,
		SettingPVCs:              &p.PVCs,
		SettingCSIDrivers:        &p.CSIDrivers,
		SettingVolumeTypes:       &p.VolumeTypes,
		SettingPriorityClasses:   &p.PriorityClasses,
		SettingRuntimeClasses:    &p.RuntimeClasses,
		SettingSchedulers:        &p.Schedulers,
		SettingIngressNamespaces: &p.NetworkPolicy.Ingress.Namespaces,
	}
}

// ParseSettings reads the trainstep-policy ConfigMap's keys into a Policy.
// A key it does not know is returned as a warning (a newer trainstep's
// setting, or a typo), never applied. where names the source in errors.
func ParseSettings(data map[string]string, where string) (Policy, []string, error) {
	var p Policy
	lists := listSettings(&p)
	byKey := map[string]Setting{}
	for s := range lists {
		byKey[s.Key] = s
	}
	var warnings []string
	for _, key := range sortedKeys(data) {
		value := strings.TrimSpace(data[key])
		if s, ok := byKey[key]; ok {
			*lists[s] = SplitList(value)
			continue
		}
		var err error
		switch key {
		case SettingAllowPrivileged.Key:
			p.AllowPrivileged, err = parseBool(value)
		case SettingPodSecurity.Key:
			p.PodSecurity, err = ParseLevel(value)
		case SettingMaxRenderedSize.Key:
			p.MaxRenderedBytes, err = ParseSize(value)
		case SettingNetworkPolicy.Key:
			var on bool
			on, err = parseBool(value)
			p.NetworkPolicy.Disabled = !on && value != ""
		case SettingIngressPorts.Key:
			p.NetworkPolicy.Ingress.Ports, err = ParsePorts(SplitList(value))
		default:
			warnings = append(warnings, fmt.Sprintf("%s: unknown setting %q, ignored (known: %s)", where, key, strings.Join(knownKeys(), ", ")))
		}
		if err != nil {
			return Policy{}, warnings, fmt.Errorf("%s: %s: %w", where, key, err)
		}
	}
	return p, warnings, nil
}

// Merge returns p with the lists of q added and its switches on where q's
// are; PodSecurity, MaxRenderedBytes and the NetworkPolicy's Disabled are
// q's where q sets them (command-line flags over the ConfigMap).
func (p Policy) Merge(q Policy) Policy {
	out := p
	for s, list := range listSettings(&out) {
		*list = appendNew(*list, *listSettings(&q)[s]...)
	}
	out.NetworkPolicy.Ingress.Ports = append(append([]intstr.IntOrString{}, p.NetworkPolicy.Ingress.Ports...), q.NetworkPolicy.Ingress.Ports...)
	out.AllowPrivileged = p.AllowPrivileged || q.AllowPrivileged
	out.Local = p.Local || q.Local
	if q.PodSecurity != "" {
		out.PodSecurity = q.PodSecurity
	}
	if q.MaxRenderedBytes != 0 {
		out.MaxRenderedBytes = q.MaxRenderedBytes
	}
	out.NetworkPolicy.Disabled = p.NetworkPolicy.Disabled || q.NetworkPolicy.Disabled
	return out
}

// Validate checks the settings that only make sense together.
func (p Policy) Validate() error {
	in := p.NetworkPolicy.Ingress
	if len(in.Ports) > 0 && len(in.Namespaces) == 0 {
		return fmt.Errorf("%s names ports but %s names no namespace to admit to them", SettingIngressPorts.how(), SettingIngressNamespaces.how())
	}
	if (len(in.Namespaces) > 0) && p.NetworkPolicy.Disabled {
		return fmt.Errorf("%s admits namespaces to the job's NetworkPolicy, which %s=false turns off", SettingIngressNamespaces.how(), SettingNetworkPolicy.Flag)
	}
	return nil
}

// SplitList splits a list setting at commas and newlines, trimming each
// entry and dropping empty ones.
func SplitList(value string) []string {
	var out []string
	for _, line := range strings.Split(value, "\n") {
		for _, item := range strings.Split(line, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
	}
	return out
}

// ParseLevel reads a PodSecurity level; empty is baseline.
func ParseLevel(value string) (Level, error) {
	switch Level(value) {
	case "", LevelBaseline:
		return LevelBaseline, nil
	case LevelRestricted:
		return LevelRestricted, nil
	}
	return "", fmt.Errorf("%q is not a PodSecurity level trainstep holds pods to: baseline or restricted", value)
}

// ParseSize reads a size as a Kubernetes quantity (64Mi, 100M, 1048576).
func ParseSize(value string) (int64, error) {
	if value == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(value)
	if err != nil || q.Sign() <= 0 {
		return 0, fmt.Errorf("%q is not a positive size such as 64Mi", value)
	}
	return q.Value(), nil
}

// ParsePorts reads ports by number (9090) or by a container port's name
// (metrics).
func ParsePorts(values []string) ([]intstr.IntOrString, error) {
	var out []intstr.IntOrString
	for _, v := range values {
		port := intstr.Parse(v)
		if port.Type == intstr.Int && (port.IntVal < 1 || port.IntVal > 65535) {
			return nil, fmt.Errorf("port %s is not from 1 to 65535", v)
		}
		out = append(out, port)
	}
	return out, nil
}

func parseBool(value string) (bool, error) {
	if value == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(value)
	if err != nil {
		return false, fmt.Errorf("%q is not true or false", value)
	}
	return b, nil
}

// knownKeys lists every ConfigMap key, sorted.
func knownKeys() []string {
	keys := []string{SettingAllowPrivileged.Key, SettingPodSecurity.Key, SettingMaxRenderedSize.Key, SettingNetworkPolicy.Key, SettingIngressPorts.Key}
	for s := range listSettings(&Policy{}) {
		keys = append(keys, s.Key)
	}
	sort.Strings(keys)
	return keys
}

func appendNew(list []string, more ...string) []string {
	out := append([]string{}, list...)
	for _, m := range more {
		if !contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
