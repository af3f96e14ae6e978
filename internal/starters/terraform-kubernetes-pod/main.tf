# A Terraform workspace whose machine is one pod on a Kubernetes cluster. The pod runs
# hangar_agent's init script as its process: the helper connects out to the Hangar server
# (hangar server --access-url must be an address the pod reaches), and `hangar ssh`,
# `hangar port-forward` and `hangar config-ssh` reach the pod through the server.
#
#   hangar templates push my-pods --directory .
#   hangar create dev --template my-pods --parameter kubeconfig="$(cat DIR/kubeconfig)" --wait   # scripts/kube-up DIR
#   hangar ssh dev
#
# Stopping the workspace deletes the pod (its home directory with it); starting it creates a new
# one. Everything runs through Hangar's own provider, which every provisioner offers offline.

terraform {
  required_providers {
    hangar = { source = "hangar.dev/hangar/hangar" }
  }
}

variable "kubeconfig" {
  type        = string
  sensitive   = true
  description = "The content of a kubeconfig allowed to create pods and secrets in the namespace (the local cluster's: DIR/kubeconfig of scripts/kube-up DIR)."
}

variable "namespace" {
  type        = string
  default     = "default"
  description = "The namespace of the workspace's pod."
}

variable "image" {
  type        = string
  default     = "hangar.local/hangar:dev"
  description = "The pod's image: /bin/sh and hangar on PATH (the local cluster preloads this one)."
}

data "hangar_workspace" "me" {}

# The helper's token and init script. It lives as long as the workspace, so that stopping and
# starting keep the same helper identity; the server accepts its token while the state holds it.
resource "hangar_agent" "main" {
  # A value shown with the workspace (hangar show, the API, its page) beside the CPU, memory and
  # disk the helper measures by itself: the helper runs the command on the machine every interval
  # seconds. Add one block per value; changing them makes the pod anew at the next build.
  metadata {
    key          = "home_size"
    display_name = "Home size"
    script       = "du -sh \"$HOME\" | cut -f 1"
    interval     = 60
    timeout      = 10
  }

  # The workspace shows an alert when the pod's memory or its home goes over a threshold (percent;
  # enabled = false turns one off). Without this block, both alert at 90.
  resources_monitoring {
    memory {
      threshold = 90
    }
    volume {
      path      = "/home/dev"
      threshold = 80
    }
  }
}

# The machine: it exists while the workspace runs (start_count is 1 on start, 0 on stop and delete).
resource "hangar_kubernetes_pod" "machine" {
  count       = data.hangar_workspace.me.start_count
  kubeconfig  = var.kubeconfig
  namespace   = var.namespace
  name        = "hangar-${lower(data.hangar_workspace.me.id)}"
  image       = var.image
  init_script = hangar_agent.main.init_script
}
