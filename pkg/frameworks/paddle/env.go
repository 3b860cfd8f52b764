package paddle

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/trainstep/trainstep/pkg/apis/trainstep/v1alpha1"
	"github.com/trainstep/trainstep/pkg/frameworks/framework"
)

// Paddle's environment, as the Training Operator v1.9 sets it
// (paddlepaddle/envvar.go), read by `python -m paddle.distributed.launch`.
const (
	// EnvMaster is the rendezvous endpoint, host:port.
	EnvMaster = "PADDLE_MASTER"
	// EnvNnodes is every replica of the job.
	EnvNnodes = "PADDLE_NNODES"
	// EnvJobID is the job's name.
	EnvJobID = "PADDLE_JOB_ID"
	// EnvServerNum and EnvTrainerNum say, in parameter-server mode, that a
	// Master pod runs one server and a Worker pod one trainer.
	EnvServerNum  = "PADDLE_SERVER_NUM"
	EnvTrainerNum = "PADDLE_TRAINER_NUM"
	// EnvPodIP holds the pod's own IP on the replica that hosts the
	// rendezvous, which PADDLE_MASTER names as $(POD_IP_DUMMY):<port>.
	EnvPodIP = "POD_IP_DUMMY"
)

// Prepare implements framework.Framework: the rendezvous is hosted by
// Master 0 in parameter-server mode, else by Worker 0, on its port.
func (Framework) Prepare(job *v1alpha1.TrainJob, at framework.Placement) (framework.PodConfigurer, error) {
	host := v1alpha1.ReplicaTypeWorker
	if psMode(job) {
		host = v1alpha1.ReplicaTypeMaster
	}
	port := conventions.PortOf(job, host)
	return paddlePods{
		jobID:  at.JobName,
		nnodes: framework.Itoa(framework.Total(job)),
		host:   host,
		ps:     psMode(job),
		self:   fmt.Sprintf("$(%s):%d", EnvPodIP, port),
		master: fmt.Sprintf("%s:%d", framework.PeerHost(job, at, host, 0), port),
	}, nil
}

// paddlePods sets the Paddle variables on every container of a pod.
type paddlePods struct {
	jobID, nnodes string
	// host is the type whose replica 0 hosts the rendezvous.
	host v1alpha1.ReplicaType
	ps   bool
	// self is PADDLE_MASTER on the host, master on every other replica.
	self, master string
}

func (p paddlePods) ConfigurePod(replica framework.ReplicaRef, spec *corev1.PodSpec) error {
	env := []corev1.EnvVar{
		framework.EnvVar(framework.EnvPythonUnbuffered, "1"),
		framework.EnvVar(EnvJobID, p.jobID),
		framework.EnvVar(EnvNnodes, p.nnodes),
	}
	if replica.Type == p.host && replica.Index == 0 {
		env = append(env,
			corev1.EnvVar{Name: EnvPodIP, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			framework.EnvVar(EnvMaster, p.self))
	} else {
		env = append(env, framework.EnvVar(EnvMaster, p.master))
	}
	if p.ps {
		// Each pod runs one server (Master) or one trainer (Worker).
		if replica.Type == v1alpha1.ReplicaTypeMaster {
			env = append(env, framework.EnvVar(EnvServerNum, "1"))
		} else {
			env = append(env, framework.EnvVar(EnvTrainerNum, "1"))
		}
	}
	for i := range spec.Containers {
		// Each container gets its own copy: a FieldRef is a pointer.
		for _, v := range env {
			if v.ValueFrom != nil {
				v.ValueFrom = v.ValueFrom.DeepCopy()
			}
			spec.Containers[i].Env = append(spec.Containers[i].Env, v)
		}
	}
	return nil
}
