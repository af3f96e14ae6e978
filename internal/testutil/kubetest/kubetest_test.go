package kubetest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/hangar-dev/hangar/internal/testutil/kubetest"
)

func TestMain(m *testing.M) { kubetest.Main(m) }

func deployment(name string, podLabels map[string]string, progressDeadline int32) *appsv1.Deployment {
	one := int32(1)
	selector := map[string]string{"app": name}
	labels := map[string]string{"app": name}
	for k, v := range podLabels {
		labels[k] = v
	}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "main", Image: "registry.k8s.io/pause:3.10",
				}}},
			},
		},
	}
	if progressDeadline > 0 {
		d.Spec.ProgressDeadlineSeconds = &progressDeadline
	}
	return d
}

func condition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if d.Status.Conditions[i].Type == typ {
			return &d.Status.Conditions[i]
		}
	}
	return nil
}

func TestClusterRunsDeploymentsAndCrashLoops(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	ns := c.Namespace(t, "kubetest")
	deployments := c.Client.AppsV1().Deployments(ns)

	// A healthy Deployment becomes available.
	start := time.Now()
	if _, err := deployments.Create(ctx, deployment("web", nil, 0), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "web to have availableReplicas 1", func(ctx context.Context) error {
		d, err := deployments.Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas != 1 {
			return fmt.Errorf("availableReplicas %d, conditions %+v", d.Status.AvailableReplicas, d.Status.Conditions)
		}
		return nil
	})
	t.Logf("web available %v after creation", time.Since(start).Round(time.Millisecond))

	// A crash-looping one: its pod shows CrashLoopBackOff, and the Deployment passes its
	// progress deadline.
	start = time.Now()
	crash := deployment("crash", map[string]string{kubetest.CrashLoopLabel: "true"}, 5)
	if _, err := deployments.Create(ctx, crash, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "crash's pod to show CrashLoopBackOff", func(ctx context.Context) error {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=crash"})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d pods", len(pods.Items))
		}
		p := pods.Items[0]
		if len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("pod %s: phase %s, container statuses %+v", p.Name, p.Status.Phase, p.Status.ContainerStatuses)
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
			return fmt.Errorf("pod %s: container state %+v", p.Name, cs.State)
		}
		if p.Status.Phase != corev1.PodRunning || cs.Ready {
			return fmt.Errorf("pod %s: phase %s, ready %v; want Running and not ready", p.Name, p.Status.Phase, cs.Ready)
		}
		return nil
	})
	t.Logf("crash's pod in CrashLoopBackOff %v after creation", time.Since(start).Round(time.Millisecond))
	kubetest.Eventually(t, 60*time.Second, "crash to report ProgressDeadlineExceeded", func(ctx context.Context) error {
		d, err := deployments.Get(ctx, "crash", metav1.GetOptions{})
		if err != nil {
			return err
		}
		p := condition(d, appsv1.DeploymentProgressing)
		if p == nil || p.Status != corev1.ConditionFalse || p.Reason != "ProgressDeadlineExceeded" {
			return fmt.Errorf("conditions %+v", d.Status.Conditions)
		}
		if a := condition(d, appsv1.DeploymentAvailable); a == nil || a.Status != corev1.ConditionFalse {
			return fmt.Errorf("Available condition %+v, want False", a)
		}
		if d.Status.AvailableReplicas != 0 {
			return fmt.Errorf("availableReplicas %d, want 0", d.Status.AvailableReplicas)
		}
		return nil
	})
	t.Logf("crash ProgressDeadlineExceeded %v after creation", time.Since(start).Round(time.Millisecond))
}

func TestStartIsOncePerBinary(t *testing.T) {
	if a, b := kubetest.Start(t), kubetest.Start(t); a != b {
		t.Fatalf("Start returned two clusters: %s and %s", a.Kubeconfig, b.Kubeconfig)
	}
}

// Workspaces mount PersistentVolumeClaims that nothing provisions here: their pods still run
// (the scheduler's volume plugins are off), and a Service gets a cluster IP.
func TestClaimsAndServices(t *testing.T) {
	c := kubetest.Start(t)
	ctx := context.Background()
	ns := c.Namespace(t, "kubetest")

	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse("1Gi"),
			}},
		},
	}
	if _, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := deployment("claimer", nil, 0)
	d.Spec.Template.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"},
	}}}
	d.Spec.Template.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "claimer"},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "claimer"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80}},
		},
	}
	got, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Spec.ClusterIP == "" {
		t.Errorf("service has no cluster IP")
	}
	kubetest.Eventually(t, 60*time.Second, "claimer to have availableReplicas 1", func(ctx context.Context) error {
		d, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "claimer", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if d.Status.AvailableReplicas != 1 {
			return fmt.Errorf("availableReplicas %d, conditions %+v", d.Status.AvailableReplicas, d.Status.Conditions)
		}
		return nil
	})

	// Deleting the claim completes (the protection finalizer is lifted once no pod uses it).
	if err := c.Client.AppsV1().Deployments(ns).Delete(ctx, "claimer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "claim data to be gone", func(ctx context.Context) error {
		pvc, err := c.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return fmt.Errorf("claim still there: deletionTimestamp %v, finalizers %v", pvc.DeletionTimestamp, pvc.Finalizers)
	})
}
