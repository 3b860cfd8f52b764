package cluster

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// credentials say who a kubeconfig acts as: a client certificate or a bearer token.
type credentials struct {
	certPEM, keyPEM []byte
	token           string
}

// writeKubeconfig writes a kubeconfig for server that trusts caPEM and acts with creds;
// namespace, when set, becomes the context's default namespace.
func writeKubeconfig(path, server string, caPEM []byte, creds credentials, namespace string) error {
	config := clientcmdapi.NewConfig()
	config.Clusters["trainstep-test"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	config.AuthInfos["trainstep-test"] = &clientcmdapi.AuthInfo{
		ClientCertificateData: creds.certPEM,
		ClientKeyData:         creds.keyPEM,
		Token:                 creds.token,
	}
	config.Contexts["trainstep-test"] = &clientcmdapi.Context{
		Cluster:   "trainstep-test",
		AuthInfo:  "trainstep-test",
		Namespace: namespace,
	}
	config.CurrentContext = "trainstep-test"
	if err := clientcmd.WriteToFile(*config, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}

// restConfigFor builds the client configuration a kubeconfig written by writeKubeconfig holds.
func restConfigFor(server string, caPEM []byte, creds credentials) *rest.Config {
	return &rest.Config{
		Host:        server,
		BearerToken: creds.token,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   caPEM,
			CertData: creds.certPEM,
			KeyData:  creds.keyPEM,
		},
		// Tests create many objects quickly; client-side throttling would only add waiting.
		QPS:   200,
		Burst: 400,
	}
}
