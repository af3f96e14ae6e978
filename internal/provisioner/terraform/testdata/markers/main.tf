# A workspace made of marker files: "home" lives as long as the workspace (created on the first
# start, removed on delete); "session" exists while the workspace runs (count = start_count).
variable "start_count" {
  type = number
}

variable "marker_dir" {
  type = string
}

# Declared so that Hangar passes it; its value must never reach the log.
variable "workspace_name" {
  type    = string
  default = "unnamed"
}

resource "terraform_data" "home" {
  input = "${var.marker_dir}/home"

  provisioner "local-exec" {
    command = "touch '${self.input}'"
  }

  provisioner "local-exec" {
    when    = destroy
    command = "rm -f '${self.input}'"
  }
}

resource "terraform_data" "session" {
  count = var.start_count
  input = "${var.marker_dir}/session-${count.index}"

  provisioner "local-exec" {
    command = "touch '${self.input}'"
  }

  provisioner "local-exec" {
    when    = destroy
    command = "rm -f '${self.input}'"
  }
}
