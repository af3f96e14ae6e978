# A template that honours a devcontainer.json through Hangar's data source (the file sits beside it,
# as a checkout of the repository would), and one whose devcontainer.json asks for privileges.
terraform {
  required_providers {
    hangar = {
      source = "hangar.dev/hangar/hangar"
    }
  }
}

variable "which" {
  type    = string
  default = "devcontainer.json"
}

data "hangar_devcontainer" "dev" {
  json = file("${path.module}/${var.which}")
  name = "app"
}

output "image" {
  value = data.hangar_devcontainer.dev.image
}

output "devcontainer" {
  value = {
    user                = data.hangar_devcontainer.dev.user
    workspace_folder    = data.hangar_devcontainer.dev.workspace_folder
    container_env       = data.hangar_devcontainer.dev.container_env
    remote_env          = data.hangar_devcontainer.dev.remote_env
    forward_ports       = data.hangar_devcontainer.dev.forward_ports
    post_create_command = data.hangar_devcontainer.dev.post_create_command
    post_start_command  = data.hangar_devcontainer.dev.post_start_command
    warnings            = data.hangar_devcontainer.dev.warnings
  }
}
