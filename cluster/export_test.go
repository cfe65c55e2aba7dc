package cluster

// SetKubeletStartWave sets how many kubelets register at once as a cluster
// starts, and returns the function that restores it.
func SetKubeletStartWave(n int) (restore func()) {
	old := kubeletStartWave
	kubeletStartWave = n
	return func() { kubeletStartWave = old }
}
