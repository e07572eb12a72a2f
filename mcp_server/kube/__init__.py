"""The Kubernetes engine: a run is a batch/v1 Job in a namespace, driven through the API server
with the kubeconfig's credentials (lightkube's async client). No SSH, no shell on a box."""
