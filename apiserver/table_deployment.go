package apiserver

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// deploymentPrinter is kube-apiserver's printDeployment: READY as ready of
// desired, UP-TO-DATE and AVAILABLE from the status, and under -o wide the
// template's containers and images and the selector.
var deploymentPrinter = tablePrinter{columns: []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: nameDoc},
	{Name: "Ready", Type: "string", Description: "Number of the pod with ready state"},
	{Name: "Up-to-date", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["updatedReplicas"]},
	{Name: "Available", Type: "string", Description: appsv1.DeploymentStatus{}.SwaggerDoc()["availableReplicas"]},
	{Name: "Age", Type: "string", Description: ageDoc},
	{Name: "Containers", Type: "string", Priority: 1, Description: containersDoc},
	{Name: "Images", Type: "string", Priority: 1, Description: imagesDoc},
	{Name: "Selector", Type: "string", Priority: 1, Description: appsv1.DeploymentSpec{}.SwaggerDoc()["selector"]},
}, cells: deploymentCells}

// deploymentCells is the row of one Deployment.
func deploymentCells(obj runtime.Object, now time.Time) ([]any, []metav1.TableRowCondition) {
	d := obj.(*appsv1.Deployment)
	desired := int32(1)
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	selector := "<invalid>"
	if sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector); err == nil {
		selector = sel.String()
	}
	names, images := containerCells(d.Spec.Template.Spec.Containers)
	return []any{d.Name, fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, desired), int64(d.Status.UpdatedReplicas),
		int64(d.Status.AvailableReplicas), age(d.CreationTimestamp, now), names, images, selector}, nil
}
