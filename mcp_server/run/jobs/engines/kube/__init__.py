"""The Kubernetes engine: a run is a batch/v1 Job in a namespace, driven through the API server
with the kubeconfig's credentials (the host's API connection, hosts/kube_api.py). No SSH, no
shell on a box, no run dir: so it keeps no JobEngine protocol and is not in ENGINES; the run
tools reach it through service.py when the host is a Kubernetes host."""
