package kubelet

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// TestAttachmentsWatchedOnlyOnceAsked: a kubelet's VolumeAttachment informer
// starts the first time a worker asks for an attachment, not with the
// kubelet: until then the kubelet neither lists nor watches them. Once
// started, it finds the attachments, and every attachment it sees wakes the
// workers, as the informer the kubelet started at once did.
func TestAttachmentsWatchedOnlyOnceAsked(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	w := &podWorker{uid: "u1", notify: make(chan struct{}, 1)}
	k := &Kubelet{cfg: Config{Client: client, NodeName: "node-1"}, log: slog.New(slog.DiscardHandler),
		workers: map[types.UID]*podWorker{"u1": w}}
	factory := informers.NewSharedInformerFactory(client, 0)
	defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers, which stop on ctx
	l := &lazyAttachments{k: k, ctx: ctx, factory: factory}

	pv := "pv-a"
	if _, err := client.StorageV1().VolumeAttachments().Create(ctx, &storagev1.VolumeAttachment{
		ObjectMeta: metav1.ObjectMeta{Name: "default.data-a"},
		Spec: storagev1.VolumeAttachmentSpec{Attacher: "podsafe.io/storage", NodeName: "node-1",
			Source: storagev1.VolumeAttachmentSource{PersistentVolumeName: &pv}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	time.Sleep(50 * time.Millisecond) // room for an informer that started on its own to list
	if verbs := attachmentVerbs(client); len(verbs) != 0 {
		t.Fatalf("before any worker asked: the kubelet made %v on volumeattachments, want nothing", verbs)
	}

	// The first Get starts the informer; the attachment is found once it
	// has listed, and listing it wakes the worker.
	var got *storagev1.VolumeAttachment
	if err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		va, err := l.Get("default.data-a")
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		got = va
		return err == nil, err
	}); err != nil {
		t.Fatalf("the attachment was never found: %v", err)
	}
	if got.Spec.NodeName != "node-1" {
		t.Errorf("attachment found for node %q, want node-1", got.Spec.NodeName)
	}
	if verbs := attachmentVerbs(client); !slices.Contains(verbs, "list") || !slices.Contains(verbs, "watch") {
		t.Errorf("after the first Get: verbs on volumeattachments %v, want a list and a watch", verbs)
	}
	select {
	case <-w.notify:
	case <-time.After(time.Minute):
		t.Fatal("the listed attachment woke no worker")
	}

	// A later change of an attachment wakes the workers too.
	got = got.DeepCopy()
	got.Status.Attached = true
	if _, err := client.StorageV1().VolumeAttachments().UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w.notify:
	case <-time.After(time.Minute):
		t.Fatal("an attachment's update woke no worker")
	}
	if vas, err := l.List(labels.Everything()); err != nil || len(vas) != 1 {
		t.Errorf("List: %d attachments, %v; want the one", len(vas), err)
	}
}

// attachmentVerbs are the verbs client was asked on volumeattachments.
func attachmentVerbs(client *fake.Clientset) []string {
	var out []string
	for _, a := range client.Actions() {
		if a.GetResource().Resource == "volumeattachments" {
			out = append(out, a.GetVerb())
		}
	}
	return out
}
