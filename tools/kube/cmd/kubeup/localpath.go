package main

// A local-path provisioner for the test cluster: each PersistentVolumeClaim of the storage class
// hangar-local gets a folder under DIR/volumes and a hostPath PersistentVolume pinned to the node
// the scheduler picked (the class binds WaitForFirstConsumer). A volume released by its claim is
// deleted with its folder, so a deleted workspace leaves no data on the node.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
)

const (
	annSelectedNode  = "volume.kubernetes.io/selected-node"
	annProvisionedBy = "pv.kubernetes.io/provisioned-by"
)

func storageClassObject() *storagev1.StorageClass {
	bind := storagev1.VolumeBindingWaitForFirstConsumer
	reclaim := corev1.PersistentVolumeReclaimDelete
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        storageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:       provisioner,
		VolumeBindingMode: &bind,
		ReclaimPolicy:     &reclaim,
	}
}

type localPath struct {
	client kubernetes.Interface
	root   string // DIR/volumes
	pvcs   cache.Indexer
	pvs    cache.Indexer
	queue  workqueue.TypedRateLimitingInterface[string]
}

// cmdLocalPath serves `kubeup local-path -dir DIR -kubeconfig FILE`.
func cmdLocalPath(args []string) error {
	fs := flag.NewFlagSet("local-path", flag.ExitOnError)
	dir := fs.String("dir", "", "cluster directory; volumes go under DIR/volumes")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig")
	_ = fs.Parse(args)
	if *dir == "" || *kubeconfig == "" {
		return errors.New("local-path: -dir and -kubeconfig are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	f := informers.NewSharedInformerFactory(client, 10*time.Minute)
	pvcInf := f.Core().V1().PersistentVolumeClaims().Informer()
	pvInf := f.Core().V1().PersistentVolumes().Informer()
	lp := &localPath{
		client: client, root: filepath.Join(*dir, "volumes"),
		pvcs: pvcInf.GetIndexer(), pvs: pvInf.GetIndexer(),
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
	enqueue := func(prefix string) cache.ResourceEventHandlerFuncs {
		add := func(obj any) {
			if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				lp.queue.Add(prefix + key)
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
	}
	if _, err := pvcInf.AddEventHandler(enqueue("pvc/")); err != nil {
		return err
	}
	if _, err := pvInf.AddEventHandler(enqueue("pv/")); err != nil {
		return err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	fmt.Fprintf(os.Stderr, "local-path: provisioning %s volumes under %s\n", storageClass, lp.root)
	for range 4 {
		go lp.work(ctx)
	}
	<-ctx.Done()
	lp.queue.ShutDown()
	return nil
}

func (lp *localPath) work(ctx context.Context) {
	for {
		key, quit := lp.queue.Get()
		if quit {
			return
		}
		var err error
		if k, ok := strings.CutPrefix(key, "pvc/"); ok {
			err = lp.syncClaim(ctx, k)
		} else if k, ok := strings.CutPrefix(key, "pv/"); ok {
			err = lp.syncVolume(ctx, k)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "local-path: %s: %v (retrying)\n", key, err)
			lp.queue.AddRateLimited(key)
		} else {
			lp.queue.Forget(key)
		}
		lp.queue.Done(key)
	}
}

func (lp *localPath) syncClaim(ctx context.Context, key string) error {
	obj, ok, err := lp.pvcs.GetByKey(key)
	if err != nil || !ok {
		return err
	}
	pvc := obj.(*corev1.PersistentVolumeClaim)
	if pvc.Spec.VolumeName != "" || pvc.DeletionTimestamp != nil || pvc.Spec.StorageClassName == nil ||
		*pvc.Spec.StorageClassName != storageClass {
		return nil
	}
	node := pvc.Annotations[annSelectedNode]
	if node == "" {
		return nil // not scheduled yet (WaitForFirstConsumer)
	}
	if pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return fmt.Errorf("claim %s asks for a block volume; %s serves filesystems only", key, storageClass)
	}
	name := "pvc-" + string(pvc.UID)
	path := filepath.Join(lp.root, pvc.Namespace+"_"+pvc.Name+"_"+string(pvc.UID)[:8])
	if err := os.MkdirAll(path, 0o777); err != nil {
		return err
	}
	// Workspaces run as a non-root user: the folder must be theirs to write, as with any
	// local-path provisioner (the kubelet does not chown hostPath volumes).
	if err := os.Chmod(path, 0o777); err != nil {
		return err
	}
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{annProvisionedBy: provisioner},
		},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: pvc.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   pvc.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              storageClass,
			ClaimRef: &corev1.ObjectReference{
				Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID,
			},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &dirOrCreate},
			},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}}}},
			}},
		},
	}
	if len(pv.Spec.AccessModes) == 0 {
		pv.Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	}
	_, err = lp.client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func (lp *localPath) syncVolume(ctx context.Context, key string) error {
	obj, ok, err := lp.pvs.GetByKey(key)
	if err != nil || !ok {
		return err
	}
	pv := obj.(*corev1.PersistentVolume)
	if pv.Annotations[annProvisionedBy] != provisioner || pv.DeletionTimestamp != nil ||
		pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		return nil
	}
	if pv.Status.Phase != corev1.VolumeReleased && pv.Status.Phase != corev1.VolumeFailed {
		return nil
	}
	if hp := pv.Spec.HostPath; hp != nil {
		// Only folders this provisioner made: under DIR/volumes, one level down.
		if filepath.Dir(hp.Path) != lp.root {
			return fmt.Errorf("volume %s: %s is not under %s: not deleting it", pv.Name, hp.Path, lp.root)
		}
		if err := os.RemoveAll(hp.Path); err != nil {
			return err
		}
	}
	err = lp.client.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
