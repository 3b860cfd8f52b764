package replicapolicy

import (
	"fmt"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SafeVolumeTypes are the volume kinds that carry no other tenant's data
// by themselves: what they hold is the pod's own (emptyDir, downwardAPI),
// or comes from an object the lists below allow (a Secret, a ConfigMap, a
// claim). PodSecurity `restricted` allows these and csi, which trainstep
// allows by driver.
var SafeVolumeTypes = []string{"emptyDir", "configMap", "secret", "downwardAPI", "projected", "persistentVolumeClaim", "ephemeral"}

// volumeKind is the kind of a volume: the JSON name of its one source
// (nfs, hostPath, csi, …), "" when it has none.
func volumeKind(v *corev1.Volume) string {
	source := reflect.ValueOf(v.VolumeSource)
	for i := 0; i < source.NumField(); i++ {
		if f := source.Field(i); f.Kind() == reflect.Pointer && !f.IsNil() {
			name, _, _ := strings.Cut(source.Type().Field(i).Tag.Get("json"), ",")
			return name
		}
	}
	return ""
}

// checkVolumes holds each volume to the safe kinds, and what it mounts to
// the lists: Secrets, ConfigMaps, claims, CSI drivers, ephemeral volumes'
// data sources.
func checkVolumes(pod *corev1.PodSpec, path *field.Path, p Policy, own ownNames) field.ErrorList {
	var errs field.ErrorList
	for i := range pod.Volumes {
		v := &pod.Volumes[i]
		vp := path.Child("volumes").Index(i)
		kind := volumeKind(v)
		switch {
		case kind == "hostPath":
			// The host checks' (--allow-privileged).
		case kind == "csi":
			errs = append(errs, checkCSI(v.CSI, vp.Child("csi"), p, own)...)
		case !contains(SafeVolumeTypes, kind) && !Matches(p.VolumeTypes, kind):
			errs = append(errs, field.Forbidden(vp.Child(kind), fmt.Sprintf(
				"a %s volume may reach data outside the job; a replica may use %s volumes, csi by driver, and the kinds the template author lists with %s (%s)",
				kind, strings.Join(SafeVolumeTypes, ", "), SettingVolumeTypes.how(), describe(p.VolumeTypes))))
		}
		errs = append(errs, checkVolumeObjects(v, vp, p, own)...)
	}
	return errs
}

// checkVolumeObjects checks the Secrets, ConfigMaps and claims a volume
// reads, whatever its kind.
func checkVolumeObjects(v *corev1.Volume, vp *field.Path, p Policy, own ownNames) field.ErrorList {
	var errs field.ErrorList
	if s := v.Secret; s != nil {
		errs = append(errs, checkSecret(s.SecretName, vp.Child("secret", "secretName"), p, own)...)
	}
	if c := v.ConfigMap; c != nil {
		errs = append(errs, checkConfigMap(c.Name, vp.Child("configMap", "name"), p, own)...)
	}
	if pr := v.Projected; pr != nil {
		for j, src := range pr.Sources {
			sp := vp.Child("projected", "sources").Index(j)
			if src.Secret != nil {
				errs = append(errs, checkSecret(src.Secret.Name, sp.Child("secret", "name"), p, own)...)
			}
			if src.ConfigMap != nil {
				errs = append(errs, checkConfigMap(src.ConfigMap.Name, sp.Child("configMap", "name"), p, own)...)
			}
		}
	}
	if c := v.PersistentVolumeClaim; c != nil {
		errs = append(errs, checkClaim(c.ClaimName, vp.Child("persistentVolumeClaim", "claimName"), p)...)
	}
	if e := v.Ephemeral; e != nil && e.VolumeClaimTemplate != nil {
		spec := &e.VolumeClaimTemplate.Spec
		tp := vp.Child("ephemeral", "volumeClaimTemplate", "spec")
		if ds := spec.DataSource; ds != nil {
			errs = append(errs, checkClaim(dataSourceName(ds.Kind, ds.Name), tp.Child("dataSource", "name"), p)...)
		}
		if ds := spec.DataSourceRef; ds != nil {
			errs = append(errs, checkClaim(dataSourceName(ds.Kind, ds.Name), tp.Child("dataSourceRef", "name"), p)...)
		}
	}
	for kind, name := range volumeSecretRefs(&v.VolumeSource) {
		errs = append(errs, checkSecret(name, vp.Child(kind, "secretRef", "name"), p, own)...)
	}
	return errs
}

// volumeSecretRefs are the Secrets of the volume kinds outside the safe set
// that log in with one, by kind: allowing the kind does not allow the Secret.
func volumeSecretRefs(v *corev1.VolumeSource) map[string]string {
	refs := map[string]string{}
	add := func(kind string, ref *corev1.LocalObjectReference) {
		if ref != nil && ref.Name != "" {
			refs[kind] = ref.Name
		}
	}
	if v.CephFS != nil {
		add("cephfs", v.CephFS.SecretRef)
	}
	if v.RBD != nil {
		add("rbd", v.RBD.SecretRef)
	}
	if v.ISCSI != nil {
		add("iscsi", v.ISCSI.SecretRef)
	}
	if v.FlexVolume != nil {
		add("flexVolume", v.FlexVolume.SecretRef)
	}
	if v.ScaleIO != nil {
		add("scaleIO", v.ScaleIO.SecretRef)
	}
	if v.StorageOS != nil {
		add("storageos", v.StorageOS.SecretRef)
	}
	if v.AzureFile != nil && v.AzureFile.SecretName != "" {
		refs["azureFile"] = v.AzureFile.SecretName
	}
	return refs
}

// dataSourceName is how the PVC list names a data source: a claim by its
// name, another kind as Kind/name.
func dataSourceName(kind, name string) string {
	if kind == "" || kind == "PersistentVolumeClaim" {
		return name
	}
	return kind + "/" + name
}

func checkCSI(csi *corev1.CSIVolumeSource, path *field.Path, p Policy, own ownNames) field.ErrorList {
	var errs field.ErrorList
	if !Matches(p.CSIDrivers, csi.Driver) {
		errs = append(errs, field.Forbidden(path.Child("driver"), fmt.Sprintf(
			"CSI driver %q is not allowed: an inline CSI volume may mount any data its driver reaches; the template author allows drivers with %s (%s)",
			csi.Driver, SettingCSIDrivers.how(), describe(p.CSIDrivers))))
	}
	if ref := csi.NodePublishSecretRef; ref != nil {
		errs = append(errs, checkSecret(ref.Name, path.Child("nodePublishSecretRef", "name"), p, own)...)
	}
	return errs
}

// checkEnvReferences checks the Secrets and ConfigMaps each container
// reads into its environment (envFrom, valueFrom).
func checkEnvReferences(pod *corev1.PodSpec, path *field.Path, p Policy, own ownNames) field.ErrorList {
	var errs field.ErrorList
	visitContainers(pod, path, func(c *corev1.Container, cp *field.Path) {
		for j, from := range c.EnvFrom {
			fp := cp.Child("envFrom").Index(j)
			if from.SecretRef != nil {
				errs = append(errs, checkSecret(from.SecretRef.Name, fp.Child("secretRef", "name"), p, own)...)
			}
			if from.ConfigMapRef != nil {
				errs = append(errs, checkConfigMap(from.ConfigMapRef.Name, fp.Child("configMapRef", "name"), p, own)...)
			}
		}
		for j, env := range c.Env {
			if env.ValueFrom == nil {
				continue
			}
			vp := cp.Child("env").Index(j).Child("valueFrom")
			if ref := env.ValueFrom.SecretKeyRef; ref != nil {
				errs = append(errs, checkSecret(ref.Name, vp.Child("secretKeyRef", "name"), p, own)...)
			}
			if ref := env.ValueFrom.ConfigMapKeyRef; ref != nil {
				errs = append(errs, checkConfigMap(ref.Name, vp.Child("configMapKeyRef", "name"), p, own)...)
			}
		}
	})
	return errs
}

func checkSecret(name string, path *field.Path, p Policy, own ownNames) field.ErrorList {
	if contains(own.secrets, name) || Matches(p.Secrets, name) {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
		"Secret %q is neither the job's own (%s) nor allowed: the template author allows Secrets by name or pattern with %s (%s)",
		name, strings.Join(own.secrets, ", "), SettingSecrets.how(), describe(p.Secrets)))}
}

func checkConfigMap(name string, path *field.Path, p Policy, own ownNames) field.ErrorList {
	if contains(own.configMaps, name) || Matches(p.ConfigMaps, name) {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
		"ConfigMap %q is neither the job's own (%s) nor allowed: the template author allows ConfigMaps by name or pattern with %s (%s)",
		name, strings.Join(own.configMaps, ", "), SettingConfigMaps.how(), describe(p.ConfigMaps)))}
}

func checkClaim(name string, path *field.Path, p Policy) field.ErrorList {
	if Matches(p.PVCs, name) {
		return nil
	}
	return field.ErrorList{field.Forbidden(path, fmt.Sprintf(
		"PersistentVolumeClaim %q is not allowed: a claim may hold another team's data; the template author allows claims (and other data sources as Kind/name) by name or pattern with %s (%s)",
		name, SettingPVCs.how(), describe(p.PVCs)))}
}
